import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardSystem

/// One run of one command: its context, parsed arguments, and what it loads on demand
/// (config, registry), each at most once.
package final class Invocation: Sendable {
    package let context: CommandContext
    package let spec: CommandSpec
    package let args: ParsedArguments
    package let paths: Paths
    package let json: Bool
    /// Colour on stdout: only on a TTY, never with NO_COLOR or --no-color.
    package let style: Style
    /// Colour on stderr, by the same rules.
    package let errorStyle: Style
    private let loadedConfig = Locked<LanyardConfig?>(nil)

    init(context: CommandContext, spec: CommandSpec, args: ParsedArguments) {
        self.context = context
        self.spec = spec
        self.args = args
        paths = Paths(environment: context.environment)
        json = args.has("json")
        let noColor = args.has("no-color") || context.environment["NO_COLOR"].map { !$0.isEmpty } == true
        style = Style(enabled: context.stdoutIsTTY && !noColor)
        errorStyle = Style(enabled: context.stderrIsTTY && !noColor)
    }

    var stdout: TextSink { context.stdout }
    var stderr: TextSink { context.stderr }
    var now: Date { context.clock.now() }

    /// The config, loaded once; warnings go to stderr.
    func config() throws -> LanyardConfig {
        try loadedConfig.withLock { cached in
            if let cached { return cached }
            let loaded = try ConfigFile.load(path: paths.configFile)
            for warning in loaded.warnings { stderr.line("lanyard: warning: \(warning)") }
            cached = loaded.config
            return loaded.config
        }
    }

    var registry: Registry { Registry(paths: paths) }

    /// The credential store of a backend.
    func store(_ kind: BackendKind, interactive: Bool = false) throws -> any CredentialStore {
        try context.openStore(kind, try config(), paths, interactive)
    }

    /// The account manager for this invocation's config, stores and transport.
    func accounts() throws -> AccountManager {
        let config = try config()
        let open = context.openStore
        let paths = paths
        var manager = AccountManager(
            paths: paths,
            config: config,
            openStore: { kind, interactive in try open(kind, config, paths, interactive) },
            transport: context.transport ?? context.transportFactory?(config.httpTimeout) ?? NoNetwork(),
            clock: context.clock,
            sleeper: context.sleeper
        )
        if context.handlesSignals {
            manager.refreshRunner = RefreshWorker.runner(
                environment: context.environment,
                executable: context.transportFactory == nil ? NetworkHandoff.binary() : nil
            )
        }
        return manager
    }

    /// Where `rename` and `doctor` look for `.lanyard` pins: here and below, and under HOME.
    var pinSearch: PinSearch {
        PinSearch(workingDirectory: context.workingDirectory, environment: context.environment)
    }

    /// The slot's credential, refreshed first when due. When none is due (the common case) it is
    /// read without starting the async machinery (a task, worker threads, signal sources). A
    /// locked file store is offered to be unlocked on a terminal.
    func freshCredential(_ manager: AccountManager, slot: Slot) throws -> Credential {
        func read() throws -> Credential {
            let stored = try manager.storedCredential(slot: slot, force: false)
            return stored.due ? try runAsync { try await manager.freshCredential(after: stored) } : stored.credential
        }
        do { return try read() } catch StoreError.locked(let backend, _)
            where backend == EncryptedFileStore.backendName && mayAskForPassphrase
        {
            try unlockFileStoreOnTerminal()
            return try read()
        }
    }

    /// Whether a locked file store may be unlocked by asking for its passphrase: on a terminal,
    /// with no LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS (which open it without asking) and a
    /// kernel keyring to keep it unlocked for the processes the command starts (refresh workers).
    var mayAskForPassphrase: Bool {
        context.stdinIsTTY && !PassphraseReader(environment: context.environment).hasUnattendedSource
            && EncryptedFileStore.cacheUnavailableReason == nil
    }

    /// The number of passphrases a terminal user may get wrong before a command gives up.
    static let passphraseTries = 3

    /// Asks for the file store's passphrase on the terminal (up to ``passphraseTries`` times; only
    /// when ``mayAskForPassphrase``) and unlocks it for `[store] unlock-cache` seconds, as `lanyard
    /// store unlock` does.
    func unlockFileStoreOnTerminal() throws {
        let config = try config()
        let file = EncryptedFileStore(
            paths: paths,
            unlockCacheSeconds: config.unlockCacheSeconds,
            tpm: .resolve(environment: context.environment, configured: config.tpmTCTI)
        )
        let reader = PassphraseReader(environment: context.environment)
        if file.isSealed {
            // One try: the TPM counts a wrong PIN towards its lockout, and the error says how many are left.
            try file.unlock(
                passphrase: try reader.read(prompt: "The file store is locked. TPM PIN for the Lanyard file store: ")
            )
            return
        }
        try file.unlock(tries: Self.passphraseTries) { attempt in
            try reader.read(
                prompt: attempt == 1
                    ? "The file store is locked. Passphrase for the Lanyard file store: "
                    : "Wrong passphrase; try again: "
            )
        }
    }

    /// Runs async work to completion on the command's thread (through ``SyncBridge``: a command is
    /// synchronous and never runs inside a task); with signal handling on and `interruptible`,
    /// Ctrl-C (SIGINT) or SIGTERM cancels it.
    func runAsync<T: Sendable>(interruptible: Bool = true, _ work: @escaping @Sendable () async throws -> T) throws -> T
    {
        var watch: InterruptWatch?
        defer { watch?.cancel() }
        return try SyncBridge.wait(work) { cancel in
            if interruptible { watch = onInterrupt(cancel) }
        }
    }

    /// With signal handling on, runs `handler` on Ctrl-C (SIGINT) or SIGTERM instead of their
    /// default action, until the returned watch is cancelled (see ``InterruptSignals``: the
    /// handler is in place when this returns).
    func onInterrupt(_ handler: @escaping @Sendable () -> Void) -> InterruptWatch? {
        guard context.handlesSignals else { return nil }
        return InterruptSignals.watch(handler)
    }

    /// The slot this command acts on by the documented precedence, or nil when no rule names one.
    /// `active` is asked only when no flag, variable or pin file names a slot.
    func resolveAccount(active: () throws -> Slot?) throws -> AccountResolution? {
        try AccountResolution.resolve(
            flag: args.value("account"),
            environment: context.environment["LANYARD_ACCOUNT"],
            pinFile: { [context, stderr] in
                let lookup = PinFile.find(from: context.workingDirectory)
                for (path, reason) in lookup.ignored {
                    stderr.line("lanyard: warning: ignoring \(path): it \(reason)")
                }
                return lookup.pin
            },
            active: active
        )
    }

    /// The slot named by `positional` when given, else by account resolution; it must exist.
    /// Reads only that slot's record from the registry (see ``RegistryView``).
    func targetSlot(
        positional: String?,
        in view: RegistryView? = nil
    ) throws -> (Slot, SlotRecord, AccountResolution.Rule?) {
        let view = try view ?? registry.view()
        if let positional {
            let slot: Slot
            do { slot = try Slot(positional) } catch {
                throw UsageError(message: error.userFacingDescription, command: spec.name)
            }
            guard let record = try view.record(of: slot) else {
                return (slot, try fetchedFromFleet(slot, chosenBy: nil), nil)
            }
            return (slot, record, nil)
        }
        guard let resolution = try resolveAccount(active: { try view.active() }) else {
            throw RegistryError.noActiveSlot
        }
        guard let record = try view.record(of: resolution.slot) else {
            return (
                resolution.slot, try fetchedFromFleet(resolution.slot, chosenBy: resolution.rule.explanation),
                resolution.rule
            )
        }
        return (resolution.slot, record, resolution.rule)
    }

    /// The record of a slot this machine does not have, brought from its fleet when `[fleet]` is
    /// configured and the fleet shares it (a machine just approved has synced nothing yet);
    /// otherwise the unknown-slot error, naming `lanyard fleet sync` when the fleet could not be asked.
    private func fetchedFromFleet(_ slot: Slot, chosenBy: String?) throws -> SlotRecord {
        guard try config().fleet != nil else { throw RegistryError.unknownSlot(slot, chosenBy: chosenBy) }
        let manager = try accounts()
        switch try runAsync({ await manager.fetchSharedSlot(slot) }) {
        case .fetched(let fleet):
            guard let record = try registry.view().record(of: slot) else { break }
            stderr.line("lanyard: \(slot.name) was not on this machine yet: brought it from fleet \(fleet)")
            return record
        case .notShared: break
        case .unavailable(let fleet, let reason), .refused(let fleet, let reason):
            throw UnsyncedSlotError(slot: slot, fleet: fleet, reason: reason)
        }
        throw RegistryError.unknownSlot(slot, chosenBy: chosenBy)
    }

    /// Prints `value` as JSON with `--json`, else runs `human`.
    func emit(_ value: JSONValue, human: () -> Void) {
        if json {
            stdout.rawLine(value.serialized(pretty: true))
        } else {
            human()
        }
    }

    /// Asks a yes/no question on a terminal; false at end of input.
    func confirm(_ question: String) -> Bool {
        stderr.write("\(question) [y/N] ")
        // An answer that is not a short line of text (or no answer) is a no.
        guard let answer = (try? context.input.line(maxBytes: 1024)) ?? nil else { return false }
        return ["y", "yes"].contains(answer.trimmingSpaces().lowercased())
    }
}

/// ANSI styling that turns itself off when colour is not wanted.
package struct Style: Sendable {
    package let enabled: Bool

    func wrap(_ s: HumanText, _ code: String) -> HumanText { enabled ? .sgr(code, s) : s }
    func bold(_ s: HumanText) -> HumanText { wrap(s, "1") }
    func dim(_ s: HumanText) -> HumanText { wrap(s, "2") }
    func green(_ s: HumanText) -> HumanText { wrap(s, "32") }
    func yellow(_ s: HumanText) -> HumanText { wrap(s, "33") }
    func red(_ s: HumanText) -> HumanText { wrap(s, "31") }
    func bold(_ s: String) -> HumanText { bold(HumanText(s)) }
    func dim(_ s: String) -> HumanText { dim(HumanText(s)) }

    /// A state name coloured by how healthy it is.
    func state(_ state: AuthState) -> HumanText {
        switch state {
        case .signedIn: return green(HumanText(state.description))
        case .reauthenticationRequired: return yellow(HumanText(state.description))
        case .failed: return red(HumanText(state.description))
        default: return dim(HumanText(state.description))
        }
    }
}

/// Aligned text tables for terminals.
enum Table {
    /// Renders rows under a header; `visible` measures cells without ANSI escapes.
    static func render(header: [String], rows: [[HumanText]], style: Style) -> HumanText {
        let headerCells = header.map { HumanText($0) }
        let widths = (0..<header.count).map { col in
            ([headerCells[col]] + rows.map { $0[col] }).map(visibleWidth).max() ?? 0
        }
        func line(_ cells: [HumanText]) -> HumanText {
            HumanText.joined(
                cells.enumerated().map { i, cell in
                    i == cells.count - 1
                        ? cell : cell + HumanText(String(repeating: " ", count: widths[i] - visibleWidth(cell)))
                },
                separator: "  "
            )
        }
        var out = style.bold(line(headerCells)) + "\n"
        for row in rows { out += line(row) + "\n" }
        return out
    }

    static func visibleWidth(_ text: HumanText) -> Int {
        var count = 0
        var inEscape = false
        for ch in text.rendered.unicodeScalars {
            if inEscape {
                if ch == "m" { inEscape = false }
                continue
            }
            if ch == "\u{1B}" {
                inEscape = true
                continue
            }
            count += 1
        }
        return count
    }
}

/// Times in human output, one format everywhere: how far away, then the local clock time, with
/// the date when it is not today ("in 49 min (14:05)", "3 min ago (Jan 14 09:12)").
enum RelativeTime {
    static func describe(_ date: Date, now: Date) -> String {
        let delta = date.timeIntervalSince(now)
        let span = span(abs(delta))
        return (delta >= 0 ? "in \(span)" : "\(span) ago") + " (\(clockTime(date, now: now)))"
    }

    /// Local time of day, preceded by the date when `date` falls on another day than `now`
    /// ("14:05", "Jan 16 14:05"), and written in full in another year ("2028-01-16 14:05").
    static func clockTime(_ date: Date, now: Date) -> String {
        func local(_ d: Date) -> tm {
            var seconds = time_t(d.timeIntervalSince1970.rounded(.down))
            var parts = tm()
            localtime_r(&seconds, &parts)
            return parts
        }
        let t = local(date)
        let n = local(now)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let clock = "\(two(t.tm_hour)):\(two(t.tm_min))"
        if t.tm_year == n.tm_year && t.tm_yday == n.tm_yday { return clock }
        if t.tm_year == n.tm_year { return "\(months[Int(t.tm_mon)]) \(t.tm_mday) \(clock)" }
        return "\(t.tm_year + 1900)-\(two(t.tm_mon + 1))-\(two(t.tm_mday)) \(clock)"
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// A length of time: "45 s", "49 min", "2 h 10 min", "3 d".
    static func span(_ seconds: TimeInterval) -> String {
        let s = seconds.rounded().saturatingInt
        if s < 60 { return "\(s) s" }
        let m = s / 60
        if m < 60 { return "\(m) min" }
        let h = m / 60
        if h < 48 { return m % 60 == 0 ? "\(h) h" : "\(h) h \(m % 60) min" }
        return "\(h / 24) d"
    }
}
