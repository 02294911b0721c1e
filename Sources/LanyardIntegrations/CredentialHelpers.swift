import FoundationEssentials
import LanyardCore
import LanyardSupport

/// How much a credential helper (`git-credential`, `docker-credential`) reads from the program
/// that runs it. Real requests are a few hundred bytes; the limits only stop input that never
/// ends (`</dev/zero`, a runaway pipe) from growing the process without bound.
package enum HelperInputLimits {
    /// The longest line: 64 KiB.
    package static let lineBytes = 65_536
    /// The most a whole request may hold, line ends included: 1 MiB.
    package static let requestBytes = 1_048_576
}

/// Input that is not the protocol's. Names what is wrong, never the text (it may hold a secret).
package struct DockerCredentialInputError: LanyardError, Equatable {
    package let problem: String
    package var code: ErrorCode { .dockerCredentialInput }
    package var errorDescription: String? { "docker-credential-lanyard: \(problem)" }
}

/// Docker's credential-helper protocol (docker-credential-helpers): the action is the first
/// argument; `get` and `erase` read a server URL on stdin, `store` reads
/// `{"ServerURL", "Username", "Secret"}`; `get` answers the same object and `list` answers
/// `{"URL": "username"}`.
package enum DockerCredential {
    /// What `get` prints (on stdout, with exit 1) for a server Lanyard does not map: the text
    /// Docker's clients look for to tell "not found" from a failure.
    package static let notFoundMessage = "credentials not found in native keychain"

    /// Everything the program sent on `input` (a server URL, or `store`'s JSON), lines joined
    /// with `\n`, within ``HelperInputLimits``: a NUL byte, or a line or the whole past its limit,
    /// fails at once without reading further.
    package static func readInput(_ input: TextInput) throws(DockerCredentialInputError) -> String {
        var lines: [String] = []
        var total = 0
        while true {
            let next: String?
            do { next = try input.line(maxBytes: HelperInputLimits.lineBytes) } catch {
                switch error {
                case .nulByte: throw DockerCredentialInputError(problem: "the input on stdin \(error.problem)")
                case .lineTooLong: throw DockerCredentialInputError(problem: "a line on stdin \(error.problem)")
                case .unreadable: throw DockerCredentialInputError(problem: "stdin \(error.problem)")
                }
            }
            guard let line = next else { break }
            total += line.utf8.count + 1
            guard total <= HelperInputLimits.requestBytes else {
                throw DockerCredentialInputError(
                    problem: "the input on stdin is longer than \(ByteCount.describe(HelperInputLimits.requestBytes))"
                )
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// The `[docker]` key a server URL stands for: `ghcr.io`, `https://ghcr.io`, `ghcr.io/v2/…`
    /// all give `ghcr.io`; a port other than 443 stays (`registry.local:5000`).
    package static func host(ofServerURL serverURL: String) throws(DockerCredentialInputError) -> String {
        var text = serverURL.trimmingSpaces()
        guard !text.isEmpty else { throw DockerCredentialInputError(problem: "the server URL on stdin is empty") }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0 == " " }) else {
            throw DockerCredentialInputError(problem: "the server URL contains spaces or control characters")
        }
        if let scheme = text.firstRange(of: "://") {
            let name = text[..<scheme.lowerBound].lowercased()
            guard name == "https" || name == "http" else {
                throw DockerCredentialInputError(problem: "the server URL's scheme is not http(s)")
            }
            text = String(text[scheme.upperBound...])
        }
        var host = String(text.prefix { $0 != "/" }).lowercased()
        if host.hasSuffix(":443") { host.removeLast(4) }
        guard !host.isEmpty else { throw DockerCredentialInputError(problem: "the server URL has no host") }
        return host
    }

    /// The answer to `get`.
    package static func getAnswer(serverURL: String, username: String, secret: String) -> String {
        JSONValue.object(["ServerURL": .string(serverURL), "Username": .string(username), "Secret": .string(secret)])
            .serialized()
    }

    /// The answer to `list`: each mapped registry (as `https://HOST`) and the username it answers.
    package static func listAnswer(_ entries: [(host: String, username: String)]) -> String {
        JSONValue.object(
            Dictionary(
                entries.map { ("https://\($0.host)", JSONValue.string($0.username)) },
                uniquingKeysWith: { a, _ in a }
            )
        )
        .serialized()
    }

    /// Checks what `store` sent (it is not kept: Lanyard owns these tokens).
    package static func checkStoreInput(_ data: Data) throws(DockerCredentialInputError) {
        guard let object = (try? JSONValue.parse(data))?.object else {
            throw DockerCredentialInputError(problem: "store expects a JSON object on stdin")
        }
        guard object["ServerURL"]?.string != nil else {
            throw DockerCredentialInputError(problem: "store's input has no ServerURL")
        }
    }
}

/// A `KUBERNETES_EXEC_INFO` that kubectl would not send. Names what is wrong.
package struct KubeExecInfoError: LanyardError, Equatable {
    package let problem: String
    package var code: ErrorCode { .kubeExecInfo }
    package var errorDescription: String? { "kube-credential: \(problem)" }
}

/// Kubernetes' exec credential plugins (client.authentication.k8s.io): kubectl runs the plugin
/// and reads an `ExecCredential` with a bearer token and its expiry, asking again only after it.
package enum KubeExecCredential {
    package static let v1 = "client.authentication.k8s.io/v1"
    package static let v1beta1 = "client.authentication.k8s.io/v1beta1"

    /// The API version to answer with: the one `KUBERNETES_EXEC_INFO` asks for, v1 without it.
    package static func apiVersion(execInfo: String?) throws(KubeExecInfoError) -> String {
        guard let execInfo, !execInfo.trimmingSpaces().isEmpty else { return v1 }
        guard let object = (try? JSONValue.parse(Data(execInfo.utf8)))?.object else {
            throw KubeExecInfoError(problem: "KUBERNETES_EXEC_INFO is not a JSON object")
        }
        guard let version = object["apiVersion"]?.string else {
            throw KubeExecInfoError(problem: "KUBERNETES_EXEC_INFO has no apiVersion")
        }
        guard version == v1 || version == v1beta1 else {
            throw KubeExecInfoError(
                problem: "KUBERNETES_EXEC_INFO asks for \(TerminalText.escaped(String(version.prefix(80)))); "
                    + "supported: \(v1), \(v1beta1)"
            )
        }
        return version
    }

    /// The `ExecCredential` document.
    package static func render(apiVersion: String, token: String, expiresAt: Date?) -> String {
        var status: [String: JSONValue] = ["token": .string(token)]
        if let expiresAt { status["expirationTimestamp"] = .string(RFC3339.string(from: expiresAt)) }
        return JSONValue.object([
            "apiVersion": .string(apiVersion), "kind": .string("ExecCredential"), "status": .object(status),
        ])
        .serialized()
    }
}

/// `.netrc` lines (curl, wget, Python's netrc and others read them).
package enum Netrc {
    package struct FieldError: LanyardError, Equatable {
        package let field: String
        package var code: ErrorCode { .netrcField }
        package var errorDescription: String? {
            "the \(field) cannot be written to a netrc file (it is empty or has spaces or control characters)"
        }
    }

    /// `machine HOST login LOGIN password PASSWORD`. netrc has no quoting, so a field with white
    /// space or control characters is refused rather than written in a way readers split.
    package static func line(host: String, login: String, password: String) throws(FieldError) -> String {
        for (name, value) in [("host", host), ("login", login), ("token", password)] {
            guard !value.isEmpty,
                !value.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F || $0 == "\"" })
            else {
                throw FieldError(field: name)
            }
        }
        return "machine \(host) login \(login) password \(password)"
    }
}
