import Foundation
import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardIntegrations
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardCLI

/// Exit statuses are decided in one exhaustive switch in the CLI (`ExitStatus(code:)`); the layers
/// only name their errors' codes, which are `ErrorCode` cases.
@Suite struct ExitCodeTests {
    /// Every `| \`code\` | exit | meaning |` row of docs/cli.md's error-code table.
    static func documented() throws -> [String: Int32] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/cli.md"), encoding: .utf8)
        let section = try #require(text.components(separatedBy: "\n## Error codes\n").dropFirst().first)
        var rows: [String: Int32] = [:]
        for match in section.matches(of: /\n\| `([a-z_]+)` \| ([0-9]+) \|/) {
            rows[String(match.output.1)] = Int32(match.output.2)
        }
        return rows
    }

    /// Codes an error in Sources spells out as a string instead of an `ErrorCode` case: in a
    /// `var code: String` getter or a `code: "…"` argument.
    static func spelledAsStrings() throws -> Set<String> {
        var codes: Set<String> = []
        let root = repositoryRoot.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(atPath: root.path)!.compactMap { $0 as? String }.filter {
            $0.hasSuffix(".swift")
        }
        for file in files {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            if text.contains("var code: String {") { codes.insert("a `var code: String` getter in \(file)") }
            for m in text.matches(of: /\bcode: "([a-z][a-z0-9_]*)"/) { codes.insert(String(m.output.1)) }
        }
        return codes
    }

    /// The event log's codes are `ErrorCode`s: every `error` event is written by
    /// `EventLog.appendError`, which takes one, and nothing else in Sources writes a `code` field
    /// or an `error` event (the on-disk field stays the raw string).
    @Test func theEventLogWritesOnlyErrorCodes() throws {
        let root = repositoryRoot.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(atPath: root.path)!.compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }
        var offenders: [String] = []
        for file in files where file != "LanyardStore/EventLog.swift" {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            if text.contains(/\bappend\(\s*"error"/) {
                offenders.append("\(file): an `error` event not written by appendError")
            }
            if text.contains(/\["code"\]\s*=/) { offenders.append("\(file): a `code` field set by hand") }
            // `"code":` in a dictionary literal: only ErrorView, which writes ErrorCode raw values.
            if file != "LanyardCLI/JSONView.swift", text.contains(/"code":\s*\.string\(/) {
                offenders.append("\(file): a `code` field written from a string")
            }
        }
        #expect(offenders.isEmpty, "\(offenders)")
    }

    @Test func theTableAndDocsCliMdAgree() async throws {
        let documented = try Self.documented()
        let table = Dictionary(
            uniqueKeysWithValues: ErrorCode.allCases.map { ($0.rawValue, LanyardCLI.ExitStatus(code: $0).rawValue) }
        )
        #expect(documented.count >= 50)
        for (code, status) in table {
            #expect(documented[code] == status, "docs/cli.md: `\(code)` should exit \(status)")
        }
        for code in documented.keys where table[code] == nil {
            #expect(Bool(false), "docs/cli.md lists `\(code)`, which the CLI does not know")
        }
    }

    /// Every code is an `ErrorCode` (so the compiler sees that each has an exit status), and every
    /// raw value is distinct snake_case.
    @Test func everyCodeInTheSourcesIsAnErrorCase() async throws {
        #expect(ErrorCode.allCases.count >= 50, "\(ErrorCode.allCases.count) codes")
        #expect(Set(ErrorCode.allCases.map(\.rawValue)).count == ErrorCode.allCases.count)
        for code in ErrorCode.allCases {
            #expect(code.rawValue.wholeMatch(of: /[a-z][a-z0-9_]*/) != nil, "`\(code.rawValue)`")
        }
        // Codes servers send (in ServerErrorDetail), not errors of Lanyard's own.
        let serverDetailCodes: Set = ["rate_limited", "websocket_refused"]
        let strings = try Self.spelledAsStrings().subtracting(serverDetailCodes)
        #expect(strings.isEmpty, "codes spelled as strings: \(strings.sorted())")
    }

    /// A refresh worker's code is read back from its output: an unknown one never crashes and
    /// reads as `refresh_failed`; the worker's status is passed on either way.
    @Test func aWorkersCodeIsParsedNotTrusted() async throws {
        let known = WorkerError(
            status: 4,
            body: Data(#"{"error": {"code": "reauthentication_required", "message": "m"}}"#.utf8)
        )
        #expect(
            known.code == .reauthenticationRequired && LanyardCLI.ExitStatus(for: known) == .reauthenticationRequired
        )
        let unknown = WorkerError(
            status: 5,
            body: Data(#"{"error": {"code": "from_a_newer_version", "message": "m"}}"#.utf8)
        )
        #expect(unknown.code == .refreshFailed && LanyardCLI.ExitStatus(for: unknown) == .storeUnavailable)
        let garbled = WorkerError(status: 1, body: Data("not json".utf8))
        #expect(garbled.code == .refreshFailed && garbled.errorDescription == "the refresh worker exited with status 1")
    }

    /// What a worker writes for an error (``ErrorView``) is what its caller rebuilds: the same
    /// document, slot and chain of causes included, and the same status.
    @Test func aWorkersErrorIsRebuiltWithItsSlotAndCauses() throws {
        let endpoint = "https://127.0.0.1:2379"
        let tls = EtcdError.tls(endpoint: endpoint, detail: "the CA does not sign the server's certificate")
        let errors: [any LanyardError] = [
            FleetError.unavailable(
                fleet: "home",
                endpoints: [endpoint],
                detail: tls.userFacingDescription,
                cause: ErrorCause(tls)
            ),
            ClientError.reauthenticationRequired(slot: "work", reason: "refresh_token_reused"),
            FleetError.lockLost(slot: try Slot("work"), fleet: "home"),
        ]
        for error in errors {
            let written = ErrorView(error).json
            let status = LanyardCLI.ExitStatus(for: error).rawValue
            let rebuilt = WorkerError(status: status, body: Data(written.serialized().utf8))
            #expect(ErrorView(rebuilt).json == written)
            #expect(LanyardCLI.ExitStatus(for: rebuilt) == LanyardCLI.ExitStatus(for: error))
        }
        let unavailable = ErrorView(errors[0])
        #expect(unavailable.causes == [.etcdTLS] && unavailable.slot == nil)
        #expect(ErrorView(errors[1]).slot == "work" && ErrorView(errors[1]).causes.isEmpty)
    }

    /// `exec` of a command that is not on PATH exits 127, as a shell does, and leaves no folder.
    @Test func execOfAMissingCommandExits127() async throws {
        let cli = CLIHarness()
        try cli.addSlot("work", active: true)
        var credential = try cli.store.get(try Slot("work"))
        credential.tokens.idToken = "e30.e30.c2ln"  // Codex's auth.json needs one
        try cli.store.put(credential, for: try Slot("work"))
        let r = await cli.run("exec", "--", "lanyard-no-such-command")
        #expect(r.status == 127)
        #expect(r.stderr == "lanyard: command not found: lanyard-no-such-command\n", "\(r.stderr)")
        #expect(ExecError.commandNotFound("x").code == .commandNotFound)
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: cli.paths.runtimeDirectory + "/exec")) ?? []
        #expect(folders.isEmpty, "\(folders)")
        // A path that does not exist is not found either; one that exists but cannot run exits 126.
        #expect(await cli.run("exec", "--", cli.root + "/no-such-file").status == 127)
        let notExecutable = cli.root + "/plain.txt"
        try Data("hello".utf8).write(to: URL(fileURLWithPath: notExecutable))
        let refused = await cli.run("exec", "--", notExecutable)
        #expect(refused.status == 126)
        #expect(
            refused.stderr.hasPrefix("lanyard: cannot run \(notExecutable): Permission denied"),
            "\(refused.stderr)"
        )
        let left = (try? FileManager.default.contentsOfDirectory(atPath: cli.paths.runtimeDirectory + "/exec")) ?? []
        #expect(left.isEmpty, "\(left)")
    }

    /// `exec SLOT -- CMD` names the slot like every other command, and `--account` still works.
    @Test func execTakesTheSlotBeforeDashDash() async throws {
        let cli = CLIHarness()
        try cli.addSlot("home", active: true)
        try cli.addSlot("work")
        for name in ["home", "work"] {
            var credential = try cli.store.get(try Slot(name))
            credential.tokens.idToken = "e30.e30.c2ln"
            try cli.store.put(credential, for: try Slot(name))
        }
        let out = cli.root + "/account"
        func ran(_ args: [String]) async throws -> String {
            let r = await cli.run(args)
            #expect(r.status == 0, "\(args): \(r.stderr)")
            return try String(contentsOfFile: out, encoding: .utf8)
        }
        let script = ["/bin/sh", "-c", "printf %s \"$LANYARD_ACCOUNT\" > '\(out)'"]
        #expect(try await ran(["exec", "work", "--"] + script) == "work")
        #expect(try await ran(["exec", "--account", "work", "--"] + script) == "work")
        #expect(try await ran(["exec", "--"] + script) == "home")
        #expect(await cli.run(["exec", "work", "home", "--"] + script).status == 2)
        #expect(await cli.run(["exec", "nobody", "--"] + script).status == 3)
    }

    @Test func errorsMapToTheirDocumentedStatuses() async throws {
        let cases: [(any Error, LanyardCLI.ExitStatus)] = [
            (StoreError.locked(backend: "k", hint: "h"), .storeUnavailable),
            (StoreError.notFound(slot: try Slot("w")), .notSignedIn),
            (RegistryError.unknownSlot(try Slot("w")), .notSignedIn),
            (ClientError.reauthenticationRequired(slot: "w", reason: "r"), .reauthenticationRequired),
            (ClientError.usageLimitReached(UsageLimit()), .usageLimit), (AuthError.cancelledSignIn, .cancelled),
            (AuthError.tokenExchangeFailed(status: 401, detail: ServerErrorDetail()), .reauthenticationRequired),
            (AuthError.tokenExchangeFailed(status: 500, detail: ServerErrorDetail()), .network),
            (ClientError.invalidHeader(name: "X", problem: "p"), .failure),
            (UsageError(message: "m", command: nil), .usage),
            (CancellationError(), .cancelled), (URLError(.badURL), .failure),
            // Refreshed tokens the store refused: waiting (fix the store) or lost (sign in again).
            (StoreError.refreshedTokensInRecoveryFile(path: "p", storeFailure: "s"), .storeUnavailable),
            (
                StoreError.refreshedTokensInKernelKeyring(path: "p", storeFailure: "s", fileFailure: "f"),
                .storeUnavailable
            ),
            (
                StoreError.refreshedSignInLost(slot: try Slot("w"), path: "p", storeFailure: "s", fileFailure: "f"),
                .reauthenticationRequired
            ),
        ]
        for (error, status) in cases { #expect(LanyardCLI.ExitStatus(for: error) == status, "\(error)") }
        #expect(AuthError.tokenExchangeFailed(status: 403, detail: ServerErrorDetail()).code == .tokenExchangeRefused)
        #expect(AuthError.tokenExchangeFailed(status: 502, detail: ServerErrorDetail()).code == .tokenExchangeFailed)
    }
}
