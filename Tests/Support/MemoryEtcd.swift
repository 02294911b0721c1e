import Foundation
import LanyardFleet
import LanyardSupport

/// etcd's key-value semantics in memory (revisions, create/mod revisions, leases, transactions,
/// watches) for fast tests of the fleet's logic and of the paths that run it (refresh, sync, the
/// agent's follower). Leases never expire by time (revoke them). The fleet's real tests run
/// against a real etcd cluster as well.
///
/// A watch behaves as ``EtcdGatewayClient``'s does: it delivers every change under its prefix
/// from its start revision on (the history is kept, so an older start revision replays what
/// followed it), in revision order, on the calling thread, which waits on a condition between
/// batches; it returns when `onEvents` says so or its handle is cancelled, and throws
/// ``EtcdError/compacted(revision:)`` for a start revision older than ``compact(revision:)``'s.
///
/// Faults: ``failTransactions(_:answerLost:)`` makes the next transactions fail as a cluster
/// without quorum does, or apply and then lose their answer (the client cannot tell the two apart);
/// ``failWatches()`` breaks every watch stream until ``clearFaults()``.
package final class MemoryEtcd: EtcdKV, @unchecked Sendable {
    /// Guards everything below; running watches wait on it for a change, a cancellation or a fault.
    private let lock = NSCondition()
    private var transactionFaults: [(answerLost: Bool, remaining: Int)] = []
    /// Every change, in revision order, from the compaction point on: what watches deliver.
    private var history: [(revision: Int64, event: EtcdWatchEvent)] = []
    private var compacted: Int64 = 0
    private var watchesFail = false
    private var watching = 0

    /// The next `count` transactions throw ``EtcdError/unavailable``; with `answerLost` they are
    /// applied first.
    package func failTransactions(_ count: Int = 1, answerLost: Bool = false) {
        lock.withLock { transactionFaults.append((answerLost, count)) }
    }

    /// Every watch stream breaks, from now until ``clearFaults()``: each running watch throws
    /// ``EtcdError/unavailable``, and so does each new one (the members a watcher can reach went
    /// away). Reads and writes go on.
    package func failWatches() {
        lock.withLock {
            watchesFail = true
            lock.broadcast()
        }
    }

    /// Transactions and watches succeed again.
    package func clearFaults() {
        lock.withLock {
            transactionFaults.removeAll()
            watchesFail = false
        }
    }

    /// Forgets the history before `revision`, as etcd's compaction does: a watch from an older
    /// revision throws ``EtcdError/compacted(revision:)``.
    package func compact(revision: Int64) {
        lock.withLock {
            compacted = max(compacted, revision)
            history.removeAll { $0.revision < compacted }
            lock.broadcast()
        }
    }

    /// How many watches are running now.
    package var activeWatches: Int { lock.withLock { watching } }

    /// Waits until exactly `count` watches run, at most `seconds`; false when they did not.
    /// Blocking: a test calls it from a thread of its own (``watching(_:within:)``).
    @available(*, noasync, message: "blocking: use watching(_:within:)")
    package func waitUntilWatching(_ count: Int, seconds: TimeInterval) -> Bool {
        let deadline = Date() + seconds
        return lock.withLock {
            while watching != count {
                if !lock.wait(until: deadline) { return watching == count }
            }
            return true
        }
    }

    /// ``waitUntilWatching(_:seconds:)`` from an async test (the wait holds a thread of its own).
    package func watching(_ count: Int, within seconds: TimeInterval = 90) async -> Bool {
        await BlockingExecutor.shared.run(.ownThread) { self.waitUntilWatching(count, seconds: seconds) }
    }

    private var hooks: [@Sendable ([EtcdOperation]) -> Bool] = []

    /// Runs `hook` before each transaction (outside the lock), with the operations of its success
    /// branch, until it returns true: a test acts there as an adversary with etcd access would
    /// between two steps of the protocol (after the intent is written, before the fenced write).
    package func whenTransaction(_ hook: @escaping @Sendable ([EtcdOperation]) -> Bool) {
        lock.withLock { hooks.append(hook) }
    }

    private func runHooks(_ operations: [EtcdOperation]) {
        let pending = lock.withLock { hooks }
        var done: [Int] = []
        for (i, hook) in pending.enumerated() where hook(operations) { done.append(i) }
        guard !done.isEmpty else { return }
        lock.withLock { for i in done.reversed() where i < hooks.count { hooks.remove(at: i) } }
    }

    private func takeFault() -> Bool? {
        lock.withLock {
            guard !transactionFaults.isEmpty else { return nil }
            transactionFaults[0].remaining -= 1
            let lost = transactionFaults[0].answerLost
            if transactionFaults[0].remaining <= 0 { transactionFaults.removeFirst() }
            return lost
        }
    }
    private var kvs: [String: EtcdKeyValue] = [:]
    private var revision: Int64 = 1
    private var leases: [Int64: Int64] = [:]
    private var nextLease: Int64 = 0x1000

    package init() {}

    private func select(_ key: String, _ options: EtcdRangeOptions) -> [EtcdKeyValue] {
        var found = kvs.values.filter { options.prefix ? $0.key.hasPrefix(key) : $0.key == key }
        if options.maxCreateRevision > 0 { found = found.filter { $0.createRevision <= options.maxCreateRevision } }
        found.sort { options.sortByCreateRevision ? $0.createRevision < $1.createRevision : $0.key < $1.key }
        if options.descending { found.reverse() }
        if options.limit > 0 { found = Array(found.prefix(Int(options.limit))) }
        if options.keysOnly {
            found = found.map {
                var k = $0
                k.value = []
                return k
            }
        }
        return found
    }

    package func range(_ key: String, _ options: EtcdRangeOptions) throws -> EtcdRange {
        lock.withLock {
            EtcdRange(kvs: select(key, options), revision: revision, count: Int64(select(key, options).count))
        }
    }

    /// A put at the current revision (the caller has moved it on: every write of one transaction
    /// shares its revision, as in etcd).
    private func putLocked(_ key: String, _ value: [UInt8], _ lease: Int64) {
        let old = kvs[key]
        let new = EtcdKeyValue(
            key: key,
            value: value,
            createRevision: old?.createRevision ?? revision,
            modRevision: revision,
            version: (old?.version ?? 0) + 1,
            lease: lease
        )
        kvs[key] = new
        record(EtcdWatchEvent(kind: .put, kv: new, previous: old))
    }

    private func matching(_ key: String, _ prefix: Bool) -> [String] {
        kvs.keys.filter { prefix ? $0.hasPrefix(key) : $0 == key }.sorted()
    }

    /// Deletes at the current revision (the caller has moved it on when anything matches).
    private func deleteLocked(_ key: String, _ prefix: Bool) -> Int64 {
        let keys = matching(key, prefix)
        for k in keys {
            // etcd's delete event carries the key and the revision of the delete, no value.
            let gone = EtcdKeyValue(key: k, value: [], modRevision: revision)
            record(EtcdWatchEvent(kind: .delete, kv: gone, previous: kvs[k]))
            kvs[k] = nil
        }
        return Int64(keys.count)
    }

    private func record(_ event: EtcdWatchEvent) {
        history.append((revision, event))
        lock.broadcast()
    }

    package func put(_ key: String, value: [UInt8], lease: Int64) throws -> Int64 {
        lock.withLock {
            revision += 1
            putLocked(key, value, lease)
            return revision
        }
    }

    package func delete(_ key: String, prefix: Bool) throws -> Int64 {
        lock.withLock {
            guard !matching(key, prefix).isEmpty else { return 0 }
            revision += 1
            return deleteLocked(key, prefix)
        }
    }

    package func transaction(
        compare: [EtcdCompare],
        success: [EtcdOperation],
        failure: [EtcdOperation]
    ) throws -> EtcdTransactionResult {
        runHooks(success)
        let fault = takeFault()
        if fault == false { throw EtcdError.unavailable(endpoint: "memory", detail: "injected: no quorum") }
        let result = applyTransaction(compare: compare, success: success, failure: failure)
        if fault == true { throw EtcdError.unavailable(endpoint: "memory", detail: "injected: the answer was lost") }
        return result
    }

    private func applyTransaction(
        compare: [EtcdCompare],
        success: [EtcdOperation],
        failure: [EtcdOperation]
    ) -> EtcdTransactionResult {
        lock.withLock {
            let holds = compare.allSatisfy { c in
                switch c {
                case .modRevision(let k, let r): return (kvs[k]?.modRevision ?? 0) == r
                case .createRevision(let k, let r): return (kvs[k]?.createRevision ?? 0) == r
                case .value(let k, let v): return kvs[k]?.value == v
                }
            }
            var ranges: [EtcdRange?] = []
            let ops = holds ? success : failure
            if ops.contains(where: { if case .range = $0 { return false } else { return true } }) { revision += 1 }
            for op in ops {
                switch op {
                case .put(let k, let v, let lease):
                    putLocked(k, v, lease)
                    ranges.append(nil)
                case .delete(let k, let prefix):
                    _ = deleteLocked(k, prefix)
                    ranges.append(nil)
                case .range(let k, let o):
                    ranges.append(EtcdRange(kvs: select(k, o), revision: revision, count: Int64(select(k, o).count)))
                }
            }
            return EtcdTransactionResult(succeeded: holds, revision: revision, ranges: ranges)
        }
    }

    package func grantLease(ttl: Int64) throws -> EtcdLease {
        lock.withLock {
            nextLease += 1
            leases[nextLease] = ttl
            return EtcdLease(id: nextLease, ttl: ttl)
        }
    }

    package func keepAlive(_ lease: Int64) throws -> Int64 { lock.withLock { leases[lease] ?? 0 } }

    package func revoke(_ lease: Int64) throws {
        lock.withLock {
            leases[lease] = nil
            let owned = kvs.filter { $0.value.lease == lease }.map(\.key)
            if !owned.isEmpty { revision += 1 }
            for k in owned { _ = deleteLocked(k, false) }
        }
    }

    package func watch(
        prefix: String,
        startRevision: Int64,
        handle: (any EtcdWatchHandle)?,
        onEvents: ([EtcdWatchEvent], Int64) -> Bool
    ) throws {
        // A handle another client made cannot cancel this watch (as with the gateway client).
        let handle = handle as? MemoryWatchHandle
        lock.lock()
        defer {
            watching -= 1
            lock.broadcast()
            lock.unlock()
        }
        watching += 1
        lock.broadcast()
        var next = startRevision > 0 ? startRevision : revision + 1
        while true {
            // Held here: wait for a change at or after `next` under the prefix.
            var batch: [EtcdWatchEvent] = []
            var last = next
            while true {
                if handle?.fired == true { return }
                if watchesFail {
                    throw EtcdError.unavailable(endpoint: "memory", detail: "injected: the watch stream broke")
                }
                if next < compacted { throw EtcdError.compacted(revision: compacted) }
                for (at, event) in history where at >= next && event.kv.key.hasPrefix(prefix) {
                    batch.append(event)
                    last = at
                }
                if !batch.isEmpty { break }
                next = max(next, revision + 1)
                lock.wait()
            }
            next = last + 1
            let seenAt = revision
            // Unlocked: `onEvents` may call this etcd.
            lock.unlock()
            let goOn = onEvents(batch, seenAt)
            lock.lock()
            if !goOn { return }
        }
    }

    package func makeWatchHandle() -> any EtcdWatchHandle { MemoryWatchHandle(lock) }

    /// The first change under `prefix` after `revision` that `matches`, waited for on a thread of
    /// its own through a watch, at most `seconds` (nil: none came): how a test waits for what the
    /// code under test writes.
    package func change(
        under prefix: String,
        after revision: Int64,
        within seconds: TimeInterval = 90,
        where matches: @escaping @Sendable (EtcdWatchEvent) -> Bool
    ) async throws -> EtcdWatchEvent? {
        try await BlockingExecutor.shared.run(.ownThread) {
            let handle = self.makeWatchHandle()
            let timer = DispatchWorkItem { handle.cancel() }
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: timer)
            defer { timer.cancel() }
            var found: EtcdWatchEvent?
            try self.watch(prefix: prefix, startRevision: revision + 1, handle: handle) { events, _ in
                found = events.first(where: matches)
                return found == nil
            }
            return found
        }
    }

    package func endpointStatus() -> [EtcdEndpointStatus] { [EtcdEndpointStatus(endpoint: "memory")] }

    /// Cancelling wakes the watch at once; `fired` is read and written under the etcd's lock.
    final class MemoryWatchHandle: EtcdWatchHandle, @unchecked Sendable {
        private let lock: NSCondition
        var fired = false

        init(_ lock: NSCondition) { self.lock = lock }

        func cancel() {
            lock.withLock {
                fired = true
                lock.broadcast()
            }
        }
    }
}
