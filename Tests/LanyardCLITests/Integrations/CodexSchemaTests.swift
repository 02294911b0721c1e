import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardIntegrations

extension IntegrationHome {
    /// `lanyard ARGS` with `stdin` as standard input (a pipe).
    func run(_ args: [String], stdin: String) throws -> (status: Int32, stdout: String, stderr: String) {
        var environment = home.environment
        environment["CODEX_HOME"] = codexHome
        let (status, out, err) = try runProcess(
            lanyardBinary(),
            args,
            environment: environment,
            stdin: Data(stdin.utf8)
        )
        return (status, out, err)
    }

    /// A personal access token of `email`, minted by the emulator.
    func personalAccessToken(email: String) async throws -> String {
        try #require(try await server.hook("/_test/personal_access_token", ["email": email])["token"] as? String)
    }

    func authObject() throws -> [String: Any] {
        try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: codexHome + "/auth.json")))
                as? [String: Any]
        )
    }

    func writeAuth(_ text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: codexHome + "/auth.json"))
    }
}

/// Slots that hold a personal access token (`login --with-access-token`).
@Suite struct AccessTokenSlotTests {
    @Test func signsInFromStandardInputAndIsNeverRefreshed() async throws {
        let env = try await IntegrationHome()
        let token = try await env.personalAccessToken(email: "ci@example.com")
        let login = try env.run(["login", "ci", "--with-access-token"], stdin: token + "\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(
            login.stdout.contains("does not rotate") && !login.stdout.contains(token) && !login.stderr.contains(token)
        )
        let stored = try env.stored("ci")
        let storedAsGiven = stored.tokens.accessToken == token  // compared apart: a failed #expect prints its operands
        #expect(storedAsGiven && stored.tokens.refreshToken == nil && stored.isPersonalAccessToken)
        #expect(stored.account.email == "ci@example.com" && stored.account.accountID != nil)
        let record = try #require(try Registry(paths: env.paths).loadInTest().slots[try Slot("ci")])
        #expect(!record.rotates)
        let list = try env.run("list", "--json")
        let listed =
            (try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])?["slots"]
            as? [[String: Any]]
        #expect(listed?.first?["rotates"] as? Bool == false, "\(list.stdout)")

        let refresh = try env.run("refresh", "ci")
        #expect(refresh.status == 0 && refresh.stdout.contains("does not rotate"), "\(refresh.stdout)\(refresh.stderr)")
        #expect(try await env.server.stat("refresh_requests") == 0)
        #expect(try env.stored("ci") == stored)
        #expect(try env.run("status", "ci").stdout.contains("personal access token"))
        let usage = try env.run("usage", "ci")
        #expect(usage.status == 0, "\(usage.stderr)")

        // Exported as Codex writes one: no auth_mode (Codex infers it), no tokens.
        let export = try env.run("codex", "export", "ci")
        #expect(export.status == 0, "\(export.stderr)")
        let object = try env.authObject()
        #expect(Set(object.keys) == ["OPENAI_API_KEY", "personal_access_token"])
        let exportedAsGiven = object["personal_access_token"] as? String == token
        #expect(exportedAsGiven && object["OPENAI_API_KEY"] is NSNull)
        #expect(permissionBits(env.codexHome + "/auth.json") == 0o600)
        let switched = try env.run("switch", "ci")
        #expect(switched.status == 0, "\(switched.stderr)")
        // exec's private Codex home gets it the same way, and nothing is copied back from it.
        let exec = try env.run(
            "exec",
            "ci",
            "--",
            "/bin/sh",
            "-c",
            #"grep -q '"personal_access_token"' "$CODEX_HOME/auth.json" "#
                + #"&& ! grep -q '"tokens"' "$CODEX_HOME/auth.json""#
        )
        #expect(exec.status == 0, "\(exec.stderr)")
        #expect(try env.stored("ci") == stored)
    }

    /// Typed at a terminal: asked for with a prompt that does not echo it, and never shown.
    @Test func typedAtATerminalTheTokenIsNotEchoed() async throws {
        let env = try await IntegrationHome()
        let token = try await env.personalAccessToken(email: "ci@example.com")
        let environment = env.home.environment.merging(["CODEX_HOME": env.codexHome]) { $1 }
        let terminal = try TerminalRun(
            lanyardBinary(),
            ["login", "ci", "--with-access-token"],
            environment: environment
        )
        try await terminal.answer("Access token (not shown): ", with: token)
        let (status, text) = try await terminal.finish()
        let shownOnTheTerminal = text.contains(token)  // apart: a failed #expect would print it
        #expect(status == 0 && !shownOnTheTerminal)
        #expect(text.contains("does not rotate"))
        let stored = try env.stored("ci")
        let storedAsTyped = stored.tokens.accessToken == token
        #expect(storedAsTyped && stored.isPersonalAccessToken)
    }

    @Test func badTokensStoreNothing() async throws {
        let env = try await IntegrationHome()
        let empty = try env.run(["login", "ci", "--with-access-token", "--json"], stdin: "  \n")
        #expect(empty.status == 2 && empty.stdout.contains("\"usage\""), "\(empty.stdout)")
        let wrong = try env.run(["login", "ci", "--with-access-token", "--json"], stdin: "at-not-a-real-token\n")
        #expect(
            wrong.status == 1 && wrong.stdout.contains("\"access_token_rejected\""),
            "\(wrong.stdout)\(wrong.stderr)"
        )
        #expect(!wrong.stdout.contains("at-not-a-real-token") && !wrong.stderr.contains("at-not-a-real-token"))
        let jwt = try env.run(["login", "ci", "--with-access-token", "--json"], stdin: "header.payload.signature\n")
        #expect(jwt.status == 1 && jwt.stdout.contains("\"access_token_unsupported\""), "\(jwt.stdout)")
        #expect(try Registry(paths: env.paths).loadInTest().slots.isEmpty)

        // A token that was revoked after sign-in is refused the same way.
        let token = try await env.personalAccessToken(email: "ci@example.com")
        _ = try await env.server.hook("/_test/personal_access_token", ["revoke": token])
        #expect(try env.run(["login", "ci", "--with-access-token"], stdin: token).status == 1)
        #expect(try Registry(paths: env.paths).loadInTest().slots.isEmpty)
    }
}

/// auth.json as current Codex writes it (shapes from codex-rs/login's storage and manager tests).
@Suite struct CodexAuthSchemaTests {
    static let idToken = "eyJhbGciOiJub25lIn0.eyJlbWFpbCI6ImFAZXhhbXBsZS5jb20ifQ.c2ln"

    @Test func everyModeIsHandledOrRefusedByName() throws {
        let refused = [
            (#"{"auth_mode":"apikey","OPENAI_API_KEY":"sk-test"}"#, "API key"),
            (#"{"OPENAI_API_KEY":"sk-test"}"#, "API key"),
            (#"{"auth_mode":"agentIdentity","OPENAI_API_KEY":null,"agent_identity":"h.p.s"}"#, "agent identity"),
            (#"{"OPENAI_API_KEY":null,"bedrock_api_key":{"api_key":"b"}}"#, "Bedrock"),
            (#"{"auth_mode":"chatgptAuthTokens","OPENAI_API_KEY":null}"#, "memory only"),
            (#"{"auth_mode":"somethingNew","OPENAI_API_KEY":null}"#, "does not know"),
            (#"{"version":1,"selected_account_id":"legacy","accounts":{}}"#, "several accounts"),
        ]
        for (text, words) in refused {
            #expect(throws: IntegrationError.self) { try CodexSignIn.parse(Data(text.utf8), path: "auth.json") }
            do { _ = try CodexSignIn.parse(Data(text.utf8), path: "auth.json") } catch {
                #expect(error.userFacingDescription.contains(words), "\(text): \(error.userFacingDescription)")
                #expect((error as? IntegrationError)?.code == .integrationUnsupported)
            }
        }
        let pat = try CodexSignIn.parse(
            Data(#"{"OPENAI_API_KEY":null,"personal_access_token":"at-abc"}"#.utf8),
            path: "auth.json"
        )
        #expect(pat.signIn == .personalAccessToken("at-abc"))
        let chatgpt =
            #"{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":"\#(Self.idToken)","access_token":"a","#
            + #""refresh_token":"r","account_id":"acct"},"last_refresh":"2026-09-01T10:00:00Z","future_field":{"x":1}}"#
        let parsed = try CodexSignIn.parse(Data(chatgpt.utf8), path: "auth.json")
        #expect(parsed.chatGPT?.refreshToken == "r" && parsed.preserved["future_field"] != nil)
        // Written back with the field Lanyard does not know.
        #expect(parsed.json.object?["future_field"] == parsed.preserved["future_field"])
    }

    /// An auth.json with the `oauth` mode older Lanyard wrote (current Codex refuses it) is read
    /// as the ChatGPT sign-in it is, and `codex export` rewrites it as `chatgpt`, keeping fields
    /// Lanyard does not know.
    @Test func legacyOAuthModeIsReadAndFixedOnExport() async throws {
        let env = try await IntegrationHome()
        let credential = try await env.signIn("work", email: "w@example.com")
        #expect(try env.run("codex", "export", "work").status == 0)
        var object = try env.authObject()
        object["auth_mode"] = "oauth"
        object["added_by_a_newer_codex"] = ["kept": true]
        // The agent identity Codex registers for a ChatGPT account (a record beside the tokens).
        object["agent_identity"] = [
            "agent_runtime_id": "rt-1", "agent_private_key": "k", "account_id": credential.account.accountID ?? "",
            "chatgpt_user_id": "u", "email": "w@example.com", "plan_type": "plus",
            "chatgpt_account_is_fedramp": false,
        ]
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: env.codexHome + "/auth.json"))
        #expect(try env.authJSON().legacyOAuthMode)
        let sameSession = try env.authJSON().refreshToken == credential.tokens.refreshToken
        #expect(sameSession)
        let imported = try env.run("codex", "import", "work")
        #expect(imported.status == 0 && imported.stderr.contains("auth_mode \"oauth\""), "\(imported.stderr)")

        let export = try env.run("codex", "export", "work")
        #expect(export.status == 0 && export.stderr.contains("it says \"chatgpt\" now"), "\(export.stderr)")
        let fixed = try env.authObject()
        #expect(fixed["auth_mode"] as? String == "chatgpt")
        #expect((fixed["added_by_a_newer_codex"] as? [String: Any])?["kept"] as? Bool == true)
        #expect(
            (fixed["agent_identity"] as? [String: Any])?["agent_runtime_id"] as? String == "rt-1",
            "the same account keeps its agent identity"
        )

        // Another account's sign-in replaces the file: the unknown field stays, the identity goes.
        try await env.signIn("other", email: "o@example.com")
        #expect(try env.run("codex", "export", "other").status == 0)
        let replaced = try env.authObject()
        #expect(replaced["agent_identity"] == nil && replaced["added_by_a_newer_codex"] != nil)
    }

    /// An API-key sign-in in auth.json is not overwritten by a switch or an export.
    @Test func exportRefusesToOverwriteASignInLanyardDoesNotHold() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("work", email: "w@example.com")
        try env.writeAuth(#"{"auth_mode":"apikey","OPENAI_API_KEY":"sk-keep-me"}"#)
        let export = try env.run("codex", "export", "work", "--json")
        #expect(export.status == 1 && export.stdout.contains("integration_unsupported"), "\(export.stdout)")
        #expect(try String(contentsOfFile: env.codexHome + "/auth.json", encoding: .utf8).contains("sk-keep-me"))
    }
}

/// The one key of Codex's config.toml Lanyard reads.
@Suite struct CodexConfigTOMLTests {
    func read(_ text: String) throws -> String? {
        try CodexConfigTOML.topLevelString("cli_auth_credentials_store", in: text)
    }

    @Test func onlyTheTopLevelKeyCounts() throws {
        #expect(try read("") == nil)
        #expect(try read("cli_auth_credentials_store = \"keyring\"\n") == "keyring")
        #expect(try read("cli_auth_credentials_store='auto' # a comment\nmodel = \"o3\"") == "auto")
        #expect(try read("# cli_auth_credentials_store = \"keyring\"\nmodel = \"x\"") == nil)
        #expect(try read("model = \"a # not a comment\"\n\"cli_auth_credentials_store\" = \"keyring\"") == "keyring")
        #expect(try read("[profiles.work]\ncli_auth_credentials_store = \"keyring\"") == nil)
        #expect(
            try read("model = \"o3\"\n[mcp_servers.x]\ncommand = \"y\"\ncli_auth_credentials_store = \"keyring\"")
                == nil
        )
        // Arrays and multi-line strings that hold look-alike lines do not end the top level.
        #expect(
            try read(
                "notes = \"\"\"\n[not.a.table]\ncli_auth_credentials_store = \"file\"\n\"\"\"\n"
                    + "list = [\n  \"[x]\", # comment ]\n]\ncli_auth_credentials_store = \"keyring\""
            ) == "keyring"
        )
        #expect(throws: CodexConfigTOML.Problem.self) { try read("cli_auth_credentials_store = keyring") }
    }

    @Test func tablesAndBooleansAreReadByTheirFullName() throws {
        func flag(_ text: String) throws -> Bool? {
            try CodexConfigTOML.boolean(["features", "secret_auth_storage"], in: text)
        }
        #expect(try flag("") == nil)
        #expect(try flag("[features]\nsecret_auth_storage = true\n") == true)
        #expect(try flag("[features]\nsecret_auth_storage = false # off\n") == false)
        #expect(try flag("features.secret_auth_storage = true") == true)
        #expect(try flag("[ features ]\nother = 1\n[profiles.x]\nsecret_auth_storage = true") == nil)
        #expect(try flag("[[features]]\nsecret_auth_storage = true") == nil)
        #expect(throws: CodexConfigTOML.Problem.self) { try flag("[features]\nsecret_auth_storage = truex") }
        #expect(throws: CodexConfigTOML.Problem.self) { try flag("[features]\nsecret_auth_storage = \"yes\"") }
        // A table header does not hide the top-level key that came before it.
        #expect(
            try read("cli_auth_credentials_store = \"keyring\"\n[features]\nsecret_auth_storage = true") == "keyring"
        )
    }

    @Test func modeComesFromConfigTOML() throws {
        let dir = TestHome()
        let home = CodexHome(directory: dir.root)
        #expect(try home.credentialsStore() == .file)
        try Data("cli_auth_credentials_store = \"ephemeral\"\n".utf8).write(to: URL(fileURLWithPath: home.configPath))
        #expect(try home.credentialsStore() == .ephemeral)
        try Data("cli_auth_credentials_store = \"vault\"\n".utf8).write(to: URL(fileURLWithPath: home.configPath))
        #expect(throws: StoreError.self) { try home.credentialsStore() }
    }

    /// Codex's keyring account for a home: `cli|` and 16 hex digits of the SHA-256 of its
    /// canonical path.
    @Test func keyringAccountIsCodexsStoreKey() throws {
        let home = CodexHome(directory: "/nonexistent/codex-home")
        // printf %s /nonexistent/codex-home | sha256sum
        #expect(home.keyringAccount == "cli|" + String(try shellSHA256("/nonexistent/codex-home").prefix(16)))
    }

    func shellSHA256(_ text: String) throws -> String {
        let (status, out, _) = try runProcess("/usr/bin/sha256sum", [], stdin: Data(text.utf8))
        #expect(status == 0)
        return String(out.prefix(64))
    }
}

/// Codex's keyring mode, against the test session's gnome-keyring (scripts/with-keyring.sh).
@Suite struct CodexKeyringModeTests {
    /// secret-tool's status and output (`search` writes attributes on stderr, secrets on stdout).
    func secretTool(_ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        try runProcess("/usr/bin/env", ["secret-tool"] + args, environment: ProcessInfo.processInfo.environment)
    }

    /// The items' attribute lines and labels, without the secrets.
    func attributeLines(_ account: String) throws -> [String] {
        let search = try secretTool(["search", "--all", "service", "Codex Auth", "username", account])
        return (search.stdout + "\n" + search.stderr).split(separator: "\n").map(String.init)
            .filter { $0.hasPrefix("attribute.") || $0.hasPrefix("label = ") || $0.hasPrefix("schema = ") }
    }

    @Test func exportAndSwitchWriteCodexsKeyringItem() async throws {
        try requireTestKeyring()
        let env = try await IntegrationHome(extraConfig: "[integrations]\ncodex = true")
        env.home.withoutSessionBus = false
        try Data("# Codex\ncli_auth_credentials_store = \"keyring\"\n[tui]\nx = 1\n".utf8)
            .write(to: URL(fileURLWithPath: env.codexHome + "/config.toml"))
        let a = try await env.signIn("a", email: "a@example.com")
        try await env.signIn("b", email: "b@example.com")
        try env.writeAuth("{}")  // a stale auth.json Codex would ignore
        let account = CodexHome(directory: env.codexHome).keyringAccount
        defer { _ = try? secretTool(["clear", "service", "Codex Auth", "username", account]) }
        // Codex's item for this home, as another program (the crate) made it before Lanyard.
        let seeded = try runProcess(
            "/usr/bin/env",
            [
                "secret-tool", "store", "--label=seeded", "service", "Codex Auth", "username", account,
                "target", "default", "application", "rust-keyring",
            ],
            environment: ProcessInfo.processInfo.environment,
            stdin: Data(#"{"OPENAI_API_KEY":null,"personal_access_token":"at-seeded"}"#.utf8)
        )
        #expect(seeded.0 == 0)

        let export = try env.run("codex", "export", "a", "--json")
        #expect(export.status == 0, "\(export.stderr)")
        #expect(export.stdout.contains("keyring_item"))
        #expect(!FileManager.default.fileExists(atPath: env.codexHome + "/auth.json"))
        // Looked up as Codex's keyring crate does: by service and username.
        let lookup = try secretTool(["lookup", "service", "Codex Auth", "username", account])
        #expect(lookup.status == 0)
        let signIn = try CodexSignIn.parse(Data(lookup.stdout.utf8), path: "keyring")
        let sameSession = signIn.chatGPT?.refreshToken == a.tokens.refreshToken
        #expect(sameSession)
        // Exactly the attributes the crate sets (and searches by service and username).
        let attributes = try attributeLines(account).filter { $0.hasPrefix("attribute.") }.sorted()
        #expect(
            attributes == [
                "attribute.application = rust-keyring", "attribute.service = Codex Auth",
                "attribute.target = default", "attribute.username = \(account)",
            ],
            "\(attributes)"
        )

        // A switch updates the same item (one item, never a second).
        let switched = try env.run("switch", "b")
        #expect(switched.status == 0, "\(switched.stderr)")
        let after = try secretTool(["lookup", "service", "Codex Auth", "username", account])
        #expect(
            try CodexSignIn.parse(Data(after.stdout.utf8), path: "keyring").chatGPT?.accountID
                == (try env.stored("b").account.accountID)
        )
        #expect(try attributeLines(account).filter { $0.hasPrefix("label = ") }.count == 1)
    }

    /// Codex's encrypted secrets storage (`[features] secret_auth_storage`) keeps the sign-in in a
    /// file whose key is in the keyring: Lanyard says it cannot write there, and writes nothing.
    @Test func encryptedSecretsStorageIsRefusedByName() async throws {
        try requireTestKeyring()
        let env = try await IntegrationHome()
        env.home.withoutSessionBus = false
        try Data("cli_auth_credentials_store = \"keyring\"\n\n[features]\nsecret_auth_storage = true\n".utf8)
            .write(to: URL(fileURLWithPath: env.codexHome + "/config.toml"))
        try await env.signIn("a", email: "a@example.com")
        let account = CodexHome(directory: env.codexHome).keyringAccount
        let export = try env.run("codex", "export", "a", "--json")
        #expect(export.status != 0 && export.stdout.contains("secret_auth_storage"), "\(export.stdout)")
        #expect(!FileManager.default.fileExists(atPath: env.codexHome + "/auth.json"))
        #expect(try secretTool(["lookup", "service", "Codex Auth", "username", account]).status != 0)
    }

    /// Keyring mode with the keyring locked (a gnome-keyring of the test's own, on a bus of its
    /// own, so locking it touches no other test): a switch Codex cannot follow is undone and said
    /// plainly (exit 5); the active slot, Codex's item and the event log are as before. Unlocked,
    /// the same switch goes through.
    @Test func aSwitchCodexCannotFollowIsUndone() async throws {
        let env = try await IntegrationHome(extraConfig: "[integrations]\ncodex = true")
        let bus = try PrivateSessionBus(folder: env.home.root + "/bus")
        var environment = env.home.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        environment["CODEX_HOME"] = env.codexHome
        var daemon: KeyringDaemon? = try KeyringDaemon(environment: environment, password: "keyring password")
        try Data("cli_auth_credentials_store = \"keyring\"\n".utf8).write(
            to: URL(fileURLWithPath: env.codexHome + "/config.toml")
        )
        let a = try #require(try await env.signIn("a", email: "a@example.com").account.accountID)
        let b = try #require(try await env.signIn("b", email: "b@example.com").account.accountID)
        func run(_ args: String...) throws -> (status: Int32, stdout: String, stderr: String) {
            let (status, out, err) = try runProcess(lanyardBinary(), args, environment: environment)
            return (status, out, err)
        }
        /// The account of Codex's keyring item for this home, as Codex's keyring crate finds it.
        let item = CodexHome(directory: env.codexHome).keyringAccount
        func codexAccount() throws -> String? {
            let (status, out, _) = try runProcess(
                "/usr/bin/env",
                ["secret-tool", "lookup", "service", "Codex Auth", "username", item],
                environment: environment
            )
            guard status == 0 else { return nil }
            return try CodexSignIn.parse(Data(out.utf8), path: "keyring").chatGPT?.accountID
        }
        let first = try run("switch", "a")
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try codexAccount() == a)

        let (lockStatus, _, lockErrors) = try runProcess(
            "/usr/bin/gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.Secret.Service.Lock", "['/org/freedesktop/secrets/collection/login']",
            ],
            environment: environment
        )
        #expect(lockStatus == 0, "\(lockErrors)")
        let refused = try run("switch", "b")
        #expect(refused.status == 5, "\(refused.stdout)\(refused.stderr)")
        #expect(refused.stdout.isEmpty, "\(refused.stdout)")
        #expect(
            refused.stderr.contains(
                "did not switch to b, because Codex could not follow (a is still the active slot): "
            )
                && refused.stderr.contains("the keyring is locked"),
            "\(refused.stderr)"
        )
        let json = try run("switch", "b", "--json")
        #expect(json.status == 5 && json.stdout.contains("codex_keyring_unavailable"), "\(json.stdout)")
        #expect(try Registry(paths: env.paths).loadInTest().active?.name == "a")
        #expect(
            !EventLog(paths: env.paths).read().contains { $0["event"]?.string == "switch" && $0["to"]?.string == "b" }
        )

        // A new daemon opens the same keyring file with its password: Codex's item is still a's,
        // and now the switch goes through.
        daemon?.kill()
        daemon = try KeyringDaemon(environment: environment, password: "keyring password")
        #expect(try codexAccount() == a)
        let switched = try run("switch", "b")
        #expect(switched.status == 0, "\(switched.stderr)")
        #expect(try Registry(paths: env.paths).loadInTest().active?.name == "b")
        #expect(try codexAccount() == b)
        withExtendedLifetime(daemon) {}
    }

    /// With no keyring answering, keyring mode is an error (exit 5) and no auth.json is written.
    @Test func noKeyringIsAnErrorNotAFileCodexIgnores() async throws {
        let env = try await IntegrationHome()  // no session bus
        try Data("cli_auth_credentials_store = \"keyring\"\n".utf8).write(
            to: URL(fileURLWithPath: env.codexHome + "/config.toml")
        )
        try await env.signIn("a", email: "a@example.com")
        let export = try env.run("codex", "export", "a", "--json")
        #expect(export.status == 5 && export.stdout.contains("codex_keyring_unavailable"), "\(export.stdout)")
        #expect(!FileManager.default.fileExists(atPath: env.codexHome + "/auth.json"))
        // In auto mode Codex falls back to auth.json when no keyring answers: so does Lanyard.
        try Data("cli_auth_credentials_store = \"auto\"\n".utf8).write(
            to: URL(fileURLWithPath: env.codexHome + "/config.toml")
        )
        #expect(try env.run("codex", "export", "a").status == 0)
        #expect(FileManager.default.fileExists(atPath: env.codexHome + "/auth.json"))
    }
}
