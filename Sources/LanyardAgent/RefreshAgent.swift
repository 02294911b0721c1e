import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardDesktop
import LanyardFleet
import LanyardIntegrations
import LanyardStore
import LanyardSupport
import LanyardSystem

/// The refresh agent: refreshes each signed-in slot shortly after it falls due (the refresh
/// lead, plus a per-slot jitter), retries transient failures with exponential backoff, reports
/// transitions (desktop notification, hook, event log) and otherwise sleeps until the next due
/// time or a change to the registry (inotify), whichever comes first. No polling of its own
/// (auto-switching checks usage every `[switch] poll`; a fleet's watch streams from etcd).
///
/// Refreshes go through ``AccountManager/freshCredential(slot:force:)``, i.e. under the same
/// per-slot lock as the CLI, so the agent and the CLI never refresh a slot twice.
///
/// Isolation: the schedule (states seen, jitters, retries) belongs to the thread that calls
/// ``run()`` or ``runOnce()``, so the agent is deliberately not `Sendable`; other threads (a
/// signal handler) stop it through its ``stopper``.
package final class RefreshAgent {
    /// Stops a running agent from any thread: a write to the agent's stop pipe (signal-safe).
    package struct Stopper: Sendable {
        let fd: Int32

        /// Makes ``RefreshAgent/run()`` return after the refresh in progress.
        package func stop() {
            var byte: UInt8 = 1
            _ = write(fd, &byte, 1)
        }
    }

    package struct Options: Sendable {
        package var jitter: TimeInterval
        package var notify: Bool
        package var hook: String?
        /// The longest single sleep (wall-clock jumps after a suspend are noticed by then).
        package var maximumSleep: TimeInterval = 60
        /// `[switch] auto = usage`: check the active slot's usage every `[switch] poll` seconds and
        /// on a `usage_limit_reached` in the event log, and switch away when it ran out.
        package var autoSwitch = false
        /// The environment switches run in (where Codex's home is).
        package var environment: [String: String] = [:]
        /// A time of day in notifications, as the CLI writes it ("14:05", "Jan 16 14:05").
        package var clockTime: @Sendable (Date) -> String = { RFC3339.string(from: $0) }

        package init(jitter: TimeInterval, notify: Bool, hook: String?) {
            self.jitter = jitter
            self.notify = notify
            self.hook = hook
        }
    }

    private let manager: AccountManager
    private let options: Options
    private let log: EventLog
    private let hook: EventHook?
    private let notifier = DesktopNotifier()
    /// Why notifications failed, said once a run.
    private var notificationProblems = NotificationProblems()
    private let diagnostics: (String) -> Void
    /// Each slot's last seen state name (transitions are changes of it).
    private var known: [Slot: String] = [:]
    /// The jitter chosen for a slot's current token (by its expiry).
    private var jitters: [Slot: (expiry: Date?, offset: TimeInterval)] = [:]
    /// Slots waiting to retry after a transient failure.
    private var retries: [Slot: (attempt: Int, notBefore: Date)] = [:]
    /// Each signed-in slot's expiry as the registry last said (to tell a refresh from a no-op).
    private var expiries: [Slot: (expiry: Date?, refreshed: BootInstant?)] = [:]
    private let stopPipe: [Int32]
    /// When the active slot's usage is next checked (auto-switching).
    private var nextUsageCheck: Date?
    /// Where the event log has been read up to (auto-switching).
    private var eventsRead: EventLogCursor?
    /// The fleet's watch and leader election, when `[fleet]` is configured.
    private var fleet: FleetFollower?

    package init(manager: AccountManager, options: Options, diagnostics: @escaping (String) -> Void) {
        self.manager = manager
        self.options = options
        log = manager.eventLog
        hook = options.hook.map(EventHook.init(command:))
        self.diagnostics = diagnostics
        var fds: [Int32] = [-1, -1]
        _ = Glibc.pipe(&fds)
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        stopPipe = fds
    }

    /// Stops this agent from another thread or a signal handler.
    package var stopper: Stopper { Stopper(fd: stopPipe[1]) }

    /// Makes ``run()`` return after the refresh in progress (signal-safe).
    package func stop() { stopper.stop() }

    /// The agent's lock (`$XDG_DATA_HOME/lanyard/locks/agent.lock`): nil when another agent holds it.
    package static func lock(paths: Paths) throws -> FileLock? {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        try SecureFiles.ensureDirectory(paths.lockDirectory)
        return try FileLock.tryLock(path: paths.lockDirectory + "/agent.lock")
    }

    // MARK: - One pass

    struct Plan {
        var due: [Slot] = []
        var nextWake: Date?
    }

    /// Notes transitions since the last look and works out which slots are due.
    func plan(_ document: RegistryDocument, now: Date, ignoreJitter: Bool) -> Plan {
        var plan = Plan()
        let rule = manager.refreshRule
        let boot = manager.clock.bootInstant()
        // Shared slots are refreshed ahead of expiry by the fleet's leading agent only; the
        // others adopt its tokens through the watch, and step in only once a token has expired.
        let shared = fleet == nil ? [] : Set(SharedSlotState.all(paths: manager.paths).map(\.0))
        let leads = shared.isEmpty ? true : fleet?.leads() ?? true
        for (slot, record) in document.sortedSlots {
            let state = record.state.name
            if let before = known[slot], before != state { transition(slot, from: before, to: record) }
            known[slot] = state
            // A slot that does not rotate (a personal access token) has nothing to refresh.
            guard case .signedIn(let expiry) = record.state, record.rotates else {
                retries[slot] = nil
                jitters[slot] = nil
                expiries[slot] = nil
                continue
            }
            expiries[slot] = (expiry, record.lastRefreshBoot)
            var wake: Date
            if let retry = retries[slot] {
                wake = retry.notBefore
            } else {
                let due = rule.dueDate(
                    expiry: expiry,
                    lastRefresh: record.lastRefresh,
                    lastRefreshBoot: record.lastRefreshBoot,
                    now: now,
                    boot: boot
                )
                let jitterCap = max(
                    0,
                    min(options.jitter, rule.lead(expiry: expiry, lastRefresh: record.lastRefresh) / 2)
                )
                if jitters[slot]?.expiry != expiry { jitters[slot] = (expiry, Double.random(in: 0...jitterCap)) }
                wake = due + (ignoreJitter ? 0 : jitters[slot]!.offset)
                if !leads && shared.contains(slot), let expiry { wake = max(wake, expiry) }
            }
            if wake <= now { plan.due.append(slot) } else { plan.nextWake = min(plan.nextWake ?? wake, wake) }
        }
        for slot in known.keys where document.slots[slot] == nil {
            known[slot] = nil
            jitters[slot] = nil
            retries[slot] = nil
            expiries[slot] = nil
        }
        return plan
    }

    private func transition(_ slot: Slot, from: String, to record: SlotRecord) {
        let to = record.state.name
        diagnostics("\(slot.name): \(from) -> \(to)")
        guard record.state == .reauthenticationRequired else { return }
        let event = EventLog.record(
            "transition",
            slot: slot,
            fields: [
                "from": .string(from), "to": .string(to), "reason": .optional(record.lastErrorCode),
                "fix": .string("lanyard login \(slot.name)"),
            ]
        )
        let who = record.account.email.map { " (\($0))" } ?? ""
        notify(
            summary: "Lanyard: sign in again to \(slot.name)",
            body: "The session of slot \(slot.name)\(who) has ended. Run: lanyard login \(slot.name)",
            urgency: 2
        )
        hook?.run(event)
    }

    /// Refreshes the due slots concurrently and records the outcome of each; for ``run()``, on the
    /// agent's own thread (never a task: it waits, through ``SyncBridge``).
    /// - Returns: how many failed.
    func refresh(_ slots: [Slot]) -> Int {
        let manager = self.manager
        return record(SyncBridge.value { await Self.refreshEach(slots, manager: manager) })
    }

    /// ``refresh(_:)`` for async callers.
    func refresh(_ slots: [Slot]) async -> Int {
        record(await Self.refreshEach(slots, manager: manager))
    }

    /// Refreshes `slots` side by side: one detached task per slot, awaited one after another. Not
    /// a task group: the release build crashed in the runtime's task group
    /// (AccumulatingTaskGroup::offer copying a child's (Slot, Result<Credential, Error>) into the
    /// waiting parent) within a minute of the concurrency soak; this plain fan-out ran it clean.
    private static func refreshEach(
        _ slots: [Slot],
        manager: AccountManager
    ) async -> [(Slot, Result<Credential, Error>)] {
        let tasks = slots.map { slot in
            (slot, Task.detached { () async throws -> Credential in try await manager.freshCredential(slot: slot) })
        }
        var results: [(Slot, Result<Credential, Error>)] = []
        for (slot, task) in tasks {
            do { results.append((slot, .success(try await task.value))) } catch {
                results.append((slot, .failure(error)))
            }
        }
        return results
    }

    /// Records each refresh's outcome (retries, hooks, events). - Returns: how many failed.
    private func record(_ results: [(Slot, Result<Credential, Error>)]) -> Int {
        var failures = 0
        let now = manager.clock.now()
        for (slot, result) in results {
            switch result {
            case .success(let credential):
                retries[slot] = nil
                if let due = manager.refreshRule.dueDate(credential, now: now, boot: manager.clock.bootInstant()),
                    due <= now
                {
                    // It cannot be made fresher (the server keeps issuing tokens that are already
                    // due): look again shortly rather than spin.
                    retries[slot] = (0, now + 1)
                }
                // Refreshed here or by someone else since the plan (expiries are whole seconds, so
                // two refreshes in one second are told apart by their boot-clock readings).
                let before = expiries[slot]
                let refreshed =
                    credential.lastRefreshBoot.map { $0.text != before?.refreshed?.text }
                    ?? (credential.tokens.expiresAt.map { $0.timeIntervalSince1970.saturatingInt }
                        != before?.expiry.map { $0.timeIntervalSince1970.saturatingInt })
                if refreshed {
                    hook?.run(
                        EventLog.record(
                            "refresh",
                            slot: slot,
                            fields: ["expires_at": .date(credential.tokens.expiresAt)]
                        )
                    )
                }
            case .failure(let error):
                let code = (error as? any LanyardError)?.code ?? .error
                switch code {
                case .reauthenticationRequired, .missingRefreshToken:
                    retries[slot] = nil
                    continue  // the registry now says so; the transition is reported from there
                default: break
                }
                // Everything else (network, server, a locked or missing store) backs off, so a
                // slot that keeps failing never makes the agent spin.
                failures += 1
                let attempt = (retries[slot]?.attempt ?? 0) + 1
                let delay = min(300, pow(2, Double(attempt - 1)) * (1 + Double.random(in: 0..<0.25)))
                retries[slot] = (attempt, now + delay)
                let event = log.appendError(
                    code,
                    slot: slot,
                    message: error.userFacingDescription,
                    fields: [
                        "attempt": .number(Double(attempt)), "retry_in": .number((delay * 10).rounded() / 10),
                    ]
                )
                diagnostics(
                    "\(slot.name): refresh failed (\(code.rawValue)): \(error.userFacingDescription); "
                        + "retrying in \(delay.rounded().saturatingInt) s"
                )
                hook?.run(event)
            }
        }
        return failures
    }

    /// `--once`: refreshes every slot that is due now (no jitter), checks the active slot's usage
    /// when auto-switching, and returns how many refreshes failed. For the CLI's own thread;
    /// async code calls the async overload.
    package func runOnce() throws -> Int {
        let plan = try startOnce()
        let failures = refresh(plan.due)
        if options.autoSwitch { _ = checkUsage() }
        return try finishOnce(failures)
    }

    /// ``runOnce()`` for async callers (a program embedding the agent, the tests): nothing waits
    /// on a thread; the registry and the hook's wait run on the blocking executor.
    package func runOnce() async throws -> Int {
        let plan = try startOnce()
        let failures = await refresh(plan.due)
        if options.autoSwitch { _ = await checkUsage() }
        try noteTransitions()
        if let hook { await BlockingExecutor.shared.run { hook.waitForAll(timeout: 10) } }
        return failures
    }

    private func startOnce() throws -> Plan {
        let document = try manager.registry.load()
        known = [:]
        for (slot, record) in document.slots { known[slot] = record.state.name }
        return plan(document, now: manager.clock.now(), ignoreJitter: true)
    }

    private func finishOnce(_ failures: Int) throws -> Int {
        try noteTransitions()
        hook?.waitForAll(timeout: 10)
        return failures
    }

    /// Reports the transitions the refreshes caused.
    private func noteTransitions() throws {
        _ = self.plan(try manager.registry.load(), now: manager.clock.now(), ignoreJitter: true)
    }

    /// Runs until ``stop()``: takes ``nextStep()`` after step, on this thread (the CLI's agent
    /// thread: never a task), and sleeps in `poll` until the step's time, a registry change, an
    /// event (auto-switching) or ``stop()``.
    package func run() throws {
        let watch = manager.registry.watch()
        defer { watch.close() }
        if manager.config.fleet != nil {
            do {
                let follower = try FleetFollower(manager: manager, diagnostics: diagnostics) { [self] alarm in
                    // Every fleet write stopped here: a person is needed (a fork), or a member must run.
                    let summary =
                        alarm.kind == .forked
                        ? "Lanyard: fleet \(alarm.fleet)'s membership is forked"
                        : "Lanyard: fleet \(alarm.fleet) is ahead of this machine"
                    let message = alarm.error.userFacingDescription
                    diagnostics(message)
                    manager.eventLog.appendError(alarm.error.code, slot: nil, message: message)
                    notify(summary: summary, body: message, urgency: 2)
                }
                follower.start()
                fleet = follower
            } catch {
                diagnostics(
                    "fleet: \(error.userFacingDescription); shared slots are refreshed without the fleet's leader"
                )
            }
        }
        defer { fleet?.stop() }
        // Auto-switching also wakes on the event log (a `usage_limit_reached` another process saw).
        var events: FolderWatch?
        if options.autoSwitch {
            try SecureFiles.ensureDirectory(manager.paths.stateDirectory)
            events = FolderWatch(directory: manager.paths.stateDirectory)
        }
        defer { events?.close() }
        try start()
        while true {
            switch try nextStep() {
            case .checkUsage(let reported, let nextCheckIn):
                _ = checkUsage(reported: reported)
                if let nextCheckIn { nextUsageCheck = manager.clock.now() + nextCheckIn }
            case .refresh(let due):
                _ = refresh(due)
                if stopRequested() { return }
            case .sleep(let seconds):
                let timeout = Int32(max(1, (seconds * 1000).rounded(.up) + 1))
                var fds = [
                    pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0),
                    pollfd(fd: watch.fd, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: events?.fd ?? -1, events: Int16(POLLIN), revents: 0),
                ]
                let n = poll(&fds, watch.fd >= 0 ? 3 : 1, timeout)
                if n < 0 && errno != EINTR { throw StoreError.io(path: "poll", detail: SystemCallError("poll").reason) }
                if fds[0].revents != 0 { return }
                if fds[1].revents != 0 { watch.drain() }
                if fds[2].revents != 0 { events?.drain() }
                if stopRequested() { return }
            }
        }
    }

    /// What the agent does next.
    package enum Step {
        /// Check the active slot's usage (`reported`: a limit another process saw), and schedule
        /// the next check `nextCheckIn` seconds after it (nil: keep the schedule).
        case checkUsage(reported: (slot: Slot, limit: UsageLimit)?, nextCheckIn: TimeInterval?)
        /// Refresh these slots, which are due.
        case refresh([Slot])
        /// Nothing to do for this long (unless the registry or the event log changes first).
        case sleep(TimeInterval)
    }

    /// Prepares a ``run()`` (or a program driving the agent through ``nextStep()``): notes every
    /// slot's state, and with auto-switching reads the event log from its end and checks usage
    /// at once.
    package func start() throws {
        for (slot, record) in try manager.registry.load().slots { known[slot] = record.state.name }
        if options.autoSwitch {
            eventsRead = EventLogCursor(log)
            nextUsageCheck = manager.clock.now()
        }
    }

    /// Decides the next step from the registry and the manager's clock (and notes transitions).
    /// ``run()`` takes the steps in turn; async code and tests drive the schedule themselves
    /// with ``perform(_:)`` and, for a sleep, by advancing their clock.
    package func nextStep() throws -> Step {
        let document = try manager.registry.load()
        let now = manager.clock.now()
        if options.autoSwitch {
            if let limit = newUsageLimit(active: document.active) {
                return .checkUsage(reported: limit, nextCheckIn: nil)
            }
            if let next = nextUsageCheck, next <= now {
                return .checkUsage(reported: nil, nextCheckIn: usageCheckInterval(document))
            }
        }
        let plan = plan(document, now: now, ignoreJitter: false)
        if !plan.due.isEmpty { return .refresh(plan.due) }
        let wake = [plan.nextWake, nextUsageCheck].compactMap { $0 }.min()
        return .sleep(max(0, min(options.maximumSleep, wake.map { $0.timeIntervalSince(now) } ?? options.maximumSleep)))
    }

    /// Takes a step that has work (a sleep is the caller's), for async callers.
    package func perform(_ step: Step) async {
        switch step {
        case .checkUsage(let reported, let nextCheckIn):
            _ = await checkUsage(reported: reported)
            if let nextCheckIn { nextUsageCheck = manager.clock.now() + nextCheckIn }
        case .refresh(let due):
            _ = await refresh(due)
        case .sleep:
            break
        }
    }

    // MARK: - Auto-switching

    /// The seconds between usage checks of the active slot: `[switch] poll` (at least 60 s
    /// unless the provider's usage endpoint is on this machine).
    func usageCheckInterval(_ document: RegistryDocument) -> TimeInterval {
        let provider = document.active.flatMap { document.slots[$0]?.provider }
        return manager.config.autoSwitch.pollInterval(
            usageBaseURL: provider.flatMap { manager.config.providers[$0]?.usageBaseURL }
        )
    }

    /// Checks the active slot's usage (or takes `reported` as its limit) and switches away when
    /// it ran out; notifies, runs the hook and reports what happened. For the agent's own thread.
    @discardableResult
    package func checkUsage(reported: (slot: Slot, limit: UsageLimit)? = nil) -> AutoSwitchOutcome? {
        let manager = self.manager
        let environment = options.environment
        return handle(
            SyncBridge.value { () -> Result<AutoSwitchOutcome, any Error> in
                do {
                    return .success(
                        try await manager.autoSwitchIfNeeded(reportedLimit: reported, environment: environment)
                    )
                } catch {
                    return .failure(error)
                }
            }
        )
    }

    /// ``checkUsage(reported:)`` for async callers.
    @discardableResult
    package func checkUsage(reported: (slot: Slot, limit: UsageLimit)? = nil) async -> AutoSwitchOutcome? {
        let outcome: Result<AutoSwitchOutcome, any Error>
        do {
            outcome = .success(
                try await manager.autoSwitchIfNeeded(reportedLimit: reported, environment: options.environment)
            )
        } catch {
            outcome = .failure(error)
        }
        return handle(outcome)
    }

    private func handle(_ outcome: Result<AutoSwitchOutcome, any Error>) -> AutoSwitchOutcome? {
        switch outcome {
        case .failure(let error):
            diagnostics("auto-switch: \(error.userFacingDescription)")
            return nil
        case .success(let outcome):
            report(outcome)
            return outcome
        }
    }

    private func report(_ outcome: AutoSwitchOutcome) {
        let document = try? manager.registry.load()
        func provider(_ slot: Slot) -> String { document?.slots[slot]?.provider ?? "openai" }
        func percent(_ value: Double) -> String { "\(value.rounded().saturatingInt) %" }
        func window(_ reason: UsageShortfall) -> String {
            reason.window?.length.map { " of its \($0.name) window" } ?? ""
        }
        switch outcome {
        case .switched(let done):
            let until = done.reason.resetsAt.map { " until \(options.clockTime($0))" } ?? ""
            // Codex is named only when it followed (`[integrations] codex = true`): otherwise
            // only Lanyard's active slot changed, and a running Codex keeps its account.
            let what = done.outcome.codex != nil ? "Codex" : "the active account"
            let summary = "Switched \(what) from \(done.from.name) to \(done.to.name)"
            let body = "\(done.from.name) is at \(percent(done.reason.usedPercent))\(window(done.reason))\(until)"
            diagnostics("\(summary): \(body)")
            notify(summary: summary, body: body, urgency: 1)
            hook?.run(done.event)
        case .allAtLimit(let slot, let reason, let earliest, let first, let event):
            guard first else { return }
            let summary = "Every \(provider(slot)) slot is at its usage limit"
            let body =
                "\(slot.name) is at \(percent(reason.usedPercent))\(window(reason)) and no other slot has headroom"
                + (earliest.map { "; the first resets at \(options.clockTime($0))" } ?? "")
            diagnostics("\(summary): \(body)")
            notify(summary: summary, body: body, urgency: 2)
            if let event { hook?.run(event) }
        case .usageUnavailable(let slot, let code):
            diagnostics("auto-switch: the usage of \(slot.name) could not be read (\(code))")
        case .underThreshold, .noActiveSlot, .noUsageEndpoint, .notActive:
            break
        }
    }

    private func notify(summary: String, body: String, urgency: UInt8) {
        guard options.notify else { return }
        if let problem = notifier.notify(summary: summary, body: body, urgency: urgency),
            let line = notificationProblems.line(for: problem)
        {
            diagnostics(line)
        }
    }

    /// The newest `usage_limit_reached` another process logged for the active slot since the
    /// last look, read from where the last look ended (following a rotation).
    func newUsageLimit(active: Slot?) -> (slot: Slot, limit: UsageLimit)? {
        guard let lines = eventsRead?.newEvents() else { return nil }
        guard let active else { return nil }
        let me = Double(getpid())
        for event in lines.reversed()
        where event["event"]?.string == "error" && event["code"]?.string == ErrorCode.usageLimitReached.rawValue
            && event["slot"]?.string == active.name && event["pid"]?.number != me
        {
            return (
                active,
                UsageLimit(
                    message: event["message"]?.string,
                    resetsAt: event["resets_at"]?.string.flatMap(RFC3339.date(from:))
                )
            )
        }
        return nil
    }

    private func stopRequested() -> Bool {
        var fds = [pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0)]
        return poll(&fds, 1, 0) > 0
    }
}
