import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport
import LanyardSystem

/// `lanyard tray`: a StatusNotifierItem whose menu shows every slot with its usage and switches
/// the active slot (see docs/desktop.md). The D-Bus side is LanyardGLib's `StatusNotifier` (GDBus
/// on a GLib main loop of its own thread); this drives it: it rebuilds ``TrayModel`` whenever the
/// registry changes (inotify), usage arrives or the desktop chooses an entry.
package struct TrayService: Sendable {
    package struct Options: Sendable {
        /// The well-known name the item owns (the StatusNotifierItem convention: PID and instance).
        package var busName = "org.kde.StatusNotifierItem-\(getpid())-1"
        /// The environment of `switch` (Codex's home, for Codex to follow).
        package var environment: [String: String] = [:]
        /// A time for people ("in 2 h (14:05)").
        package var describe: @Sendable (Date) -> String = { "at \(RFC3339.string(from: $0))" }
        /// A time of day ("21:11", "Jan 16 21:11").
        package var clockTime: @Sendable (Date) -> String = { RFC3339.string(from: $0) }
        /// What "Sign in again…" and "Open usage details" start (the CLI opens a terminal); nil,
        /// or why it could not.
        package var launch: @Sendable (TrayAction) -> String? = { _ in "no terminal" }
        /// Signs a slot in without a terminal (the browser sign-in, `lanyard login SLOT` in the
        /// background), waiting for it: nil when it signed in, else why not, for people.
        package var signInWithoutTerminal: (@Sendable (Slot) async -> String?)?
        /// Opens a provider's page in the browser: "Open usage details" without a terminal.
        package var openPage: @Sendable (URL) -> Void = { _ in }
        /// One line about something that went wrong (a failed switch, a refused registration).
        package var diagnostics: @Sendable (String) -> Void = { _ in }

        package init() {}
    }

    private enum Input: Sendable {
        case desktop(StatusNotifierEvent)
        case registryChanged
        /// Lines were appended to the event log (a `usage_limit_reached` another process saw).
        case eventsAppended
        case pollDue
        case usage(Slot, FetchOutcome)
        case notification(DesktopNotificationEvent)
        /// A sign-in started without a terminal ended: nil when it signed in, else why not.
        case signedIn(Slot, problem: String?)
    }

    let manager: AccountManager
    let options: Options

    package init(manager: AccountManager, options: Options) {
        self.manager = manager
        self.options = options
    }

    /// What one usage check of a slot gave.
    enum FetchOutcome: Sendable {
        case report(UsageReport)
        case limit(resetsAt: Date?)
        /// Why it failed, for people.
        case failed(String)
    }

    /// Serves the item until "Quit" is chosen or the task is cancelled (Ctrl-C, SIGTERM); either
    /// way it returns normally.
    package func run() async throws {
        // Connecting to the bus and stopping (joining the loop's thread) block: not on the pool.
        let busName = options.busName
        let notifier: StatusNotifier
        do {
            notifier = try await BlockingExecutor.shared.run { try StatusNotifier(busName: busName, itemID: "lanyard") }
        } catch let error as StatusNotifierFailure {
            throw IntegrationError.unsupported("cannot show the tray item: \(error.description)")
        }
        var notices = await TrayNotifications.start(
            manager: manager,
            describe: options.describe,
            clock: options.clockTime,
            diagnostics: options.diagnostics
        )
        do {
            try await serve(notifier, &notices)
        } catch {
            await notices.stop()
            await BlockingExecutor.shared.run { notifier.stop() }
            throw error
        }
        await notices.stop()
        await BlockingExecutor.shared.run { notifier.stop() }
    }

    private func serve(_ notifier: StatusNotifier, _ notices: inout TrayNotifications) async throws {
        let registry = manager.registry
        let watch = registry.watch()
        defer { watch.close() }
        // The event log tells what the registry does not: a usage limit a request of another
        // process ran into (Codex through `lanyard exec`, the agent's own check).
        try? SecureFiles.ensureDirectory(manager.paths.stateDirectory)
        let eventsWatch = FolderWatch(directory: manager.paths.stateDirectory)
        defer { eventsWatch.close() }
        var events = EventLogCursor(manager.eventLog)
        let watchFDs = (registry: watch.fd, events: eventsWatch.fd)
        let stop = try closeOnExecPipe()
        defer {
            close(stop.read)
            close(stop.write)
        }
        let (inputs, input) = AsyncStream<Input>.makeStream(bufferingPolicy: .unbounded)

        try await withTaskCancellationHandler {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask {
                    for await event in notifier.events { input.yield(.desktop(event)) }
                }
                if let center = notices.center {
                    group.addTask {
                        for await event in center.events { input.yield(.notification(event)) }
                    }
                }
                group.addTask {
                    // A thread of the blocking executor waits on inotify for the tray's lifetime.
                    while let changed = await BlockingExecutor.shared.run(
                        .toCompletion,
                        {
                            Self.waitForChange(watchFDs, stop: stop.read)
                        }
                    ) {
                        if changed.registry { input.yield(.registryChanged) }
                        if changed.events { input.yield(.eventsAppended) }
                    }
                }
                var document = try await loadRegistry()
                var usage: [Slot: SlotUsage] = [:]
                var checked: [Slot: ContinuousClock.Instant] = [:]
                let interval = pollInterval(document)
                // Without `[desktop] notify` nothing needs usage between looks at the menu.
                if let interval, notices.watchesUsage {
                    group.addTask {
                        // Ends quietly when the tray stops (a cancelled sleep is no failure).
                        while (try? await Task.sleep(for: .seconds(interval))) != nil {
                            input.yield(.pollDue)
                        }
                    }
                }
                func fetch(_ slots: [Slot]) {
                    for slot in slots where hasUsageEndpoint(slot, document) {
                        checked[slot] = .now
                        group.addTask { input.yield(.usage(slot, await self.usage(of: slot))) }
                    }
                }
                var ids = TrayMenuIDs()
                let labelMode = manager.config.desktopLabel
                func rebuild() -> TrayModel {
                    TrayModel(document: document, usage: usage, ids: &ids, clock: clock(), label: labelMode)
                }
                // An entry or a button: done, a failure said by notification, and the registry
                // read here, so the change is this one's to say (inotify's wake-up then finds
                // nothing new): a switch to a slot that cannot be used now.
                func act(_ action: TrayAction) async {
                    if let problem = await perform(action, document: document) {
                        notices.say(problem.summary, problem.body, urgency: 2)
                    }
                    let previous = document
                    document = await reload(document)
                    await notices.registryChanged(from: previous, to: document, usage: usage)
                }
                var model = rebuild()
                var shownMinute = Int(Date().timeIntervalSince1970 / 60)
                publish(model, on: notifier)
                // Figures other programs fetched, before the tray's own answers arrive.
                await adopt(&usage)
                let first = document.sortedSlots.map(\.slot).filter { hasUsageEndpoint($0, document) }
                notices.awaitFirstUsage(of: Set(first))
                fetch(first)
                inputLoop: for await next in inputs {
                    switch next {
                    case .registryChanged:
                        let previous = document
                        document = await reload(document)
                        await notices.registryChanged(from: previous, to: document, usage: usage)
                        // A slot signed in meanwhile shows its usage without waiting for the menu.
                        fetch(document.sortedSlots.map(\.slot).filter { checked[$0] == nil })
                    case .usage(let slot, let outcome):
                        var known = usage[slot] ?? SlotUsage()
                        switch outcome {
                        case .report(let report): known.record(report, at: Date())
                        case .limit(let resetsAt): known.recordLimit(resetsAt: resetsAt)
                        case .failed(let reason): known.recordFailure(reason)
                        }
                        usage[slot] = known
                        await notices.usageArrived(slot, known, document: document, usage: usage)
                    case .eventsAppended:
                        // Usage another program fetched (usage.json), and limits it ran into.
                        await adopt(&usage)
                        for (slot, resetsAt) in Self.usageLimits(in: events.newEvents())
                        where document.slots[slot] != nil {
                            usage[slot, default: SlotUsage()].recordLimit(resetsAt: resetsAt)
                        }
                    case .signedIn(let slot, let problem):
                        if let problem { notices.say("\(slot.name) is not signed in", problem, urgency: 2) }
                    case .pollDue:
                        fetch(document.active.map { [$0] } ?? [])
                    case .desktop(.registered):
                        continue inputLoop
                    case .notification(let event):
                        guard let action = notices.action(for: event) else { continue inputLoop }
                        if case .signIn(let slot) = action {
                            signIn(slot, group: &group, input: input, notices: &notices)
                            continue inputLoop
                        }
                        await act(action)
                    case .desktop(.menuOpened):
                        // The menu shows every slot: refresh those checked longer ago than the poll
                        // (and the rebuild below says how old the figures shown are).
                        let stale = document.sortedSlots.map(\.slot).filter { slot in
                            checked[slot].map { $0.duration(to: .now) > .seconds(interval ?? 300) } ?? true
                        }
                        fetch(stale)
                        // What the menu shows changes with time only by the minute ("3 min ago"):
                        // rebuilt for a new minute, not at every opening of every submenu.
                        let minute = Int(Date().timeIntervalSince1970 / 60)
                        if minute == shownMinute { continue inputLoop }
                        shownMinute = minute
                    case .desktop(.clicked(let id)):
                        guard let action = model.actions[id] else { continue inputLoop }
                        if action == .quit { break inputLoop }
                        if case .refresh(let slot) = action {
                            fetch([slot])
                            continue inputLoop
                        }
                        if case .signIn(let slot) = action {
                            signIn(slot, group: &group, input: input, notices: &notices)
                            continue inputLoop
                        }
                        await act(action)
                    }
                    let rebuilt = rebuild()
                    if rebuilt != model {
                        model = rebuilt
                        publish(model, on: notifier)
                    }
                }
                group.cancelAll()
                _ = write(stop.write, "x", 1)
            }
        } onCancel: {
            input.finish()
            _ = write(stop.write, "x", 1)
        }
    }

    /// Pushes `model` to the bus (a new layout revision, with LayoutUpdated).
    /// The icons of menu rows, by what they show (a handful of different ones at most).
    private static let rowIcons = Locked<[TrayIcon: [UInt8]]>([:])

    /// Pushes `model` to the bus (a new layout revision, with LayoutUpdated). The icon is pixels
    /// only, never a theme icon name (see ``TrayIcon``).
    private func publish(_ model: TrayModel, on notifier: StatusNotifier) {
        let entries = model.entries.map { entry in
            let png = entry.icon.map { icon in
                Self.rowIcons.withLock { cache in
                    if let png = cache[icon] { return png }
                    if cache.count > 64 { cache.removeAll() }
                    let png = icon.png(size: 16)
                    cache[icon] = png
                    return png
                }
            }
            return StatusNotifierMenuEntry(
                id: entry.id,
                parent: entry.parent,
                label: entry.label,
                toggle: entry.radio.map { .radio(on: $0) },
                enabled: entry.enabled,
                isSeparator: entry.isSeparator,
                iconPNG: png ?? []
            )
        }
        let pixmaps = TrayIcon.pixmapSizes.map { size in
            StatusNotifierPixmap(width: Int32(size), height: Int32(size), argb: model.icon.pixels(size: size))
        }
        notifier.update(
            entries,
            look: StatusNotifierLook(
                status: model.state.itemStatus,
                iconName: "",
                pixmaps: pixmaps,
                title: "Lanyard",
                tooltipTitle: model.tooltipTitle,
                tooltipBody: model.tooltipBody,
                label: model.label,
                labelGuide: model.label.isEmpty ? "" : "100 %"
            )
        )
    }

    private func clock() -> TrayModel.Clock {
        TrayModel.Clock(now: Date(), describe: options.describe, clock: options.clockTime)
    }

    /// Takes the figures of usage.json that are newer than those known (another program's).
    private func adopt(_ usage: inout [Slot: SlotUsage]) async {
        let paths = manager.paths
        let shared = await BlockingExecutor.shared.run { UsageState.load(paths) }
        for (slot, entry) in shared.slots {
            if let fetched = usage[slot]?.fetchedAt, fetched >= entry.fetchedAt { continue }
            usage[slot] = SlotUsage(report: entry.report, fetchedAt: entry.fetchedAt)
        }
    }

    /// "Sign in again…": `lanyard login SLOT` in a terminal; without one, the browser sign-in
    /// in the background, its outcome said by notification; with neither, a notification says why.
    private func signIn(
        _ slot: Slot,
        group: inout ThrowingDiscardingTaskGroup<any Error>,
        input: AsyncStream<Input>.Continuation,
        notices: inout TrayNotifications
    ) {
        guard let problem = options.launch(.signIn(slot)) else { return }
        guard let direct = options.signInWithoutTerminal else {
            options.diagnostics(problem)
            notices.say("Cannot sign \(slot.name) in", problem, urgency: 2)
            return
        }
        group.addTask { input.yield(.signedIn(slot, problem: await direct(slot))) }
    }

    /// The registry as it is now; when it cannot be read (a half-written or damaged file), says
    /// why and keeps showing `previous` rather than an empty menu.
    private func reload(_ previous: RegistryDocument) async -> RegistryDocument {
        do {
            return try await loadRegistry()
        } catch let error as any LanyardError {
            options.diagnostics("cannot read the registry: \(error.userFacingDescription)")
        } catch {
            options.diagnostics("cannot read the registry: \(error)")
        }
        return previous
    }

    /// Does what an entry or a notification's button asks; `document` is the registry as the
    /// tray last read it.
    /// - Returns: a switch that failed, said for people (a tray started at login has no stderr
    ///   anyone reads: the loop says it by notification).
    private func perform(_ action: TrayAction, document: RegistryDocument) async -> (summary: String, body: String)? {
        func failed(_ description: String) -> (summary: String, body: String)? {
            options.diagnostics(description)
            switch action {
            case .switchTo(let slot): return ("Lanyard did not switch to \(slot.name)", description)
            case .best: return ("Lanyard did not switch", description)
            default: return nil
            }
        }
        do {
            switch action {
            case .switchTo(let slot):
                _ = try await manager.switchActive(to: slot, environment: options.environment, reason: .user)
            case .best:
                let chosen = try await manager.bestSlot().chosen()
                _ = try await manager.switchActive(
                    to: chosen.slot,
                    environment: options.environment,
                    reason: .best(usedPercent: chosen.usedPercent)
                )
            case .signIn:
                break  // handled by the loop (it may run long)
            case .openUsage:
                guard let problem = options.launch(action) else { break }
                // No terminal: the active slot's provider's own usage page, where there is one.
                let provider = document.active.flatMap { document.slots[$0]?.provider }
                if let page = provider.flatMap({ manager.config.providers[$0]?.usagePageURL }) {
                    options.diagnostics("\(problem): opening the usage page in the browser instead")
                    options.openPage(page)
                } else {
                    options.diagnostics(problem)
                }
            case .refresh, .quit:
                break  // handled by the loop
            }
        } catch let error as any LanyardError {
            return failed(error.userFacingDescription)
        } catch {
            return failed("\(error)")
        }
        return nil
    }

    private func loadRegistry() async throws -> RegistryDocument {
        let registry = manager.registry
        return try await BlockingExecutor.shared.run { try registry.load() }
    }

    private func hasUsageEndpoint(_ slot: Slot, _ document: RegistryDocument) -> Bool {
        guard let record = document.slots[slot], case .signedIn = record.state else { return false }
        return manager.config.providers[record.provider]?.usageBaseURL != nil
    }

    /// `[switch] poll` for the active slot's provider; nil when no slot's provider reports usage
    /// (then nothing is polled at all).
    private func pollInterval(_ document: RegistryDocument) -> TimeInterval? {
        let providers =
            document.active.flatMap { document.slots[$0]?.provider }.map { [$0] }
            ?? Array(Set(document.slots.values.map(\.provider)))
        let endpoints = providers.compactMap { manager.config.providers[$0]?.usageBaseURL }
        return endpoints.map { manager.config.autoSwitch.pollInterval(usageBaseURL: $0) }.min()
    }

    private func usage(of slot: Slot) async -> FetchOutcome {
        do {
            return .report(try await manager.usage(slot: slot))
        } catch ClientError.usageLimitReached(let limit) {
            return .limit(resetsAt: limit.resetsAt)
        } catch {
            return .failed(Self.reason(error))
        }
    }

    /// Why a usage check failed, in words for people (never an internal code).
    static func reason(_ error: any Error) -> String {
        switch error {
        case ClientError.httpError(let status, _): return "the server answered \(status)"
        case ClientError.networkFailure: return "the server could not be reached"
        case ClientError.invalidResponse: return "the server's answer could not be read"
        case ClientError.reauthenticationRequired, ClientError.missingRefreshToken, ClientError.missingCredential:
            return "the slot must sign in again"
        case StoreError.locked: return "the keyring is locked"
        case StoreError.unavailable: return "the keyring cannot be reached"
        case StoreError.timedOut: return "the keyring did not answer in time"
        default: return "the usage could not be read"
        }
    }

    /// The usage limits logged in `events` (`error` events with `usage_limit_reached`), by slot,
    /// with their reset times when known; the latest wins.
    static func usageLimits(in events: [JSONValue]) -> [Slot: Date?] {
        var limits: [Slot: Date?] = [:]
        for event in events
        where event["event"]?.string == "error" && event["code"]?.string == ErrorCode.usageLimitReached.rawValue {
            guard let name = event["slot"]?.string, let slot = try? Slot(name) else { continue }
            limits[slot] = event["resets_at"]?.string.flatMap { RFC3339.date(from: $0) }
        }
        return limits
    }

    /// Blocks until the registry's folder or the event log's changes (which of them), or `stop`
    /// is written to (nil).
    private static func waitForChange(
        _ watches: (registry: Int32, events: Int32),
        stop: Int32
    ) -> (registry: Bool, events: Bool)? {
        var fds = [
            pollfd(fd: stop, events: Int16(POLLIN), revents: 0),
            pollfd(fd: watches.registry, events: Int16(POLLIN), revents: 0),
            pollfd(fd: watches.events, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let n = poll(&fds, 3, -1)
            if n < 0 && errno == EINTR { continue }
            if n < 0 || fds[0].revents != 0 { return nil }
            let changed = (registry: fds[1].revents != 0, events: fds[2].revents != 0)
            if changed.registry { FolderWatch.drain(watches.registry) }
            if changed.events { FolderWatch.drain(watches.events) }
            if changed.registry || changed.events { return changed }
        }
    }
}
