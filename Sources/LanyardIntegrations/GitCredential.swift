import FoundationEssentials
import LanyardCore
import LanyardSupport

/// Input that is not git's protocol. The message names the line, never its text (it may hold a secret).
package struct GitCredentialInputError: LanyardError, Equatable {
    package let line: Int
    package let problem: String
    package var code: ErrorCode { .gitCredentialInput }
    package var errorDescription: String? { "git-credential: input line \(line) \(problem)" }
}

/// git's credential-helper protocol (gitcredentials(7), git-credential(1)): `key=value` lines on
/// stdin, ended by a blank line or end of input; the answer is `key=value` lines on stdout.
package enum GitCredential {
    /// One request from git.
    package struct Request: Equatable, Sendable {
        /// Every attribute in order (`capability[]`, `wwwauth[]` may repeat).
        package var attributes: [(key: String, value: String)] = []

        package init() {}

        package func value(_ key: String) -> String? { attributes.last { $0.key == key }?.value }

        package var `protocol`: String? { value("protocol") ?? url?.scheme?.lowercased() }
        package var host: String? {
            if let host = value("host") { return host }
            guard let url, let host = url.host else { return nil }
            return url.port.map { "\(host):\($0)" } ?? host
        }
        package var path: String? {
            if let path = value("path") { return path }
            guard let url, !url.path.isEmpty, url.path != "/" else { return nil }
            return String(url.path.drop { $0 == "/" })
        }
        var url: URLComponents? { value("url").flatMap(URLComponents.init(string:)) }

        package static func == (a: Request, b: Request) -> Bool {
            a.attributes.map(\.key) == b.attributes.map(\.key) && a.attributes.map(\.value) == b.attributes.map(\.value)
        }
    }

    /// Reads a request from `input`: lines until a blank line or the end of input, each at most
    /// ``HelperInputLimits/lineBytes`` long, the whole at most ``HelperInputLimits/requestBytes``.
    /// A NUL byte or a line or request past its limit fails at once, without reading further.
    package static func read(_ input: TextInput) throws(GitCredentialInputError) -> Request {
        var request = Request()
        var number = 0
        var total = 0
        while true {
            number += 1
            let next: String?
            do { next = try input.line(maxBytes: HelperInputLimits.lineBytes) } catch {
                throw GitCredentialInputError(line: number, problem: error.problem)
            }
            guard var line = next else { break }
            total += line.utf8.count + 1
            guard total <= HelperInputLimits.requestBytes else {
                throw GitCredentialInputError(
                    line: number,
                    problem: "takes the request past \(ByteCount.describe(HelperInputLimits.requestBytes)), "
                        + "the most it may hold"
                )
            }
            if line.hasSuffix("\r") { line.removeLast() }
            if line.isEmpty { break }
            guard let eq = line.firstIndex(of: "=") else {
                throw GitCredentialInputError(line: number, problem: "is not key=value")
            }
            let key = String(line[..<eq])
            guard !key.isEmpty, key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "_-[].".contains($0)) })
            else {
                throw GitCredentialInputError(line: number, problem: "has an invalid key")
            }
            // TextInput refuses NUL bytes; checked again on scalars for callers' own Strings (a NUL
            // followed by a combining mark is one Character that is not "\0").
            guard !line.unicodeScalars.contains("\0") else {
                throw GitCredentialInputError(line: number, problem: TextInput.Failure.nulByte.problem)
            }
            request.attributes.append((key, String(line[line.index(after: eq)...])))
        }
        return request
    }

    /// The slot mapped to `host` and `path` by `[git]` patterns (`HOST` or `HOST/PATH/PREFIX`): the
    /// pattern with the longest matching path prefix wins. Path prefixes match whole segments, and a
    /// last segment `repo` also matches `repo.git`. The path is normalised first, as the server
    /// will read it: percent-escapes decoded, `.` segments dropped and `..` segments applied, so
    /// `bobcorp/../x.git` is `x.git`, not a path under `bobcorp`.
    package static func slot(host: String, path: String?, in mappings: [String: Slot]) -> (pattern: String, slot: Slot)?
    {
        let host = host.lowercased()
        let segments = normalizedSegments(path ?? "")
        var best: (pattern: String, slot: Slot, length: Int)?
        for (pattern, slot) in mappings {
            let parts = pattern.split(separator: "/").map(String.init)
            guard parts.first == host else { continue }
            let prefix = Array(parts.dropFirst())
            guard prefix.count <= segments.count else { continue }
            let matches = prefix.indices.allSatisfy { i in
                segments[i] == prefix[i] || (i == segments.count - 1 && segments[i] == prefix[i] + ".git")
            }
            if matches, prefix.count > best?.length ?? -1 { best = (pattern, slot, prefix.count) }
        }
        return best.map { ($0.pattern, $0.slot) }
    }

    /// The segments of a URL path after RFC 3986 dot-segment removal, each percent-decoded
    /// (an undecodable escape is kept as written). `..` above the root stays at the root.
    static func normalizedSegments(_ path: String) -> [String] {
        var out: [String] = []
        for raw in path.split(separator: "/") {
            let segment = String(raw).percentDecoded()
            switch segment {
            case ".": continue
            case "..": if !out.isEmpty { out.removeLast() }
            default: out.append(segment)
            }
        }
        return out
    }

    /// Whether any `[git]` pattern for `host` has a path (git must then send paths: `useHttpPath`).
    package static func hostUsesPaths(_ host: String, in mappings: [String: Slot]) -> Bool {
        mappings.keys.contains {
            $0.split(separator: "/").first.map(String.init) == host.lowercased() && $0.contains("/")
        }
    }

    /// The answer to `get`: username, password and (when known) its expiry in Unix seconds.
    package static func answer(username: String, password: String, expiresAt: Date?) -> String {
        var text = "username=\(username)\npassword=\(password)\n"
        if let expiresAt { text += "password_expiry_utc=\(Int64(expiresAt.timeIntervalSince1970.rounded(.down)))\n" }
        return text
    }
}
