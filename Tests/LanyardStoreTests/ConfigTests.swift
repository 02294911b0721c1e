import Foundation
import LanyardCore
import Testing

@testable import LanyardStore

@Suite struct ConfigTests {
    func parse(_ text: String) throws -> ConfigFile.Loaded { try ConfigFile.parse(Data(text.utf8), path: "config.ini") }

    @Test func missingFileGivesDefaults() throws {
        let loaded = try ConfigFile.load(path: TempDirectory().path + "/none.ini")
        #expect(loaded.config == LanyardConfig())
        #expect(loaded.warnings.isEmpty)
        #expect(loaded.config.providers["openai"]?.clientID == "app_EMoamEEZ73f0CkXaXp7hrann")
    }

    /// Provider URLs carry tokens: plain http only to this machine.
    @Test func plainHTTPIsOnlyForLoopback() throws {
        for host in ["127.0.0.1:8080", "localhost", "[::1]:9000", "127.1.2.3"] {
            #expect(
                try parse("[provider.openai]\nissuer = http://\(host)\n").config.providers["openai"]?.issuer.host != nil
            )
        }
        for key in [
            "issuer", "token-endpoint", "device-authorization-endpoint", "revocation-endpoint", "usage-base-url",
        ] {
            let text =
                "[provider.corp]\ntype = device-code\nissuer = "
                + "https://id.example\nclient-id = c\n\(key) = http://id.example/x\n"
            #expect(
                throws: ConfigError.invalidValue(
                    path: "config.ini",
                    group: "provider.corp",
                    key: key,
                    detail: "plain http is only allowed to this machine (localhost, 127.0.0.1, ::1); use https",
                    line: 5
                )
            ) {
                try parse(text)
            }
        }
        #expect(throws: ConfigError.self) { try parse("[provider.openai]\nissuer = http://127.0.0.1.evil.example\n") }
    }

    /// `usage-page-url`: ChatGPT's usage page by default, replaceable, https only; generic
    /// providers have none unless the config names one.
    @Test func usagePageURL() throws {
        #expect(
            try parse("").config.providers["openai"]?.usagePageURL?.absoluteString
                == "https://chatgpt.com/codex/settings/usage"
        )
        #expect(
            try parse("[provider.openai]\nusage-page-url = https://usage.example/me\n").config.providers["openai"]?
                .usagePageURL?
                .absoluteString == "https://usage.example/me"
        )
        let corp = "[provider.corp]\ntype = device-code\nissuer = https://id.example\nclient-id = c\n"
        #expect(try parse(corp).config.providers["corp"]?.usagePageURL == nil)
        #expect(throws: ConfigError.self) { try parse(corp + "usage-page-url = http://usage.example/\n") }
        #expect(throws: ConfigError.self) { try parse(corp + "usage-page-url = file:///etc/passwd\n") }
    }

    /// `env.NAME` must be a name every shell `lanyard env` writes for accepts.
    @Test func envNamesAreShellIdentifiers() throws {
        for bad in ["1BAD", "É", "A-B", "A B", "a.b", "ÅX"] {
            #expect(throws: ConfigError.self, "\(bad)") { try parse("[provider.openai]\nenv.\(bad) = access_token\n") }
        }
        for good in ["GH_TOKEN", "_x", "a1"] {
            #expect(
                try parse("[provider.openai]\nenv.\(good) = access_token\n").config.providers["openai"]?.environment[
                    good
                ] == "access_token"
            )
        }
    }

    /// Dotfile managers make config.ini a link: followed when the link and its file are yours and
    /// no one else can write the file.
    @Test func aConfigSymlinkIsFollowedWhenItIsSafe() throws {
        let dir = TempDirectory()
        let target = dir.path + "/dotfiles-config.ini"
        let link = dir.path + "/config.ini"
        try "[refresh]\nlead = 42\n".write(toFile: target, atomically: true, encoding: .utf8)
        chmod(target, 0o644)
        #expect(symlink(target, link) == 0)
        #expect(try ConfigFile.load(path: link).config.refreshLead == 42)
        chmod(target, 0o664)
        #expect(throws: StoreError.self) { try ConfigFile.load(path: link) }
        chmod(target, 0o646)
        #expect(throws: StoreError.self) { try ConfigFile.load(path: link) }
        chmod(target, 0o600)
        unlink(link)
        #expect(symlink(dir.path + "/missing.ini", link) == 0)
        #expect(throws: StoreError.self) { try ConfigFile.load(path: link) }
        unlink(link)
        #expect(symlink(dir.path, link) == 0)
        #expect(throws: StoreError.self, "a link to a folder") { try ConfigFile.load(path: link) }
    }

    @Test func readsEverySetting() throws {
        let loaded = try parse(
            """
            # comment
            [store]
            backend = file
            timeout = 2.5
            interactive-timeout = 60
            unlock-cache = 120
            [refresh]
            lead = 30
            [backoff]
            max-retries = 3
            initial-delay = 0.5
            maximum-delay = 10
            respect-retry-after = false
            [integrations]
            codex = true
            [provider.github]
            type = device-code
            issuer = http://127.0.0.1:8080
            client-id = abc
            scopes = openid email
            plan-claim = org.example.plan
            env.GH_TOKEN = access_token
            [provider.openai]
            issuer = http://127.0.0.1:9999
            """
        )
        let c = loaded.config
        #expect(loaded.warnings.isEmpty)
        #expect(
            c.backend == .file && c.storeTimeout == 2.5 && c.interactiveStoreTimeout == 60
                && c.unlockCacheSeconds == 120
        )
        #expect(c.refreshLead == 30)
        #expect(
            c.backoff
                == BackoffPolicy(maxRetries: 3, initialDelay: 0.5, maximumDelay: 10, respectsRetryAfterHeader: false)
        )
        #expect(c.codexIntegration)
        let gh = try #require(c.providers["github"])
        #expect(gh.kind == .deviceCode && gh.clientID == "abc" && gh.scopes == ["openid", "email"])
        #expect(gh.planClaim == "org.example.plan" && gh.environment == ["GH_TOKEN": "access_token"])
        let openai = try #require(c.providers["openai"])
        #expect(openai.issuer.absoluteString == "http://127.0.0.1:9999")
        #expect(openai.clientID == ProviderConfig.openAI.clientID, "unset keys keep the built-in values")
    }

    @Test func unknownKeysAndGroupsWarn() throws {
        let loaded = try parse("[store]\nbackend = auto\ncolour = blue\n[mystery]\na = 1\n")
        #expect(
            loaded.warnings == [
                "config.ini:3: unknown key \"colour\" in [store] (ignored)",
                "config.ini:4: unknown group [mystery] (ignored)",
            ]
        )
    }

    /// A misspelt group or key is warned about with the name it is close to; a name close to
    /// nothing gets no guess.
    @Test func misspeltGroupsAndKeysGetASuggestion() throws {
        let loaded = try parse(
            "# mine\n[stroe]\nbackend = file\n\n[store]\nbakend = "
                + "file\n[provider.openai]\nissuerr = https://a.example\n[fleat]\n"
        )
        #expect(
            loaded.warnings == [
                "config.ini:2: unknown group [stroe] (ignored; did you mean [store]?)",
                "config.ini:6: unknown key \"bakend\" in [store] (ignored; did you mean \"backend\"?)",
                "config.ini:8: unknown key \"issuerr\" in [provider.openai] (ignored; did you mean \"issuer\"?)",
                "config.ini:9: unknown group [fleat] (ignored; did you mean [fleet]?)",
            ]
        )
        #expect(loaded.config.backend == .auto, "a misspelt key sets nothing")
    }

    /// `[provider.opneai]` (no type) is a misspelt built-in provider, not one missing its `type`.
    @Test func anUnknownProviderIsNamedWithTheOneItIsCloseTo() throws {
        let text = "[store]\nbackend = file\n[provider.opneai]\nissuer = https://a.example\n"
        #expect(
            throws: ConfigError.invalidValue(
                path: "config.ini",
                group: "provider.opneai",
                key: "",
                detail: "unknown provider \"opneai\" (did you mean [provider.openai]? "
                    + "the built-in ones are openai and github; "
                    + "a provider of your own needs type = device-code, issuer and client-id)",
                line: 3
            )
        ) { try parse(text) }
        do { _ = try parse(text) } catch {
            #expect(
                error.localizedDescription.hasPrefix(
                    "config.ini:3: [provider.opneai]: unknown provider \"opneai\" (did you mean [provider.openai]?"
                )
            )
        }
        // Far from every built-in one: no guess, the same advice.
        do { _ = try parse("[provider.corp]\nissuer = https://a.example\n") } catch {
            #expect(
                error.localizedDescription == "config.ini:1: [provider.corp]: unknown provider "
                    + "\"corp\" (the built-in ones are openai and github; "
                    + "a provider of your own needs type = device-code, issuer and client-id)"
            )
        }
    }

    /// GLib starts a comment only at the beginning of a line: a refused value holding one says so,
    /// and an accepted one is warned about.
    @Test func aCommentAfterAValueGetsAHint() throws {
        #expect(
            throws: ConfigError.invalidValue(
                path: "config.ini",
                group: "store",
                key: "backend",
                detail: "expected auto, secret-service or file, got \"file # comment\"; "
                    + ConfigFile.commentHint,
                line: 3
            )
        ) {
            try parse("[store]\n# the file backend\nbackend = file # comment\n")
        }
        let loaded = try parse("[agent]\nhook = notify-send # for now\n")
        #expect(
            loaded.warnings == ["config.ini:2: [agent] hook is \"notify-send # for now\": " + ConfigFile.commentHint]
        )
        #expect(try parse("[agent]\nhook = notify-send '#1'\n").warnings.isEmpty, "a # inside a word is no comment")
    }

    /// `endpoints` is a comma-separated list: one written with spaces is refused with the list as
    /// it should be written.
    @Test func spaceSeparatedEndpointsGetTheCommaForm() {
        #expect(
            throws: ConfigError.invalidValue(
                path: "config.ini",
                group: "fleet",
                key: "endpoints",
                detail: "endpoints are separated by commas, not spaces: "
                    + "endpoints = https://a.example:2379, https://b.example:2379",
                line: 4
            )
        ) {
            try parse("[fleet]\nname = team\nmachine = m1\nendpoints = https://a.example:2379 https://b.example:2379\n")
        }
        do { _ = try parse("[fleet]\nname = team\nmachine = m1\nendpoints = https://a.example:2379 # primary\n") } catch
        {
            #expect(
                error.localizedDescription.hasSuffix(ConfigFile.commentHint),
                "a comment is explained as one, not as a list"
            )
        }
    }

    /// Found by the documents fuzzer: names and values from the file reached warnings and errors
    /// raw (a terminal would obey an ESC or CR in them). GLib refuses control characters in group
    /// names, not in values or every key: whatever the outcome, its text is escaped.
    @Test(arguments: [
        "[store]\nbackend = fi\u{1b}]0;owned\u{7}le\n", "[store]\nbe\u{7}ep = 1\n", "[refresh]\nlead = 1\u{1b}[2J\n",
        "[provider.x]\ntype = rfc8628\nissuer = https://a\u{1b}b.example\n",
    ])
    func controlCharactersFromTheFileAreEscaped(_ text: String) {
        var shown: [String] = []
        do { shown = try ConfigFile.parse(Data(text.utf8), path: "config.ini").warnings } catch {
            shown = [error.errorDescription ?? ""]
        }
        #expect(!shown.isEmpty, "the input was neither warned about nor refused")
        for line in shown {
            #expect(!line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f }, "\(line.debugDescription)")
        }
    }

    @Test func aMalformedFileNamesTheLine() {
        #expect(throws: ConfigError.self) { try parse("[store]\nbackend = auto\nthis is not a key\n") }
        do { _ = try parse("[store]\nbackend = auto\nthis is not a key\n") } catch let error as ConfigError {
            guard case .malformed(_, let line, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(line == 3)
            #expect(error.localizedDescription.hasPrefix("config.ini:3: "))
        } catch { Issue.record("\(error)") }
    }

    @Test func badValuesNameGroupAndKey() {
        #expect(
            throws: ConfigError.invalidValue(
                path: "config.ini",
                group: "store",
                key: "backend",
                detail: "expected auto, secret-service or file, got \"cloud\"",
                line: 2
            )
        ) {
            try parse("[store]\nbackend = cloud\n")
        }
        #expect(throws: ConfigError.self) { try parse("[store]\ntimeout = -1\n") }
        // Numbers past 10^9 used to reach Int(_:) and trap (max-retries, max-bytes).
        #expect(
            throws: ConfigError.invalidValue(
                path: "config.ini",
                group: "backoff",
                key: "max-retries",
                detail: "expected a number from 0 to 1000000000, got \"1e300\"",
                line: 2
            )
        ) {
            try parse("[backoff]\nmax-retries = 1e300\n")
        }
        #expect(
            throws: ConfigError.invalidValue(
                path: "config.ini",
                group: "store",
                key: "timeout",
                detail: "expected a number from 0.1 to 1000000000, got \"0\"",
                line: 2
            )
        ) {
            try parse("[store]\ntimeout = 0\n")
        }
        #expect(throws: ConfigError.self) { try parse("[backoff]\nrespect-retry-after = maybe\n") }
        #expect(throws: ConfigError.self) { try parse("[provider.x]\ntype = device-code\nclient-id = a\n") }
        #expect(throws: ConfigError.self) {
            try parse("[provider.x]\ntype = device-code\nissuer = ftp://h\nclient-id = a\n")
        }
        #expect(throws: ConfigError.self) {
            try parse("[provider.x]\ntype = magic\nissuer = http://h\nclient-id = a\n")
        }
    }

    @Test func streamSectionSetsThePolicyAndModel() throws {
        #expect(try parse("").config.streaming == .default)
        #expect(try parse("[stream]\ntransport = sse\n").config.streaming == .httpSSEOnly)
        let custom = try parse(
            "[stream]\ntransport = websocket\nreconnect-attempts = 2\nfallback = false\nmodel = m-1\n"
        )
        #expect(
            custom.config.streaming
                == StreamingTransportPolicy(
                    prefersWebSocket: true,
                    maxWebSocketReconnectionAttempts: 2,
                    fallsBackToHTTPSSE: false
                )
        )
        #expect(custom.config.streamModel == "m-1")
        #expect(custom.warnings.isEmpty)
        #expect(
            throws: ConfigError.invalidValue(
                path: "config.ini",
                group: "stream",
                key: "transport",
                detail: "expected websocket or sse, got \"carrier pigeon\"",
                line: 2
            )
        ) {
            try parse("[stream]\ntransport = carrier pigeon\n")
        }
        #expect(throws: ConfigError.self) { try parse("[stream]\nreconnect-attempts = 1.5\n") }
        #expect(throws: ConfigError.self) { try parse("[stream]\nreconnect-attempts = 1000\n") }
        #expect(throws: ConfigError.self) { try parse("[stream]\nmodel = two words\n") }
    }

    /// The etcd password and every sealed credential go to the fleet's endpoints: plain http only
    /// to this machine, and the error names the key and the endpoint.
    @Test func fleetEndpointsUsePlainHTTPOnlyToThisMachine() throws {
        func fleet(_ endpoints: String) throws -> FleetSettings? {
            try parse("[fleet]\nname = team\nmachine = m1\nendpoints = \(endpoints)\n").config.fleet
        }
        let local = try fleet(
            "http://127.0.0.1:2379, http://localhost:2379/, http://[::1]:2379, etcd.example:2379, https://10.0.0.1:2379"
        )
        #expect(
            local?.endpoints == [
                "http://127.0.0.1:2379", "http://localhost:2379", "http://[::1]:2379",
                "https://etcd.example:2379", "https://10.0.0.1:2379",
            ]
        )
        for remote in ["http://10.0.0.1:2379", "HTTP://etcd.example:2379", "http://127.0.0.1.evil.example:2379"] {
            #expect(
                throws: ConfigError.invalidValue(
                    path: "config.ini",
                    group: "fleet",
                    key: "endpoints",
                    detail: "\"\(remote)\" is plain http, which is only allowed to this machine "
                        + "(localhost, 127.0.0.1, ::1); use https",
                    line: 4
                )
            ) {
                try fleet("https://127.0.0.1:2379, \(remote)")
            }
        }
        // A password in an endpoint's URL is refused without being shown.
        do {
            _ = try fleet("https://root:hunter2@etcd.example:2379")
            Issue.record("an endpoint with a password was accepted")
        } catch let error as ConfigError {
            guard case .invalidValue(_, "fleet", "endpoints", _, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(error.errorDescription?.contains("hunter2") == false)
        }
    }
}

@Suite struct PinFileTests {
    @Test func theNearestPinWins() throws {
        let temp = TempDirectory()
        let deep = temp.path + "/a/b/c"
        try FileManager.default.createDirectory(atPath: deep, withIntermediateDirectories: true)
        #expect(PinFile.nearest(from: deep) == nil || !PinFile.nearest(from: deep)!.path.hasPrefix(temp.path))
        _ = try PinFile.write(try Slot("outer"), in: temp.path + "/a")
        #expect(PinFile.nearest(from: deep)?.name == "outer")
        _ = try PinFile.write(try Slot("inner"), in: temp.path + "/a/b")
        #expect(PinFile.nearest(from: deep)?.name == "inner")
        #expect(PinFile.nearest(from: deep)?.path == temp.path + "/a/b/.lanyard")
        #expect(try PinFile.remove(in: temp.path + "/a/b"))
        #expect(try !PinFile.remove(in: temp.path + "/a/b"))
        #expect(PinFile.nearest(from: deep)?.name == "outer")
    }
}
