import Foundation
import LanyardAuth
import LanyardCLI
import LanyardCore
import LanyardIntegrations
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// A private home whose openai provider is the emulator, a file store, and slots signed in
/// through the library. Its commands run without the test keyring's session bus: the slots are
/// in the file store, and doctor must not see the keyring items of the tests running beside it.
struct IntegrationHome {
    let server: OAuthTestServer
    let home = TestHome()
    var codexHome: String { home.root + "/codex" }

    /// - Parameter emulatorArguments: more arguments for the emulator (the browser sign-in's
    ///   registered redirect addresses).
    init(extraConfig: String = "", emulatorArguments: [String] = []) async throws {
        server = try OAuthTestServer(.chatgptEmulator, arguments: emulatorArguments)
        home.withoutSessionBus = true
        try home.useEmulator(server, extraConfig: extraConfig)
        try await server.hook("/_test/config", ["interval": 0])
        try FileManager.default.createDirectory(atPath: codexHome, withIntermediateDirectories: true)
    }

    var paths: Paths { Paths(environment: home.environment) }

    func manager() throws -> AccountManager {
        let paths = self.paths
        return AccountManager(
            paths: paths,
            config: try ConfigFile.load(path: paths.configFile).config,
            openStore: { _, _ in EncryptedFileStore(paths: paths) },
            transport: URLSessionTransport()
        )
    }

    @discardableResult
    func signIn(_ slot: String, email: String, plan: String = "plus") async throws -> Credential {
        try await server.signIn(manager(), slot: slot, email: email, plan: plan)
    }

    func stored(_ slot: String) throws -> Credential { try EncryptedFileStore(paths: paths).get(try Slot(slot)) }
    func run(_ args: String...) throws -> TestHome.Output {
        try home.run(args, extraEnvironment: ["CODEX_HOME": codexHome])
    }
}

@Suite struct CodexIntegrationTests {
    /// Without `[integrations] codex = true`, a switch away from the account in Codex's auth.json
    /// says that Codex did not follow, and how to make it.
    @Test func switchSaysWhenCodexStillUsesAnotherAccount() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("alice", email: "alice@example.com")
        try await env.signIn("work", email: "work@example.com")
        #expect(try env.run("codex", "export", "alice").status == 0)
        let away = try env.run("switch", "work")
        #expect(away.status == 0)
        #expect(
            away.stderr.contains(
                "Codex still uses alice@example.com: set `[integrations] codex = true` "
                    + "in config.ini, or run `lanyard codex export`"
            ),
            "\(away.stderr)"
        )
        let json = try env.run("switch", "work", "--json")
        #expect(
            (try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["codex_still_uses"]
                as? String == "alice@example.com"
        )
        let back = try env.run("switch", "alice")
        #expect(back.status == 0 && !back.stderr.contains("Codex still uses"), "\(back.stderr)")
    }

    @Test func exportWritesAuthJSONInCodexSchema() async throws {
        let env = try await IntegrationHome()
        let credential = try await env.signIn("work", email: "w@example.com")
        let result = try env.run("codex", "export", "work")
        #expect(result.status == 0, "\(result.stderr)")
        let path = env.codexHome + "/auth.json"
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        )
        #expect(Set(object.keys) == ["auth_mode", "OPENAI_API_KEY", "tokens", "last_refresh"])
        #expect(object["auth_mode"] as? String == "chatgpt" && object["OPENAI_API_KEY"] is NSNull)
        let tokens = try #require(object["tokens"] as? [String: Any])
        #expect(Set(tokens.keys) == ["id_token", "access_token", "refresh_token", "account_id"])
        #expect(tokens["refresh_token"] as? String == credential.tokens.refreshToken)
        #expect(tokens["account_id"] as? String == credential.account.accountID)
        #expect(RFC3339.date(from: object["last_refresh"] as? String ?? "") != nil)
        #expect(permissionBits(path) == 0o600)
        #expect(
            try CodexAuthFile.parse(Data(contentsOf: URL(fileURLWithPath: path)), path: path).idToken
                == credential.tokens.idToken
        )
        #expect(!result.stdout.contains(credential.tokens.accessToken))

        // A malformed auth.json is refused with the field named.
        try Data(#"{"auth_mode":"chatgpt","tokens":{"access_token":"a"},"last_refresh":"2027-01-01T00:00:00Z"}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        let bad = try env.run("codex", "import", "other")
        #expect(bad.status == 1 && bad.stderr.contains(".tokens.id_token is missing"))
    }

    @Test func importAdoptsCodexSignInWithoutRevoking() async throws {
        let env = try await IntegrationHome()
        let credential = try await env.signIn("work", email: "w@example.com")
        #expect(try env.run("codex", "export", "work").status == 0)
        let imported = try env.run("codex", "import", "--json")
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("\"slot\": \"w\""))
        #expect(try env.stored("w").tokens.refreshToken == credential.tokens.refreshToken)
        #expect(try await env.server.stat("families_revoked") == 0)
    }

    /// Codex rotates the tokens in auth.json; switching away copies them back into the slot, and
    /// the server never sees a used refresh token.
    @Test func switchCopiesRotatedTokensBack() async throws {
        let env = try await IntegrationHome(extraConfig: "[integrations]\ncodex = true")
        try await env.signIn("a", email: "a@example.com")
        try await env.signIn("b", email: "b@example.com")
        #expect(try env.run("switch", "a").status == 0)
        let updated = try await env.codexRefreshes()

        let switched = try env.run("switch", "b", "--json")
        #expect(switched.status == 0, "\(switched.stderr)")
        #expect(switched.stdout.contains("\"copied_back\": true"))
        #expect(try env.stored("a").tokens.refreshToken == updated.refreshToken)
        #expect(try env.authJSON().accountID == (try env.stored("b").account.accountID))
        #expect(try env.run("refresh", "a").status == 0)
        #expect(try await env.server.stat("refresh_reused") == 0)
    }
}

extension IntegrationHome {
    /// What Codex does when it refreshes: rotate at the server, rewrite auth.json in place.
    func codexRefreshes() async throws -> CodexAuthFile {
        let path = codexHome + "/auth.json"
        let live = try CodexAuthFile.parse(Data(contentsOf: URL(fileURLWithPath: path)), path: path)
        var config = ProviderConfig.openAI
        config.issuer = server.baseURL
        let rotated = try await OpenAIProvider(config: config, transport: URLSessionTransport()).refresh(
            refreshToken: live.refreshToken
        )
        var updated = live
        updated.accessToken = rotated.accessToken
        updated.refreshToken = try #require(rotated.refreshToken)
        updated.idToken = rotated.idToken ?? live.idToken
        updated.lastRefresh = Date()
        try CodexHome(directory: codexHome).write(updated)
        return updated
    }

    func authJSON() throws -> CodexAuthFile {
        let path = codexHome + "/auth.json"
        return try CodexAuthFile.parse(Data(contentsOf: URL(fileURLWithPath: path)), path: path)
    }
}

@Suite struct CodexTokenFamilyTests {
    /// `codex export` of another slot replaces auth.json: the tokens Codex rotated there go back
    /// into their own slot first, so that account's only live refresh token is not lost.
    @Test func exportCopiesCodexRotationsBackBeforeOverwriting() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("a", email: "a@example.com")
        try await env.signIn("b", email: "b@example.com")
        #expect(try env.run("codex", "export", "a").status == 0)
        let rotated = try await env.codexRefreshes()
        let exported = try env.run("codex", "export", "b")
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(try env.stored("a").tokens.refreshToken == rotated.refreshToken)
        #expect(try env.authJSON().accountID == (try env.stored("b").account.accountID))
        #expect(try env.run("refresh", "a").status == 0)
        #expect(try await env.server.stat("refresh_reused") == 0)
    }

    /// An auth.json Lanyard wrote and then refreshed past holds a spent token, however its
    /// `last_refresh` compares (whole seconds: the crash soak wrote, refreshed and exported again
    /// within one second, and the next refresh was `refresh_token_reused`). Here its date is an
    /// hour ahead, as a skewed clock would write it: still never adopted.
    @Test func aStaleAuthJSONIsNeverAdoptedWhateverItsDate() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("a", email: "a@example.com")
        #expect(try env.run("codex", "export", "a").status == 0)
        var stale = try env.authJSON()
        #expect(try env.run("refresh", "a").status == 0)
        stale.lastRefresh = Date() + 3600
        try CodexHome(directory: env.codexHome).write(stale)
        let exported = try env.run("codex", "export", "a")
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(try env.stored("a").tokens.refreshToken != stale.refreshToken)
        #expect(try env.authJSON().refreshToken == (try env.stored("a").tokens.refreshToken))
        #expect(try env.run("refresh", "a").status == 0)
        #expect(try await env.server.stat("refresh_reused") == 0)
    }

    /// With `[integrations] codex = true`, a refresh Lanyard makes (here `refresh`, as the agent
    /// would) adopts Codex's newer tokens first and writes the new ones to auth.json after, so
    /// Codex and Lanyard take turns refreshing one token family without either reusing a token.
    @Test func refreshesKeepAuthJSONInStep() async throws {
        let env = try await IntegrationHome(extraConfig: "[integrations]\ncodex = true")
        try await env.signIn("a", email: "a@example.com")
        #expect(try env.run("switch", "a").status == 0)
        for round in 0..<3 {
            let refreshed = try env.run("refresh", "a")
            #expect(refreshed.status == 0, "round \(round): \(refreshed.stderr)")
            #expect(
                try env.authJSON().refreshToken == (try env.stored("a").tokens.refreshToken),
                "round \(round): auth.json was not updated"
            )
            let codex = try await env.codexRefreshes()
            #expect(try env.run("refresh", "a").status == 0)
            #expect(
                try env.stored("a").tokens.refreshToken != codex.refreshToken,
                "round \(round): Lanyard refreshed Codex's rotation"
            )
        }
        #expect(try await env.server.stat("refresh_reused") == 0)
        #expect(try await env.server.stat("families_revoked") == 0)
    }
}

@Suite struct ExecAndEnvTests {
    @Test func twoExecsSeeTheirOwnSlotsAndCopyBackRotations() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("a", email: "a@example.com")
        try await env.signIn("b", email: "b@example.com")
        // The command rotates its tokens at the server and rewrites auth.json, as Codex would.
        let script = """
            import json, os, sys, urllib.request, datetime
            home = os.environ["CODEX_HOME"]; path = os.path.join(home, "auth.json")
            auth = json.load(open(path))
            print(os.environ["LANYARD_ACCOUNT"], auth["tokens"]["access_token"], flush=True)
            req = urllib.request.Request(sys.argv[1] + "/oauth/token", \
            method="POST", headers={"Content-Type": "application/json"},
                data=json.dumps({"client_id": "app_EMoamEEZ73f0CkXaXp7hrann", "grant_type": "refresh_token",
                                 "refresh_token": auth["tokens"]["refresh_token"]}).encode())
            new = json.load(urllib.request.urlopen(req))
            auth["tokens"].update({k: new[k] for k in ("access_token", "refresh_token", "id_token") if k in new})
            auth["last_refresh"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            json.dump(auth, open(path, "w"))
            open(os.path.join(os.environ["OUT"], os.environ["LANYARD_ACCOUNT"]), \
            "w").write(auth["tokens"]["refresh_token"])
            """
        let scriptPath = env.home.root + "/rotate.py"
        try script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let out = env.home.root + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let runs = try ["a", "b"].map { slot in
            try env.home.start(
                ["exec", "--account", slot, "--", "/usr/bin/python3", scriptPath, env.server.baseURL.absoluteString],
                extraEnvironment: ["OUT": out]
            )
        }
        var printed: [String: String] = [:]
        for ((p, stdout, stderr), slot) in zip(runs, ["a", "b"]) {
            let line = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let err = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            #expect(p.terminationStatus == 0, "\(err)")
            printed[slot] = line
        }
        #expect(printed["a"]?.hasPrefix("a ") == true && printed["b"]?.hasPrefix("b ") == true)
        #expect(printed["a"] != printed["b"])
        for slot in ["a", "b"] {
            let rotated = try String(contentsOfFile: out + "/" + slot, encoding: .utf8)
            #expect(try env.stored(slot).tokens.refreshToken == rotated, "\(slot) copied back")
        }
        let leftovers =
            (try? FileManager.default.contentsOfDirectory(atPath: env.home.root + "/run/lanyard/exec")) ?? []
        #expect(leftovers.isEmpty, "private homes removed")
        #expect(try env.run("refresh", "a").status == 0)
        #expect(try await env.server.stat("refresh_reused") == 0)
    }

    @Test func exitStatusAndSIGTERMPassThrough() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("a", email: "a@example.com")
        #expect(try env.run("exec", "--account", "a", "--", "sh", "-c", "exit 42").status == 42)
        let (p, stdout, _) = try env.home.start([
            "exec", "--account", "a", "--", "sh", "-c",
            "trap 'echo got-term; exit 143' TERM; echo ready; while :; do sleep 0.05; done",
        ])
        var seen = ""
        while !seen.contains("ready") {
            // Whatever has arrived (read(upToCount:) waits for all 64).
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        kill(p.processIdentifier, SIGTERM)
        seen += String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(seen.contains("got-term"))
        #expect(p.terminationStatus == 143)
    }

    @Test func envPrintsShellLines() async throws {
        let env = try await IntegrationHome(
            extraConfig: "[provider.openai]\nenv.OPENAI_TOKEN = access_token\nenv.OPENAI_ACCOUNT = account_id"
        )
        let credential = try await env.signIn("a", email: "a@example.com")
        let bash = try env.run("env", "a")
        #expect(bash.stdout.contains("export LANYARD_ACCOUNT='a'"))
        #expect(bash.stdout.contains("export OPENAI_TOKEN='\(credential.tokens.accessToken)'"))
        #expect(
            try env.run("env", "a", "--shell", "fish").stdout.contains(
                "set -gx OPENAI_ACCOUNT '\(credential.account.accountID ?? "")'"
            )
        )
        let json = try env.run("env", "a", "--shell", "json")
        #expect(json.stdout.contains("\"LANYARD_ACCOUNT\": \"a\""))
        #expect(try env.run("env", "a", "--shell", "tcsh").status == 2)
    }
}

@Suite struct SwitchBestTests {
    @Test func choosesTheSlotWithMostHeadroom() async throws {
        let env = try await IntegrationHome(extraConfig: "[backoff]\nmax-retries = 0")
        var accounts: [String: String] = [:]
        for (slot, email) in [
            ("busy", "busy@x.com"), ("calm", "calm@x.com"), ("capped", "capped@x.com"), ("dead", "dead@x.com"),
        ] {
            accounts[slot] = try await env.signIn(slot, email: email).account.accountID
        }
        #expect(try env.run("switch", "busy").status == 0)
        func window(_ used: Int) -> [String: Any] {
            ["used_percent": used, "limit_window_seconds": 18000, "reset_after_seconds": 600]
        }
        try await env.server.hook(
            "/_test/usage",
            ["account_id": accounts["busy"]!, "primary_window": window(80), "secondary_window": window(30)]
        )
        try await env.server.hook(
            "/_test/usage",
            ["account_id": accounts["calm"]!, "primary_window": window(20), "secondary_window": window(35)]
        )
        try await env.server.hook("/_test/usage", ["account_id": accounts["capped"]!, "primary_window": window(5)])
        try await env.server.hook("/_test/usage_limit", ["account_id": accounts["capped"]!, "resets_in_seconds": 3600])
        try Registry(paths: env.paths).updateInTest { $0.slots[try Slot("dead")]?.state = .reauthenticationRequired }
        let result = try env.run("switch", "--best")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("busy            80% used in its busiest window"))
        #expect(result.stdout.contains("calm            35% used in its busiest window"))
        #expect(result.stdout.contains("capped          at its usage limit"))
        #expect(result.stdout.contains("dead            skipped: sign-in required"))
        #expect(result.stdout.contains("Choosing calm"))
        #expect(try Registry(paths: env.paths).loadInTest().active?.name == "calm")
    }
}

/// Tokens never follow a redirect: a provider endpoint that answers 302 to another origin gets
/// the 302 as its answer, and the other server never sees a request.
@Suite struct RedirectTests {
    @Test func aRedirectToAnotherOriginIsNotFollowed() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("work", email: "r@example.com")
        let elsewhere = try OAuthTestServer(.chatgptEmulator)
        try await env.server.hook(
            "/_test/fault",
            [
                "endpoint": "usage", "type": "status", "status": 302, "count": 5,
                "headers": [
                    "Location": elsewhere.baseURL.appendingPathComponent("/backend-api/wham/usage").absoluteString
                ],
            ]
        )
        let out = try env.run("usage", "work", "--json")
        #expect(out.status == 6, "\(out.stdout) \(out.stderr)")
        #expect(out.stdout.contains("302"))
        #expect(try await elsewhere.stat("usage_requests") == 0)
        #expect(try await env.server.stat("refreshes_succeeded") == 0)
    }
}

/// A refresh never hands its refresh token to a server it has not verified, nor to another one
/// it is redirected to.
@Suite struct TokenEndpointTrustTests {
    /// The token endpoint served over TLS by a second emulator, with a certificate for the right
    /// name or another, trusted or not. Trust is given to `lanyard` alone, in a mount namespace
    /// whose system CA bundle is the test certificate (URLSession on Linux reads only that bundle).
    /// The control ("trusted, right name") reaches the server, which does not know the token.
    @Test(arguments: ["trusted, right name", "trusted, wrong name", "untrusted, right name"])
    func tlsTokenEndpoint(_ setting: String) async throws {
        let env = try await IntegrationHome()
        try await env.signIn("work", email: "t@example.com")
        let before = try env.stored("work")
        let (cert, key) = try selfSignedCertificate(
            setting.hasSuffix("wrong name") ? "DNS:wrong.example" : "IP:127.0.0.1",
            in: env.home.root
        )
        let tls = try OAuthTestServer(.chatgptEmulator, arguments: ["--tls-cert", cert, "--tls-key", key])
        let config = try String(contentsOfFile: env.paths.configFile, encoding: .utf8)
        try env.home.writeConfig(
            config.replacingOccurrences(
                of: "issuer = \(env.server.baseURL.absoluteString)",
                with: "issuer = \(tls.baseURL.absoluteString)"
            )
        )
        let trusted = setting.hasPrefix("trusted")
        let launcher =
            trusted
            ? [
                "/usr/bin/unshare", "-r", "-m", "/bin/sh", "-c",
                "mount --bind \"$0\" /etc/ssl/certs/ca-certificates.crt && exec \"$@\"", cert,
            ] : []
        let out = try env.home.run(["refresh", "work", "--json"], launcher: launcher)
        // The test's own look at the server's counters skips verification (curl -k): URLSession cannot trust it.
        let (_, stats, _) = try runProcess(
            "/usr/bin/curl",
            ["-sk", tls.baseURL.appendingPathComponent("/_test/stats").absoluteString]
        )
        let reached = (try JSONValue.parse(Data(stats.utf8)))["requests"]?["oauth_token"]?.number.map(Int.init) ?? -1
        if setting == "trusted, right name" {
            #expect(reached == 1, "the control reached the TLS server: \(out.stdout) \(out.stderr)")
            #expect(out.status == 4, "a token the server does not know: \(out.stdout)")
        } else {
            #expect(out.status == 6, "\(out.stdout) \(out.stderr)")
            #expect(out.stdout.contains("SSL") || out.stdout.contains("certificate"), "\(out.stdout)")
            #expect(reached == 0, "no request got past the handshake")
            #expect(try env.stored("work") == before)
            #expect(try Registry(paths: env.paths).loadInTest().slots[try Slot("work")]?.state.name == "signed-in")
        }
    }

    /// A 302, 307 or 308 from the token endpoint to another origin (307 and 308 would resend
    /// the form with the refresh token) is the answer, not followed.
    @Test(arguments: [302, 307, 308])
    func aRefreshRedirectIsNotFollowed(_ status: Int) async throws {
        let env = try await IntegrationHome()
        try await env.signIn("work", email: "r@example.com")
        let before = try env.stored("work")
        let elsewhere = try OAuthTestServer(.chatgptEmulator)
        try await env.server.hook(
            "/_test/fault",
            [
                "endpoint": "oauth_token", "type": "status", "status": status, "count": 5,
                "headers": ["Location": elsewhere.baseURL.appendingPathComponent("/oauth/token").absoluteString],
            ]
        )
        let out = try env.run("refresh", "work", "--json")
        #expect(out.status == 6, "\(out.stdout) \(out.stderr)")
        #expect(try await elsewhere.stat("requests.oauth_token") == 0)
        #expect(try env.stored("work") == before)
    }
}
