import Foundation
import LanyardFleet

/// etcd's key-value semantics in memory (revisions, create/mod revisions, leases, transactions)
/// for unit tests of the fleet's pure logic. Leases never expire by time (revoke them); a watch
/// returns at once with nothing. The fleet's real tests run against a real etcd cluster.
///
/// Faults: ``failTransactions(_:answerLost:)`` makes the next transactions fail as a cluster
/// without quorum does, or apply and then lose their answer (the client cannot tell the two apart).
package final class MemoryEtcd: EtcdKV, @unchecked Sendable {
    private let lock = NSLock()
    private var transactionFaults: [(answerLost: Bool, remaining: Int)] = []

    /// The next `count` transactions throw ``EtcdError/unavailable``; with `answerLost` they are
    /// applied first.
    package func failTransactions(_ count: Int = 1, answerLost: Bool = false) {
        lock.withLock { transactionFaults.append((answerLost, count)) }
    }

    /// Transactions succeed again.
    package func clearFaults() { lock.withLock { transactionFaults.removeAll() } }

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
        kvs[key] = EtcdKeyValue(
            key: key,
            value: value,
            createRevision: old?.createRevision ?? revision,
            modRevision: revision,
            version: (old?.version ?? 0) + 1,
            lease: lease
        )
    }

    private func deleteLocked(_ key: String, _ prefix: Bool) -> Int64 {
        let keys = kvs.keys.filter { prefix ? $0.hasPrefix(key) : $0 == key }
        for k in keys { kvs[k] = nil }
        return Int64(keys.count)
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
            let n = deleteLocked(key, prefix)
            if n > 0 { revision += 1 }
            return n
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
    ) throws {}

    package func makeWatchHandle() -> any EtcdWatchHandle { NoWatch() }

    package func endpointStatus() -> [EtcdEndpointStatus] { [EtcdEndpointStatus(endpoint: "memory")] }

    struct NoWatch: EtcdWatchHandle { func cancel() {} }
}
