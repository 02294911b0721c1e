import Foundation
import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardCLI
@testable import LanyardIntegrations

/// Values an attacker would put in a server answer or an imported file: quotes and backslashes
/// for every shell's quoting, command substitutions, terminal escapes (OSC 52 writes the
/// clipboard, CSI 2J clears the screen), bidi overrides, line separators and non-ASCII.
let hostileValues: [String] = [
    "plain", "it's", "a\\'b", "\\", "end\\", "a\\\\'c", "'", "''", "\"", "\"'\"", "$(touch pwned)", "`touch pwned`",
    "${HOME}", "$HOME", "\\$(touch pwned)", "a;touch pwned;b", "x' ; touch pwned ; echo '", "gho_a\\';{touch,pwned};#",
    "gho_a\\\\';{touch,pwned};#", "a\nb", "line\n", "\r\n", "tab\there", "\u{1B}[2J", "\u{1B}]52;c;cHduZWQ=\u{07}",
    "\u{202E}txt.exe", "para\u{2029}graph", "ünïcödé ✓ 日本", "-e", "--", "%s%n", "",
    " lead and trail ", "*", "~", "!!", "#",
]

/// Shell code from `lanyard env`, sourced by the real shells: every hostile value arrives byte for
/// byte and nothing in it runs.
@Suite struct ShellQuotingTests {
    /// Sources the exports of every hostile value in `shell` and returns what each variable held.
    func roundTrip(_ shell: ShellQuoting.Shell) throws -> (values: [String], ran: Bool) {
        let dir = try TempFolder()
        var variables: [String: String] = [:]
        for (i, value) in hostileValues.enumerated() { variables["V\(i)"] = value }
        let script = try ShellQuoting.exports(variables, for: shell).joined(separator: "\n") + "\n"
        try script.write(toFile: dir.path + "/env.sh", atomically: true, encoding: .utf8)
        let reads = hostileValues.indices.map { i in "printf %s \"$V\(i)\" > out\(i)" }.joined(separator: "\n")
        let (program, args): (String, [String]) =
            switch shell {
            case .bash: ("/bin/bash", ["--norc", "--noprofile", "-c", ". ./env.sh\n" + reads])
            case .zsh: ("/usr/bin/zsh", ["-f", "-c", "source ./env.sh\n" + reads])
            case .sh: ("/bin/dash", ["-c", ". ./env.sh\n" + reads])
            case .fish: ("/usr/bin/fish", ["--no-config", "-c", "source ./env.sh\n" + reads])
            }
        let (status, _, err) = try runProcess(
            program,
            args,
            environment: ["PATH": "/usr/bin:/bin", "HOME": dir.path],
            workingDirectory: dir.path
        )
        #expect(status == 0, "\(shell) failed: \(err)")
        let values = try hostileValues.indices.map { i in
            String(decoding: try Data(contentsOf: URL(fileURLWithPath: dir.path + "/out\(i)")), as: UTF8.self)
        }
        return (values, FileManager.default.fileExists(atPath: dir.path + "/pwned"))
    }

    @Test(arguments: ShellQuoting.Shell.allCases)
    func everyHostileValueRoundTripsAndNothingRuns(_ shell: ShellQuoting.Shell) async throws {
        let (values, ran) = try roundTrip(shell)
        for (sent, got) in zip(hostileValues, values) {
            #expect(
                Array(got.utf8) == Array(sent.utf8),
                "\(shell) changed \(sent.debugDescription) into \(got.debugDescription)"
            )
        }
        #expect(!ran, "\(shell) ran a command from a value")
    }

    @Test func fishQuotingEscapesBackslashAndQuote() async {
        // POSIX quoting (`'\''`) lets fish read `\'` as a quote and end the string early.
        #expect(ShellQuoting.quote("a\\'b", for: .fish) == #"'a\\\'b'"#)
        #expect(ShellQuoting.quote("a\\'b", for: .bash) == #"'a\'\''b'"#)
    }

    @Test func aNulByteIsRefusedNotCut() async {
        #expect(throws: ShellQuoting.UnrepresentableValue(variable: "X")) {
            try ShellQuoting.exports(["X": "before\0after"], for: .bash)
        }
    }

    /// The door the probe used: a gh hosts.yml token with `\'`, imported, then `lanyard env
    /// --shell fish | source` in the real fish.
    @Test func ghTokenWithBackslashQuoteCannotRunCodeInFish() async throws {
        let env = try await IntegrationHome()
        let gh = env.home.root + "/gh"
        try FileManager.default.createDirectory(atPath: gh, withIntermediateDirectories: true)
        try """
        github.com:
            user: octo
            oauth_token: "gho_a\\\\';{touch,pwned};#"
            git_protocol: https

        """.write(toFile: gh + "/hosts.yml", atomically: true, encoding: .utf8)
        let imported = try env.home.run(
            ["gh", "import", "gh-octo", "--hostname", "github.com"],
            extraEnvironment: ["GH_CONFIG_DIR": gh, "PATH": "/nonexistent"]
        )
        #expect(imported.status == 0, "\(imported.stderr)")
        let lines = try env.home.run("env", "gh-octo", "--shell", "fish")
        #expect(lines.status == 0, "\(lines.stderr)")
        try lines.stdout.write(toFile: env.home.root + "/env.fish", atomically: true, encoding: .utf8)
        let (status, out, err) = try runProcess(
            "/usr/bin/fish",
            ["--no-config", "-c", "source ./env.fish; printf %s $GH_TOKEN"],
            environment: ["PATH": "/usr/bin:/bin", "HOME": env.home.root],
            workingDirectory: env.home.root
        )
        #expect(status == 0, "\(err)")
        #expect(out == "gho_a\\\\';{touch,pwned};#")
        #expect(!FileManager.default.fileExists(atPath: env.home.root + "/pwned"))
    }
}

/// Outside text is checked where it comes in (tokens, claims, files) and escaped where it goes out
/// (every human renderer, JSON, headers).
@Suite struct HostileTextTests {
    @Test func tokensMustBeVisibleASCII() async {
        for bad in ["", "a b", "tok\u{1B}[2J", "tok\0", "tok\n", "tök", "tok\u{7F}"] {
            #expect(TokenText.problem(bad) != nil, "\(bad.debugDescription) accepted")
        }
        for good in ["eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "gho_abc123", "a\\';{x};#", "abc+/=="] {
            #expect(TokenText.problem(good) == nil)
        }
    }

    @Test func aTokenEndpointAnswerWithAControlCharacterIsAnInvalidResponse() async {
        for body in [
            #"{"access_token":"at\u001b[2J","refresh_token":"rt"}"#, #"{"access_token":"at","refresh_token":"rt\nX"}"#,
            #"{"access_token":"at","refresh_token":"rt","id_token":"a b"}"#,
        ] {
            #expect(throws: AuthError.self) { try TokenResponse.parse(Data(body.utf8), step: "refresh") }
            do { _ = try TokenResponse.parse(Data(body.utf8), step: "refresh") } catch {
                #expect(!"\(error.localizedDescription)".contains("\u{1B}"))
                #expect(error.localizedDescription.contains("is not a token"))
            }
        }
    }

    @Test func storedCredentialsAndBundlesRefuseControlCharactersInTokens() async throws {
        let json = #"{"version":1,"provider":"openai","tokens":{"access_token":"at\u0000x"}}"#
        #expect(throws: (any Error).self) { try Credential(json: JSONFields(JSONValue.parse(Data(json.utf8)))) }
    }

    @Test func aSignInWhoseEmailHoldsATerminalEscapeIsRefused() async throws {
        let env = try await IntegrationHome()
        do {
            try await env.signIn("evil", email: "a\u{1B}]52;c;cHduZWQ=\u{07}@example.com")
            Issue.record("the sign-in was accepted")
        } catch let error as AuthError {
            guard case .invalidResponse(let what) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(what.contains("email has a control character"))
            #expect(!what.contains("\u{1B}"))
        }
        #expect(try env.home.run("list", "--names").stdout == "")
    }

    @Test func aPlanWithABidiOverrideIsRefused() async throws {
        let env = try await IntegrationHome()
        await #expect(throws: AuthError.self) {
            try await env.signIn("evil", email: "e@example.com", plan: "pro\u{202E}")
        }
    }

    @Test func codexAndGhImportsRefuseHostileText() async throws {
        let codex = Data(
            (#"{"auth_mode":"chatgpt","tokens":{"id_token":"x.y.z","access_token":"at\u001b]52;c;x\u0007","#
                + #""refresh_token":"rt"},"last_refresh":"2026-01-01T00:00:00Z"}"#).utf8
        )
        #expect(throws: StoreError.self) { try CodexAuthFile.parse(codex, path: "auth.json") }
        let hosts = "github.com:\n    user: \"o\u{1B}[2Jcto\"\n    oauth_token: gho_x\n"
        #expect(throws: GitHubCLI.HostsFileError.self) { try GitHubCLI.parseHosts(hosts, path: "hosts.yml") }
    }

    /// Registry text written by an older version or by hand reaches the terminal escaped.
    @Test func humanOutputEscapesWhatTheRegistryHolds() async throws {
        let cli = CLIHarness()
        try cli.addSlot("work", email: "w\u{1B}]52;c;cHduZWQ=\u{07}@x\u{202E}", plan: "pro\u{1B}[2J", active: true)
        try cli.registry.updateInTest { doc in doc.slots[try Slot("work")]!.lastErrorCode = "bad\u{1B}[31m" }
        for args in [["list"], ["status", "work"], ["which"], ["switch", "work"]] {
            let result = await cli.run(args)
            #expect(
                !result.stdout.unicodeScalars.contains { TerminalText.isUnsafe($0, keepLineBreaks: true) },
                "\(args): \(result.stdout.debugDescription)"
            )
            #expect(
                !result.stderr.unicodeScalars.contains { TerminalText.isUnsafe($0, keepLineBreaks: true) },
                "\(args): \(result.stderr.debugDescription)"
            )
        }
        #expect(await cli.run("list").stdout.contains(#"w\u{1B}]52;c;cHduZWQ=\u{7}@x\u{202E}"#))
        // JSON keeps the text but escapes what a terminal would act on.
        let json = await cli.run("list", "--json").stdout
        #expect(!json.unicodeScalars.contains { TerminalText.isUnsafe($0, keepLineBreaks: true) })
        #expect(json.contains(#"\u001b]52;c;cHduZWQ=\u0007@x\u202e"#))
    }

    @Test func eventsFromTheLogAreEscaped() async throws {
        let cli = CLIHarness()
        let log = cli.paths.stateDirectory + "/events.jsonl"
        try FileManager.default.createDirectory(atPath: cli.paths.stateDirectory, withIntermediateDirectories: true)
        let line =
            #"{"time":"2026-01-01T00:00:00Z","event":"error\u001b[2J","slot":"work","code":"x\u009b31m","#
            + #""message":"m\u2028\u202e"}"#
        try line.appending("\n").write(toFile: log, atomically: true, encoding: .utf8)
        let result = await cli.run("events")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains(#"error\u{1B}[2J"#))
        #expect(
            !result.stdout.unicodeScalars.contains { TerminalText.isUnsafe($0, keepLineBreaks: true) },
            "\(result.stdout.debugDescription)"
        )
    }

    @Test func jsonEscapesDelC1BidiAndLineSeparators() async throws {
        let text = JSONValue.string("a\u{7F}b\u{9B}c\u{202E}d\u{2028}e\u{2066}ü✓").serialized()
        #expect(text == #""a\u007fb\u009bc\u202ed\u2028e\u2066ü✓""#)
        #expect(try JSONValue.parse(Data(text.utf8)) == .string("a\u{7F}b\u{9B}c\u{202E}d\u{2028}e\u{2066}ü✓"))
    }

    @Test func headerValuesWithControlCharactersAreRefusedNotDropped() async throws {
        var credential = Credential(
            provider: "openai",
            tokens: TokenSet(accessToken: "at"),
            lastRefresh: nil,
            account: AccountInfo(accountID: "acct\r\nX-Injected: yes")
        )
        #expect(
            throws: ClientError.invalidHeader(name: "ChatGPT-Account-Id", problem: "has a control character (byte 5)")
        ) {
            try credential.authorizationHeaders()
        }
        credential.account.accountID = "acct-1"
        #expect(try credential.authorizationHeaders().map(\.1) == ["Bearer at", "acct-1"])
        #expect(throws: ClientError.self) { try HTTPHeaderRules.check("Last-Event-ID", "1\nX: y") }
        #expect(throws: ClientError.self) { try HTTPHeaderRules.check("Bad Name", "v") }
    }

    /// The usage path refuses before anything is sent (a recording transport sees no request).
    @Test func usageRefusesAnInjectedAccountIDBeforeSending() async throws {
        let cli = CLIHarness()
        try cli.writeConfigForUsage()
        let slot = try Slot("work")
        try cli.addSlot("work", active: true)
        var credential = try cli.store.get(slot)
        credential.account.accountID = "acct\r\nX-Injected: yes"
        credential.lastRefresh = Date()
        credential.tokens.expiresAt = Date().addingTimeInterval(3600)
        try cli.store.put(credential, for: slot)
        let transport = RecordingTransport(answer: HTTPResponse(status: 200, body: Data("{}".utf8)))
        let manager = try cli.accountManager(transport: transport)
        await #expect(throws: ClientError.self) { try await manager.usage(slot: slot) }
        #expect(transport.requests.isEmpty)
    }

    /// A server that echoes the bearer token in its error body does not get it printed.
    @Test func anErrorBodyThatEchoesTheTokenIsRedacted() async throws {
        let cli = CLIHarness()
        try cli.writeConfigForUsage()
        let slot = try Slot("work")
        try cli.addSlot("work", active: true)
        var credential = try cli.store.get(slot)
        credential.lastRefresh = Date()
        credential.tokens.expiresAt = Date().addingTimeInterval(3600)
        try cli.store.put(credential, for: slot)
        let echo = #"{"error":{"code":"bad_token","message":"token AT-work-SECRET is not valid"}}"#
        let transport = RecordingTransport(answer: HTTPResponse(status: 400, body: Data(echo.utf8)))
        let manager = try cli.accountManager(transport: transport)
        do {
            _ = try await manager.usage(slot: slot)
            Issue.record("no error")
        } catch {
            #expect(!error.localizedDescription.contains("AT-work-SECRET"))
            #expect(error.localizedDescription.contains("<redacted>"))
        }
        #expect(TokenText.redacted("x SECRET y SECRET", removing: ["SECRET", ""]) == "x <redacted> y <redacted>")
    }

    @Test func anErrorCodeWithControlCharactersIsUnknown() async {
        #expect(ServerErrorDetail(body: Data(#"{"error":"bad\u001b[2J"}"#.utf8)).code == "UNKNOWN")
        #expect(ServerErrorDetail(body: Data(#"{"error":"invalid_grant"}"#.utf8)).code == "invalid_grant")
    }
}

/// `login --open` hands xdg-open only https URLs (or http to this machine).
@Suite struct BrowserOpenTests {
    /// A URL that is not https is shown, not opened; with no xdg-open, the user is told to open
    /// the URL on screen themselves (nothing is run either way: PATH has no xdg-open).
    @Test func openSaysWhatItCouldNotDo() async {
        let err = TextSink()
        SignInProgress.open(URL(string: "file:///etc/passwd")!, err: err, environment: ["PATH": "/nonexistent"])
        #expect(err.text.contains("not opening the verification page: the server gave a URL that is not https"))
        let missing = TextSink()
        SignInProgress.open(
            URL(string: "https://auth.example.com/codex/device")!,
            err: missing,
            environment: ["PATH": "/nonexistent"]
        )
        #expect(
            missing.text
                == "lanyard: could not open a browser (xdg-open is not installed); open the URL above yourself\n"
        )
    }

    @Test func onlySecureOrLocalURLsAreOpened() async {
        for good in [
            "https://auth.openai.com/codex/device", "http://127.0.0.1:8080/x", "http://localhost/x", "http://[::1]:9/x",
        ] {
            #expect(Loopback.isSecureOrLocal(URL(string: good)!), "\(good)")
        }
        for bad in ["file:///etc/passwd", "javascript:alert(1)", "http://evil.example/x", "ftp://x/y", "--help"] {
            #expect(URL(string: bad).map(Loopback.isSecureOrLocal) != true, "\(bad)")
        }
    }
}

extension CLIHarness {
    /// config.ini whose openai provider has a usage endpoint (never contacted: tests inject a transport).
    func writeConfigForUsage() throws {
        try FileManager.default.createDirectory(atPath: root + "/config/lanyard", withIntermediateDirectories: true)
        try "[provider.openai]\nusage-base-url = https://chatgpt.invalid\n".write(
            toFile: paths.configFile,
            atomically: true,
            encoding: .utf8
        )
    }
}

/// Answers every request with one response and keeps what was sent.
final class RecordingTransport: HTTPTransport, @unchecked Sendable {
    let answer: HTTPResponse
    private let lock = NSLock()
    private var sent: [HTTPRequest] = []
    init(answer: HTTPResponse) { self.answer = answer }
    var requests: [HTTPRequest] { lock.withLock { sent } }
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        lock.withLock { sent.append(request) }
        return answer
    }
}

/// A private folder removed when released.
final class TempFolder {
    let path: String
    init() throws {
        var template = Array((NSTemporaryDirectory() + "lanyard-hostile.XXXXXX").utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
