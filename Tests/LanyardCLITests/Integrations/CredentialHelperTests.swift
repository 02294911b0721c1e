import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardIntegrations

// The credential protocols other tools speak, each exercised by the real client: Docker's
// credential store (the `docker` package from PyPI), kubectl's exec plugin loader (the
// `kubernetes` package against an HTTPS stub API server), curl's netrc reader and the GitHub CLI.

/// A home with one ChatGPT slot ("work") signed in through the library.
struct HelperHome {
    let env: IntegrationHome
    let token: String

    init(config: String) async throws {
        env = try await IntegrationHome(extraConfig: config)
        token = try await env.signIn("work", email: "helper@example.com").tokens.accessToken
    }

    var lanyard: String { builtBinary("lanyard") }

    /// A PATH whose first folder holds `docker-credential-lanyard`, a link to the built binary.
    func pathWithDockerHelper() throws -> String {
        let bin = env.home.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        if !FileManager.default.fileExists(atPath: bin + "/docker-credential-lanyard") {
            try FileManager.default.createSymbolicLink(
                atPath: bin + "/docker-credential-lanyard",
                withDestinationPath: lanyard
            )
        }
        return bin + ":/usr/bin:/bin"
    }

    /// Runs a client driver from Tests/Fixtures/clients with the venv's Python, in this home.
    func client(_ script: String, _ args: [String], path: String? = nil) throws -> (Int32, JSONValue?, String) {
        let python = repositoryRoot.appendingPathComponent(".venv/bin/python").path
        var environment = env.home.environment
        environment["PATH"] = try path ?? pathWithDockerHelper()
        let (status, out, err) = try runProcess(
            python,
            [repositoryRoot.appendingPathComponent("Tests/Fixtures/clients/" + script).path] + args,
            environment: environment
        )
        let last = out.split(separator: "\n").last.map(String.init) ?? ""
        return (status, try? JSONValue.parse(Data(last.utf8)), err)
    }
}

@Suite struct DockerCredentialHelperTests {
    @Test func dockersCredentialStoreGetsTheMappedSlotsToken() async throws {
        let home = try await HelperHome(config: "[docker]\nghcr.io = work\nregistry.local:5000 = work")
        for server in ["ghcr.io", "https://ghcr.io", "https://ghcr.io/v2/", "registry.local:5000"] {
            let (status, answer, err) = try home.client("docker_credentials.py", ["get", server])
            #expect(status == 0, "\(err)")
            #expect(answer?["found"]?.bool == true, "\(server): \(String(describing: answer))")
            #expect(answer?["Secret"]?.string == home.token)
            #expect(answer?["Username"]?.string == "x-access-token")
            #expect(answer?["ServerURL"]?.string == server)
        }
    }

    @Test func anUnmappedRegistryIsNotFoundAndGetsNoToken() async throws {
        let home = try await HelperHome(config: "[docker]\nghcr.io = work")
        for server in ["docker.io", "http://ghcr.io", "ghcr.io.evil.example"] {
            let (status, answer, err) = try home.client("docker_credentials.py", ["get", server])
            #expect(status == 0, "\(err)")
            #expect(answer?["found"]?.bool == false)
            #expect(answer?["error"]?.string == "CredentialsNotFound", "\(server): \(String(describing: answer))")
        }
        // The protocol's exact text, straight from the helper.
        let (status, out, _) = try runProcess(
            try home.pathWithDockerHelper().split(separator: ":")[0] + "/docker-credential-lanyard",
            ["get"],
            environment: home.env.home.environment,
            stdin: Data("docker.io".utf8)
        )
        #expect(status == 1)
        #expect(out == "credentials not found in native keychain\n")
    }

    @Test func listStoreAndEraseNeverTouchTheSlot() async throws {
        let home = try await HelperHome(config: "[docker]\nghcr.io = work")
        let (_, list, _) = try home.client("docker_credentials.py", ["list"])
        #expect(list == .object(["https://ghcr.io": .string("x-access-token")]))
        let (storeStatus, stored, _) = try home.client(
            "docker_credentials.py",
            ["store", "ghcr.io", "someone", "other-secret"]
        )
        #expect(storeStatus == 0 && stored?["ok"]?.bool == true)
        let (eraseStatus, erased, _) = try home.client("docker_credentials.py", ["erase", "ghcr.io"])
        #expect(eraseStatus == 0 && erased?["ok"]?.bool == true)
        let (_, answer, _) = try home.client("docker_credentials.py", ["get", "ghcr.io"])
        #expect(answer?["Secret"]?.string == home.token)
        let listed = list?.serialized() ?? ""
        let leaked = listed.contains(home.token)
        #expect(!leaked)
    }
}

@Suite struct KubeCredentialPluginTests {
    @Test(arguments: ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"])
    func theKubernetesClientAuthenticatesWithTheSlotsToken(apiVersion: String) async throws {
        let home = try await HelperHome(config: "")
        let expected = home.env.home.root + "/expected-token"
        try home.token.write(toFile: expected, atomically: true, encoding: .utf8)
        var args = [
            "--command", home.lanyard, "--arg", "kube-credential", "--arg", "work", "--api-version", apiVersion,
            "--expect-token-file", expected, "--requests", "3",
        ]
        for (k, v) in home.env.home.environment.sorted(by: { $0.key < $1.key }) { args += ["--env", "\(k)=\(v)"] }
        let (status, result, err) = try home.client("kube_exec.py", args)
        #expect(status == 0, "\(err) \(String(describing: result))")
        #expect(result?["ok"]?.bool == true)
        #expect(result?["authorised"] == .number(3))
        // The token's expiry is an hour away: the client runs the plugin once and reuses the answer.
        #expect(result?["plugin_runs"] == .number(1))
    }

    @Test func theExecCredentialCarriesTheExpiryAndTheRequestedVersion() async throws {
        let home = try await HelperHome(config: "")
        let v1 = try home.env.home.run(["kube-credential", "work"])
        #expect(v1.status == 0, "\(v1.stderr)")
        let credential = try JSONValue.parse(Data(v1.stdout.utf8))
        #expect(credential["apiVersion"]?.string == KubeExecCredential.v1)
        #expect(credential["kind"]?.string == "ExecCredential")
        #expect(credential["status"]?["token"]?.string == home.token)
        let expiry = try #require(credential["status"]?["expirationTimestamp"]?.string)
        #expect(RFC3339.date(from: expiry) != nil)
        let beta = try home.env.home.run(
            ["kube-credential", "work"],
            extraEnvironment: [
                "KUBERNETES_EXEC_INFO":
                    #"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","#
                    + #""spec":{"interactive":false}}"#
            ]
        )
        #expect(try JSONValue.parse(Data(beta.stdout.utf8))["apiVersion"]?.string == KubeExecCredential.v1beta1)
        let unknown = try home.env.home.run(
            ["kube-credential", "work"],
            extraEnvironment: ["KUBERNETES_EXEC_INFO": #"{"apiVersion":"client.authentication.k8s.io/v2"}"#]
        )
        #expect(unknown.status == 2)
        #expect(unknown.stdout.isEmpty)
    }
}

@Suite struct NetrcTests {
    @Test func curlSendsTheSlotsTokenFromTheNetrcLines() async throws {
        let home = try await HelperHome(config: "[netrc]\n127.0.0.1 = work")
        let out = try home.env.home.run(["netrc", "127.0.0.1"])
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stdout == "machine 127.0.0.1 login x-access-token password \(home.token)\n")
        let netrc = home.env.home.root + "/netrc"
        try out.stdout.write(toFile: netrc, atomically: true, encoding: .utf8)
        let url = home.env.server.baseURL.appendingPathComponent("/_test/stats").absoluteString
        let (status, _, verbose) = try runProcess(
            "/usr/bin/curl",
            ["-sS", "-v", "-o", "/dev/null", "--netrc-file", netrc, url]
        )
        #expect(status == 0)
        let basic = Data("x-access-token:\(home.token)".utf8).base64EncodedString()
        #expect(verbose.contains("Authorization: Basic \(basic)"))
    }

    @Test func unmappedHostsGetNoLine() async throws {
        let home = try await HelperHome(config: "[netrc]\napi.example.com = work")
        let all = try home.env.home.run(["netrc"])
        #expect(all.stdout.hasPrefix("machine api.example.com login x-access-token password "))
        let other = try home.env.home.run(["netrc", "other.example.com"])
        #expect(other.status == 1)
        #expect(other.stdout.isEmpty)
        #expect(other.stderr.contains("no [netrc] mapping for other.example.com"))
        let json = try home.env.home.run(["netrc", "api.example.com", "other.example.com", "--json"])
        #expect(json.status == 1)
        #expect(json.stderr.isEmpty)
        let document = try JSONValue.parse(Data(json.stdout.utf8))
        #expect(
            document["machines"]
                == .array([
                    .object([
                        "machine": .string("api.example.com"), "login": .string("x-access-token"),
                        "password": .string(home.token), "slot": .string("work"),
                    ])
                ])
        )
        #expect(document["unmapped"] == .array([.string("other.example.com")]))
    }
}

@Suite struct GitHubCLIImportTests {
    /// A gh configuration folder with two accounts, as `gh auth login` writes it.
    func ghConfig(_ home: TestHome) throws -> String {
        let dir = home.root + "/gh"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try """
        github.com:
            user: alice
            oauth_token: gho_aliceToken0001
            git_protocol: https
        ghe.example.com:
            git_protocol: ssh
            oauth_token: gho_bobToken0002
            user: bob

        """.write(toFile: dir + "/hosts.yml", atomically: true, encoding: .utf8)
        return dir
    }

    @Test func importAdoptsWhatTheRealGhHandsOut() async throws {
        let env = try await IntegrationHome()
        let gh = try ghConfig(env.home)
        let extra = ["GH_CONFIG_DIR": gh, "PATH": "/usr/bin:/bin", "GH_TOKEN": "gho_fromTheEnvironment"]
        // The real gh reads the same folder (the environment's GH_TOKEN is not what gh holds).
        let (ghStatus, ghToken, _) = try runProcess(
            "/usr/bin/gh",
            ["auth", "token", "--hostname", "ghe.example.com"],
            environment: env.home.environment.merging(["GH_CONFIG_DIR": gh]) { $1 }
        )
        #expect(ghStatus == 0 && ghToken == "gho_bobToken0002\n")

        let out = try env.home.run(["gh", "import", "--json"], extraEnvironment: extra)
        #expect(out.status == 0, "\(out.stderr)")
        let slots = try JSONValue.parse(Data(out.stdout.utf8))["slots"]
        #expect(
            slots
                == .array([
                    .object([
                        "slot": .string("gh-alice"), "host": .string("github.com"), "user": .string("alice"),
                        "backend": .string("file"), "changed": .bool(true),
                    ]),
                    .object([
                        "slot": .string("gh-bob-ghe.example.com"), "host": .string("ghe.example.com"),
                        "user": .string("bob"),
                        "backend": .string("file"), "changed": .bool(true),
                    ]),
                ])
        )
        #expect(try env.home.run("token", "gh-alice").stdout == "gho_aliceToken0001\n")
        #expect(try env.home.run("env", "gh-alice").stdout.contains("export GH_TOKEN='gho_aliceToken0001'"))
        let envJSON = try env.home.run("env", "gh-alice", "--json")
        #expect(try JSONValue.parse(Data(envJSON.stdout.utf8))["GH_TOKEN"] == .string("gho_aliceToken0001"))
        #expect(envJSON.stdout == (try env.home.run("env", "gh-alice", "--shell", "json")).stdout)
        let both = try env.home.run("env", "gh-alice", "--json", "--shell", "fish")
        #expect(both.status == 2 && both.stdout.contains(#""code": "usage""#))
        // Never refreshed: a gh token has no expiry and no refresh token.
        #expect(try env.home.run("status", "gh-alice", "--json").stdout.contains(#""state": "signed-in""#))
        // Again: nothing changes.
        let again = try env.home.run(["gh", "import", "--hostname", "github.com"], extraEnvironment: extra)
        #expect(again.stdout == "Slot gh-alice already holds gh's alice on github.com.\n")
    }

    @Test func importNamesTheSlotForOneHostAndRefusesAnotherAccountsSlot() async throws {
        let env = try await IntegrationHome()
        let gh = try ghConfig(env.home)
        let extra = ["GH_CONFIG_DIR": gh, "PATH": "/usr/bin:/bin"]
        #expect(
            try env.home.run(["gh", "import", "work-gh", "--hostname", "github.com"], extraEnvironment: extra).status
                == 0
        )
        #expect(try env.home.run("token", "work-gh").stdout == "gho_aliceToken0001\n")
        let clash = try env.home.run(
            ["gh", "import", "work-gh", "--hostname", "ghe.example.com"],
            extraEnvironment: extra
        )
        #expect(clash.status != 0)
        #expect(try env.home.run("token", "work-gh").stdout == "gho_aliceToken0001\n")
        let many = try env.home.run(["gh", "import", "one-slot"], extraEnvironment: extra)
        #expect(many.status == 1)
        #expect(many.stderr.contains("name one with --hostname"))
        let missing = try env.home.run(["gh", "import", "--hostname", "gitlab.com"], extraEnvironment: extra)
        #expect(missing.stderr.contains("gh holds no account for gitlab.com"))
    }

    @Test func aMalformedHostsFileIsATypedErrorNamingTheLine() throws {
        #expect(throws: GitHubCLI.HostsFileError(path: "hosts.yml", line: 2, problem: "is not `key: value`")) {
            _ = try GitHubCLI.parseHosts("github.com:\n    garbage line\n", path: "hosts.yml")
        }
        #expect(throws: GitHubCLI.HostsFileError(path: "hosts.yml", line: 1, problem: "is indented before any host")) {
            _ = try GitHubCLI.parseHosts("    user: x\n", path: "hosts.yml")
        }
        let nested = try GitHubCLI.parseHosts(
            "github.com:\n    users:\n        alice:\n            oauth_token: nested\n    user: alice\n",
            path: "h"
        )
        #expect(nested == [GitHubCLI.Account(host: "github.com", user: "alice", fileToken: nil)])
    }
}
