import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

// Usage-aware switching of the active slot (`[switch] auto = usage`): the agent calls
// ``AccountManager/autoSwitchIfNeeded(reportedLimit:)`` every `[switch] poll` seconds and when a
// `usage_limit_reached` for the active slot reaches the event log; programs call it through
// `Accounts.autoSwitchIfNeeded()`.

/// Why the active slot counts as run out. Windows are weighed by their use, whatever their length:
/// the busiest one decides (a weekly-only account's weekly window, a monthly one's month).
public struct UsageShortfall: Sendable, Equatable {
    /// What found it.
    public enum Trigger: String, Sendable, Equatable {
        /// The usage endpoint: the busiest window at or over the threshold, or at its limit.
        case poll
        /// A request was refused with `usage_limit_reached`.
        case usageLimitReached = "usage_limit_reached"
    }

    public let trigger: Trigger
    /// The busiest window (of any length: 5 h, weekly, monthly…), when the server gave one.
    public let window: UsageWindow?
    /// That window's used percentage (100 at a usage limit the server gave no numbers for).
    public let usedPercent: Double
    /// When the slot can be used again, when the server said.
    public let resetsAt: Date?

    public init(trigger: Trigger, window: UsageWindow?, usedPercent: Double, resetsAt: Date?) {
        self.trigger = trigger
        self.window = window
        self.usedPercent = usedPercent
        self.resetsAt = resetsAt
    }

    /// A usage report found at or over the threshold, or at its limit: its busiest window, and
    /// with a limit the time the account is usable again.
    static func poll(_ report: UsageReport) -> UsageShortfall {
        let busiest = report.busiest
        let used = busiest?.usedPercent ?? 0
        return UsageShortfall(
            trigger: .poll,
            window: busiest,
            usedPercent: report.isAtLimit ? max(used, 100) : used,
            resetsAt: report.isAtLimit ? report.limitResetsAt : busiest?.resetsAt
        )
    }

    /// A refused request's limit: the busiest window the rate-limit headers give when it is
    /// full, else 100 % until the reset the body gives.
    static func limit(_ limit: UsageLimit) -> UsageShortfall {
        if let window = UsageWindow.busiest(limit.rateLimit?.windows ?? []), window.isAtLimit {
            return UsageShortfall(
                trigger: .usageLimitReached,
                window: window,
                usedPercent: window.usedPercent,
                resetsAt: window.resetsAt ?? limit.resetsAt
            )
        }
        return UsageShortfall(trigger: .usageLimitReached, window: nil, usedPercent: 100, resetsAt: limit.resetsAt)
    }

    /// The event-log fields that describe it: `window` is the window's class (`5h`, `daily`,
    /// `weekly`, `monthly`, `other`), `window_name` its name for people, `limit_window_seconds`
    /// its length.
    var fields: [String: JSONValue] {
        [
            "reason": .string("usage"), "trigger": .string(trigger.rawValue),
            "window": .optional(window?.length?.className),
            "window_name": .optional(window?.length?.name),
            "limit_window_seconds": window?.windowSeconds.map { .number(Double($0)) } ?? .null,
            "used_percent": .number(usedPercent), "resets_at": .date(resetsAt),
        ]
    }
}

/// A switch ``AccountManager/autoSwitchIfNeeded(reportedLimit:)`` made.
public struct AutoSwitchDone: Sendable, Equatable {
    public let from: Slot
    public let to: Slot
    /// Why `from` counted as run out.
    public let reason: UsageShortfall
    /// The busiest window of `to` when it was chosen.
    public let toUsedPercent: Double
    /// The switch itself (Codex's auth.json following it, when configured).
    public let outcome: SwitchOutcome
    /// The `switch` event written to the event log (hooks receive the same object).
    public let event: JSONValue
}

/// What ``AccountManager/autoSwitchIfNeeded(reportedLimit:)`` did, and why.
public enum AutoSwitchOutcome: Sendable, Equatable {
    /// Switched to the slot with the most headroom.
    case switched(AutoSwitchDone)
    /// The active slot's busiest window is under the threshold: nothing to do.
    case underThreshold(slot: Slot, usedPercent: Double)
    /// The active slot ran out and so did every other slot of its provider (or none can be used):
    /// no switch. `earliestReset` is the soonest any of them resets, when the server said;
    /// `firstNotice` is true the first time this is found (an event was written then), false while
    /// it lasts.
    case allAtLimit(slot: Slot, reason: UsageShortfall, earliestReset: Date?, firstNotice: Bool, event: JSONValue?)
    /// No slot is active.
    case noActiveSlot
    /// The reported limit was another slot's than the active one (already switched away from).
    case notActive(reported: Slot, active: Slot)
    /// The active slot's provider has no usage endpoint.
    case noUsageEndpoint(slot: Slot, provider: String)
    /// The active slot's usage could not be read (the error code: network, server, sign-in).
    case usageUnavailable(slot: Slot, code: String)
}

/// What auto-switching remembers between checks (`$XDG_STATE_HOME/lanyard/autoswitch.json`,
/// 0600): the last switch (shown by `status`), and the "all at their limit" notice already given
/// (so it is given once, not every poll). Both are the event-log objects written for them.
package struct AutoSwitchState: Sendable, Equatable {
    package var lastSwitch: JSONValue?
    package var allAtLimit: JSONValue?

    package init(lastSwitch: JSONValue? = nil, allAtLimit: JSONValue? = nil) {
        self.lastSwitch = lastSwitch
        self.allAtLimit = allAtLimit
    }

    package static func path(_ paths: Paths) -> String { paths.stateDirectory + "/autoswitch.json" }

    /// The saved state; empty when there is none or it does not parse (it is only a memory of
    /// notices given: losing it costs at most one repeated notice).
    package static func load(_ paths: Paths) -> AutoSwitchState {
        guard let data = try? SecureFiles.read(path(paths)), let value = try? JSONValue.parse(data) else {
            return AutoSwitchState()
        }
        return AutoSwitchState(
            lastSwitch: value["last_switch"]?.object.map(JSONValue.object),
            allAtLimit: value["all_at_limit"]?.object.map(JSONValue.object)
        )
    }

    /// Auto-switching blocked now: the `switch_blocked` event of the last check that found every
    /// slot of the active slot's provider out (its `earliest_reset` is when the first one resets),
    /// while the slot it was about is still the active one; nil otherwise.
    package static func blocked(paths: Paths, active: Slot?) -> JSONValue? {
        guard let blocked = load(paths).allAtLimit, let active, blocked["slot"]?.string == active.name else {
            return nil
        }
        return blocked
    }

    func save(_ paths: Paths) throws {
        try SecureFiles.ensureDirectory(paths.stateDirectory)
        let value = JSONValue.object(["last_switch": lastSwitch ?? .null, "all_at_limit": allAtLimit ?? .null])
            .droppingNulls
        try SecureFiles.atomicWrite(Data((value.serialized(pretty: true) + "\n").utf8), to: Self.path(paths))
    }
}

extension AccountManager {
    /// Checks the active slot's usage and, when its busiest window is at or over
    /// `[switch] threshold` or it is at its usage limit, switches to the slot of the same provider
    /// with the most headroom, chosen as ``bestSlot()`` chooses but never a slot that is itself at or
    /// over the threshold (nor one that must sign in again), through
    /// ``switchActive(to:environment:)`` (so Codex's auth.json follows when configured). A switch
    /// writes a `switch` event; finding every slot out writes one `switch_blocked` event, not again
    /// until a switch or a check under the threshold. Only the active slot changes: `.lanyard`
    /// pins and `LANYARD_ACCOUNT` keep their slots. `[switch] auto` is the agent's setting; this
    /// checks whenever it is called.
    ///
    /// `reportedLimit`: a `usage_limit_reached` a request of the active slot just got; the slot
    /// counts as run out without asking the usage endpoint. A limit for another slot than the
    /// active one is ignored (the switch it calls for has happened).
    package func autoSwitchIfNeeded(
        reportedLimit: (slot: Slot, limit: UsageLimit)? = nil,
        environment: [String: String]
    ) async throws -> AutoSwitchOutcome {
        // One check at a time across processes: two would both switch, and both give the notice.
        // The lock (flock), the registry and the state file: one hop to the blocking executor.
        let paths = self.paths
        let registry = self.registry
        let (lock, document, loaded) = try await BlockingExecutor.shared.run {
            () throws -> (FileLock, RegistryDocument, AutoSwitchState) in
            try SecureFiles.ensureDirectory(paths.stateDirectory)
            let lock = try FileLock(path: AutoSwitchState.path(paths) + ".lock")
            return (lock, try registry.load(), AutoSwitchState.load(paths))
        }
        defer { withExtendedLifetime(lock) {} }
        let threshold = config.autoSwitch.threshold
        guard let active = document.active, let record = document.slots[active] else { return .noActiveSlot }
        guard config.providers[record.provider]?.usageBaseURL != nil else {
            return .noUsageEndpoint(slot: active, provider: record.provider)
        }
        var state = loaded
        func save(_ state: AutoSwitchState) async throws {
            try await BlockingExecutor.shared.run { try state.save(paths) }
        }
        let shortfall: UsageShortfall
        if let reportedLimit {
            guard reportedLimit.slot == active else { return .notActive(reported: reportedLimit.slot, active: active) }
            shortfall = .limit(reportedLimit.limit)
        } else {
            let weighed = await weigh(active, record)
            if let limit = weighed.limit {
                shortfall = .limit(limit)
            } else if let report = weighed.report {
                let used = report.highestUsedPercent
                if !report.isAtLimit && used < threshold {
                    if state.allAtLimit != nil {
                        state.allAtLimit = nil
                        try await save(state)
                    }
                    return .underThreshold(slot: active, usedPercent: used)
                }
                shortfall = .poll(report)
            } else {
                let code = if case .failed(let code) = weighed.verdict { code.rawValue } else { "not_signed_in" }
                return .usageUnavailable(slot: active, code: code)
            }
        }

        // The other slots of the provider, weighed as `switch --best` weighs them.
        var weighed: [(slot: Slot, verdict: SlotCandidate.Verdict)] = []
        var earliest = shortfall.resetsAt
        for (slot, other) in document.sortedSlots where other.provider == record.provider && slot != active {
            let (verdict, report, _) = await weigh(slot, other)
            weighed.append((slot, verdict))
            var reset: Date?
            switch verdict {
            case .headroom(let used) where used >= threshold: reset = report?.busiest?.resetsAt
            case .atLimit(let resetsAt): reset = resetsAt ?? report?.limitResetsAt
            default: break
            }
            if let reset { earliest = min(earliest ?? reset, reset) }
        }
        let best = Self.autoSwitchTarget(weighed, active: active, threshold: threshold)

        let now = clock.now()
        guard let best else {
            if let given = state.allAtLimit, given["slot"]?.string == active.name {
                return .allAtLimit(
                    slot: active,
                    reason: shortfall,
                    earliestReset: earliest,
                    firstNotice: false,
                    event: nil
                )
            }
            var fields = shortfall.fields
            fields["reason"] = .string("all_at_limit")
            fields["provider"] = .string(record.provider)
            fields["earliest_reset"] = .date(earliest)
            let event = EventLog.record("switch_blocked", slot: active, fields: fields, now: now)
            let log = eventLog
            await BlockingExecutor.shared.run { log.append(event) }
            state.allAtLimit = event
            try await save(state)
            return .allAtLimit(
                slot: active,
                reason: shortfall,
                earliestReset: earliest,
                firstNotice: true,
                event: event
            )
        }

        let outcome = try await switchActive(
            to: best.slot,
            environment: environment,
            reason: .usage(shortfall, toUsedPercent: best.used)
        )
        let event = outcome.event ?? .null
        state.lastSwitch = event
        state.allAtLimit = nil
        try await save(state)
        return .switched(
            AutoSwitchDone(
                from: active,
                to: best.slot,
                reason: shortfall,
                toUsedPercent: best.used,
                outcome: outcome,
                event: event
            )
        )
    }

    /// Where auto-switching goes from `active`, among slots weighed as ``bestSlot()`` weighs them:
    /// the least used (the first listed on a tie) of those with headroom under `threshold`; never
    /// `active`, a slot that must sign in again, or one at its limit. `lanyard usage --all` marks it.
    package static func autoSwitchTarget(
        _ weighed: [(slot: Slot, verdict: SlotCandidate.Verdict)],
        active: Slot?,
        threshold: Double
    ) -> (slot: Slot, used: Double)? {
        var best: (slot: Slot, used: Double)?
        for (slot, verdict) in weighed where slot != active {
            if case .headroom(let used) = verdict, used < threshold, best.map({ used < $0.used }) ?? true {
                best = (slot, used)
            }
        }
        return best
    }

    /// One slot weighed by its usage: the verdict ``bestSlot()`` gives it, with the usage report
    /// or the usage limit behind it.
    func weigh(
        _ slot: Slot,
        _ record: SlotRecord
    ) async -> (verdict: SlotCandidate.Verdict, report: UsageReport?, limit: UsageLimit?) {
        guard case .signedIn = record.state else { return (.notSignedIn(record.state), nil, nil) }
        do {
            let report = try await usage(slot: slot)
            // A window at 100 % is a limit whatever the server's `limit_reached` says: the
            // account is refused until that window resets.
            return (
                report.isAtLimit
                    ? .atLimit(resetsAt: report.limitResetsAt) : .headroom(usedPercent: report.highestUsedPercent),
                report, nil
            )
        } catch ClientError.usageLimitReached(let limit) {
            return (.atLimit(resetsAt: limit.resetsAt), nil, limit)
        } catch let error as any LanyardError {
            return (.failed(code: error.code), nil, nil)
        } catch {
            return (.failed(code: .error), nil, nil)
        }
    }

    /// The last switch auto-switching made (its `switch` event), if any.
    package func lastAutoSwitch() -> JSONValue? { AutoSwitchState.load(paths).lastSwitch }
}
