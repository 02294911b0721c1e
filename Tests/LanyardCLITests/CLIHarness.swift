import Foundation
import LanyardAuth
import LanyardCLI
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// Runs `lanyard` in-process against a private HOME.
final class CLIHarness: @unchecked Sendable {
    let root: String
    let store = MemoryStore()
    var extraEnvironment: [String: String] = [:]
    var workingDirectory: String
    var tty = false
    /// Lines on standard input.
    var input: [String] = []
    /// Use the real Secret Service and file backends instead of the in-memory store.
    var realStores = false
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))

    init() {
        let base = (NSTemporaryDirectory() as NSString).standardizingPath
        var template = Array((base + "/lanyard-cli.XXXXXX").utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        workingDirectory = root + "/work"
        try? FileManager.default.createDirectory(atPath: workingDirectory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var environment: [String: String] {
        let inherited = ProcessInfo.processInfo.environment.filter {
            ["DBUS_SESSION_BUS_ADDRESS", "PATH"].contains($0.key)
        }
        return inherited.merging([
            "HOME": root + "/home", "XDG_CONFIG_HOME": root + "/config", "XDG_DATA_HOME": root + "/data",
            "XDG_STATE_HOME": root + "/state", "XDG_RUNTIME_DIR": root + "/run",
        ]) { $1 }.merging(extraEnvironment) { $1 }
    }

    var paths: Paths { Paths(environment: environment) }
    var registry: Registry { Registry(paths: paths) }

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
        /// stdout parsed as a JSON object.
        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any] ?? [:]
        }
    }

    /// Runs `lanyard args` in-process, as `main` would, on a thread of its own: a command is
    /// synchronous (it waits for its async work on its own thread), so it must never run on a
    /// cooperative thread, where that wait could starve the tasks it waits for; and, lasting as
    /// long as the command, it must not hold one of the blocking executor's pooled threads either
    /// (hundreds of tests at once would queue the work their commands wait for).
    @discardableResult
    func run(_ args: String...) async -> Result { await run(args) }

    /// ``run(_:)-swift.method`` with an injected `sleeper` (virtual time for the sign-in's polling).
    func run(_ args: [String], sleeper: (any Sleeper)? = nil) async -> Result {
        await BlockingExecutor.shared.run(.ownThread) { [self] in
            let out = TextSink()
            let err = TextSink()
            // Each line of `input` ended by a newline, as a program would send them.
            var context = CommandContext(
                stdout: out,
                stderr: err,
                input: TextInput(Data(input.map { $0 + "\n" }.joined().utf8)),
                environment: environment,
                workingDirectory: workingDirectory,
                clock: clock,
                stdoutIsTTY: tty,
                stderrIsTTY: tty,
                stdinIsTTY: tty,
                openStore: opener,
                transportFactory: { URLSessionTransport(timeout: $0) }
            )
            if let sleeper { context.sleeper = sleeper }
            let status = Lanyard.run(args, context: context)
            return Result(status: status, stdout: out.text, stderr: err.text)
        }
    }

    /// Doctor's problems (`doctor --json`) but for keyring items the registry does not list: with
    /// ``realStores`` the test keyring is shared with the tests running beside this one, and
    /// their items are unregistered here, so doctor's exit status says nothing about this home.
    func doctorProblemsOfThisHome() async -> [String] {
        let report = await run("doctor", "--json")
        return
            (report.json["problems"] as? [String] ?? [
                "doctor --json printed no report: \(report.stdout) \(report.stderr)"
            ])
            .filter { !$0.hasSuffix(", which the registry does not list") }
    }

    /// The real backends, or the in-memory store.
    var opener: ConfiguredStoreOpener {
        if realStores { return StoreOpeners.system }
        let store = self.store
        return { @Sendable _, _, _, _ in store }
    }

    /// Adds a signed-in slot to the registry (and a credential to the store).
    func addSlot(
        _ name: String,
        email: String? = nil,
        plan: String = "plus",
        state: AuthState? = nil,
        active: Bool = false
    ) throws {
        let slot = try Slot(name)
        let account = AccountInfo(
            email: email ?? "\(name)@example.com",
            accountID: "acct-\(name)",
            plan: Plan(rawValue: plan)
        )
        try registry.update { doc in
            doc.slots[slot] = SlotRecord(
                provider: "openai",
                backend: .secretService,
                account: account,
                state: state ?? .signedIn(expiresAt: clock.now() + 7800),
                lastRefresh: clock.now() - 180
            )
            if active { doc.active = slot }
        }
        try store.put(
            Credential(
                provider: "openai",
                tokens: TokenSet(accessToken: "AT-\(name)-SECRET", refreshToken: "RT-\(name)-SECRET"),
                lastRefresh: clock.now(),
                account: account
            ),
            for: slot
        )
    }
}

func lanyardBinary() -> String { builtBinary("lanyard") }

/// A slot-name prefix unique to one test, since the test keyring is shared by the whole run.
func uniquePrefix() -> String { "t" + String(UInt32.random(in: 0...UInt32.max), radix: 36) }

extension CLIHarness {
    /// The account manager the CLI would build (real stores when `realStores`).
    func accountManager(transport: any HTTPTransport = URLSessionTransport()) throws -> AccountManager {
        let config = try ConfigFile.load(path: paths.configFile).config
        let paths = self.paths
        let open = opener
        return AccountManager(
            paths: paths,
            config: config,
            openStore: { kind, interactive in try open(kind, config, paths, interactive) },
            transport: transport,
            clock: SystemClock()
        )
    }
}
