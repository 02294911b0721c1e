import Dispatch
import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport

/// The agent's part in a fleet: it watches the fleet's shared slots and brings this machine's
/// copies up to date within moments of a refresh anywhere, and it stands for leader so that one
/// agent refreshes shared slots ahead of expiry (the others leave them to it).
final class FleetFollower: @unchecked Sendable {
    private let manager: AccountManager
    private let fleet: Fleet
    private let campaign: FleetCampaign
    private let diagnostics: (String) -> Void
    /// Called once each time an alarm is newly raised here (writes stopped: behind or forked).
    private let onAlarm: (FleetAlarm) -> Void
    private let lastAlarm = Locked<FleetAlarm?>(nil)
    private let handle = Locked<(any EtcdWatchHandle)?>(nil)
    private let stopped = Locked(false)
    private let done = DispatchSemaphore(value: 0)
    private let wake = DispatchSemaphore(value: 0)
    private let recoveryDone = DispatchSemaphore(value: 0)
    private let recoveryWake = DispatchSemaphore(value: 0)

    /// How often the agent looks for tokens a killed refresh left in a recovery file: they replaced
    /// the fleet's, and until they are written there another machine may spend the token they
    /// replaced (a dead refresh's lock holds the others off only until its lease runs out).
    static let recoveryCheckInterval: TimeInterval = 5

    init(
        manager: AccountManager,
        diagnostics: @escaping (String) -> Void,
        onAlarm: @escaping (FleetAlarm) -> Void = { _ in }
    ) throws {
        self.manager = manager
        fleet = try manager.openFleet()
        campaign = FleetCampaign(kv: fleet.kv, keys: fleet.keys, machine: fleet.machine)
        self.diagnostics = diagnostics
        self.onAlarm = onAlarm
    }

    /// Whether this agent should refresh shared slots ahead of expiry.
    func leads() -> Bool { campaign.leads() }

    /// Starts following: the watch and the recovery check each run on a thread of their own
    /// until ``stop()``. They block for as long as etcd and the clock decide (the watch stream,
    /// their waits) and wait for fleet syncs, so on pooled threads they would hold the pool's
    /// threads and could wait for work queued behind themselves.
    func start() {
        BlockingExecutor.shared.submitOnOwnThread { [self] in
            follow()
            done.signal()
        }
        BlockingExecutor.shared.submitOnOwnThread { [self] in
            settleRecoveryFiles()
            recoveryDone.signal()
        }
    }

    func stop() {
        stopped.withLock { $0 = true }
        handle.withLock { $0 }?.cancel()
        wake.signal()
        recoveryWake.signal()
        campaign.resign()
        _ = done.wait(timeout: .now() + 5)
        _ = recoveryDone.wait(timeout: .now() + 5)
    }

    /// Syncs each shared slot whose refreshed tokens wait in a recovery file (fleet sync puts them
    /// in place and writes them to the fleet), or that the fleet has yet to take (a refresh or a
    /// sign-in made while it was unreachable), so they reach it even when no command runs here.
    private func settleRecoveryFiles() {
        while !stopped.withLock({ $0 }) {
            if recoveryWake.wait(timeout: .now() + Self.recoveryCheckInterval) == .success { return }
            let states = SharedSlotState.all(paths: manager.paths)
            guard !states.isEmpty else { continue }
            let shared = states.map(\.0)
            // Also those whose last refresh or sign-in the fleet did not take (upload pending).
            let waiting = Set(RecoveryFiles.pending(paths: manager.paths, slots: shared)).intersection(shared)
                .union(states.filter(\.1.uploadPending).map(\.0))
            for slot in waiting.sorted(by: { $0.name < $1.name }) {
                if stopped.withLock({ $0 }) { return }
                sync(slot)
            }
        }
    }

    private func follow() {
        var failures = 0
        while !stopped.withLock({ $0 }) {
            do {
                // Catch up first, then watch from the revision that read saw.
                let start = try fleet.kv.range(fleet.keys.slots, EtcdRangeOptions(prefix: true, keysOnly: true))
                    .revision
                sync(nil)
                let watch = fleet.kv.makeWatchHandle()
                handle.withLock { $0 = watch }
                if stopped.withLock({ $0 }) { return }
                failures = 0
                // The slots and the membership log: a log entry deleted, put back or forked is seen
                // (and restored, or raised as an alarm) as soon as it happens, not at the next refresh.
                try fleet.kv.watch(prefix: fleet.keys.prefix, startRevision: start + 1, handle: watch) { events, _ in
                    if events.contains(where: { $0.kv.key.hasPrefix(self.fleet.keys.log) }) {
                        self.sync(nil)
                    } else {
                        for slot in Set(
                            events.compactMap({ self.fleet.keys.name(of: $0.kv.key, in: self.fleet.keys.slots) })
                                .compactMap({ try? Slot($0) })
                        ) {
                            self.sync(slot)
                        }
                    }
                    return !self.stopped.withLock { $0 }
                }
            } catch EtcdError.cancelled {
                return
            } catch {
                failures += 1
                diagnostics("fleet \(fleet.name): \(error.userFacingDescription); watching again in a moment")
                // Back off (up to 10 s) while etcd is away; stop() ends the wait.
                _ = wake.wait(timeout: .now() + min(10, 0.5 * Double(failures)))
            }
        }
    }

    /// Brings `slot` (nil: every shared slot) up to date from the fleet; on the follower's own
    /// threads, which may block, so through the sync's blocking core (no hop, no task).
    private func sync(_ slot: Slot?) {
        let text: String
        do {
            let outcomes = try manager.fleetSyncBlocking(only: slot)
            text = outcomes.filter { $0.1 != .current }.map { "\($0.0.name): \($0.1.rawValue)" }.joined(
                separator: ", "
            )
        } catch {
            text = "sync failed: \(error.userFacingDescription)"
        }
        if !text.isEmpty { diagnostics("fleet \(fleet.name): \(text)") }
        let alarm = fleet.alarm()
        let isNew = lastAlarm.withLock { last in
            defer { last = alarm }
            return alarm != nil && alarm != last
        }
        if let alarm, isNew { onAlarm(alarm) }
    }
}
