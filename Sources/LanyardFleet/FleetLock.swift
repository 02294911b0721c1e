import Dispatch
import FoundationEssentials
import LanyardCore
import LanyardSupport

/// A slot's refresh mutex across machines, the way etcd's own `concurrency.Mutex` does it: a key
/// `locks/SLOT/LEASE` put with a lease this process keeps alive; the key with the lowest create
/// revision owns the lock, and each waiter watches the key created just before its own until it
/// is gone. A process that dies stops keeping the lease alive and its key vanishes after the TTL;
/// `release()` deletes it at once.
package final class FleetLock: @unchecked Sendable {
    package let key: String
    package let lease: Int64
    /// The create revision of our key: every write under the lock compares it (a fence).
    package let createRevision: Int64
    private let kv: any EtcdKV
    private let keeper: LeaseKeeper

    private init(key: String, lease: Int64, createRevision: Int64, kv: any EtcdKV, keeper: LeaseKeeper) {
        self.key = key
        self.lease = lease
        self.createRevision = createRevision
        self.kv = kv
        self.keeper = keeper
    }

    /// Whether the lease was still alive at its last keep-alive and has at least `margin`
    /// seconds left by that answer.
    package func held(margin: TimeInterval = 0) -> Bool { keeper.alive(margin: margin) }

    /// The comparison that fences a write: our lock key still exists with our create revision.
    package var fence: EtcdCompare { .createRevision(key, equals: createRevision) }

    /// Takes the lock under `folder` (ending in `/`), waiting at most `timeout` seconds.
    package static func acquire(_ kv: any EtcdKV, folder: String, ttl: Int64, timeout: TimeInterval) throws -> FleetLock
    {
        let lease = try kv.grantLease(ttl: ttl)
        let keeper = LeaseKeeper(kv: kv, lease: lease)
        let key = folder + String(UInt64(bitPattern: lease.id), radix: 16)
        do {
            let made = try kv.transaction(
                compare: [.createRevision(key, equals: 0)],
                success: [.put(key, value: [], lease: lease.id), .range(key)],
                failure: [.range(key)]
            )
            guard let mine = made.ranges.last??.kvs.first else {
                throw EtcdError.malformed(endpoint: "", detail: "the lock key vanished right after it was put")
            }
            let deadline = ContinuousClock.now + .seconds(timeout)
            while true {
                // The key created just before ours: we own the lock when there is none.
                let before = try kv.range(
                    folder,
                    EtcdRangeOptions(
                        prefix: true,
                        limit: 1,
                        sortByCreateRevision: true,
                        descending: true,
                        maxCreateRevision: mine.createRevision - 1,
                        keysOnly: true
                    )
                )
                guard let previous = before.kvs.first else {
                    return FleetLock(
                        key: key,
                        lease: lease.id,
                        createRevision: mine.createRevision,
                        kv: kv,
                        keeper: keeper
                    )
                }
                let remaining = deadline - .now
                let left = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18
                if left <= 0 { throw FleetLockTimeout(seconds: timeout) }
                // Wait for it to go (released, or its lease expired), at most until the deadline.
                let handle = kv.makeWatchHandle()
                let timer = DispatchWorkItem { handle.cancel() }
                DispatchQueue.global().asyncAfter(deadline: .now() + left, execute: timer)
                defer { timer.cancel() }
                do {
                    try kv.watch(prefix: previous.key, startRevision: before.revision + 1, handle: handle) {
                        events,
                        _ in
                        !events.contains { $0.kind == .delete && $0.kv.key == previous.key }
                    }
                } catch EtcdError.cancelled {
                    throw FleetLockTimeout(seconds: timeout)
                }
            }
        } catch {
            keeper.stop()
            try? kv.revoke(lease.id)
            throw error
        }
    }

    /// Deletes the lock key and revokes the lease (best effort: a lease not revoked expires).
    package func release() {
        keeper.stop()
        _ = try? kv.delete(key, prefix: false)
        try? kv.revoke(lease)
    }

    deinit { keeper.stop() }
}

/// The lock was not free within the time allowed.
package struct FleetLockTimeout: Error {
    package let seconds: TimeInterval
}

/// Keeps a lease alive from a background thread, every third of its TTL, and remembers until
/// when the last answer said it lives, on the monotonic clock (a wall clock stepped by NTP or by
/// hand must not stretch or shorten a lease).
final class LeaseKeeper: @unchecked Sendable {
    private let kv: any EtcdKV
    private let lease: EtcdLease
    private let state: Locked<State>
    private let wake = DispatchSemaphore(value: 0)

    struct State {
        var aliveUntil: ContinuousClock.Instant
        var stopped = false
        var lost = false
    }

    init(kv: any EtcdKV, lease: EtcdLease) {
        self.kv = kv
        self.lease = lease
        state = Locked(State(aliveUntil: .now + .seconds(lease.ttl)))
        // Blocking (etcd calls, its waits): a thread of the blocking executor until the lock ends.
        BlockingExecutor.shared.submit { [self] in run() }
    }

    private func run() {
        let interval = max(0.5, Double(lease.ttl) / 3)
        while true {
            if wake.wait(timeout: .now() + interval) == .success { return }
            if state.withLock({ $0.stopped }) { return }
            let sent = ContinuousClock.now
            do {
                let ttl = try kv.keepAlive(lease.id)
                state.withLock {
                    if ttl <= 0 { $0.lost = true } else { $0.aliveUntil = sent + .seconds(ttl) }
                }
                if ttl <= 0 { return }
            } catch {
                // Keep trying: the lease lives on in etcd until its TTL runs out.
                if state.withLock({ $0.aliveUntil <= .now }) {
                    state.withLock { $0.lost = true }
                    return
                }
            }
        }
    }

    func alive(margin: TimeInterval) -> Bool {
        state.withLock { !$0.lost && $0.aliveUntil - .now > .seconds(margin) }
    }

    func stop() {
        let first = state.withLock { s -> Bool in
            defer { s.stopped = true }
            return !s.stopped
        }
        if first { wake.signal() }
    }
}
