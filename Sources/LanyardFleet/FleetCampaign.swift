import LanyardSupport

/// One agent's candidacy for leading the fleet's refreshes, the way etcd's own election does it:
/// a key `leader/LEASE` (value: the machine's name) put with a lease kept alive; the oldest key
/// leads. An agent that dies stops keeping its lease, and the next oldest leads after the TTL.
package final class FleetCampaign: @unchecked Sendable {
    private let kv: any EtcdKV
    private let keys: FleetKeys
    private let machine: String
    private let ttl: Int64
    private let state = Locked<(key: String?, keeper: LeaseKeeper?, lease: Int64)>((nil, nil, 0))

    package init(kv: any EtcdKV, keys: FleetKeys, machine: String, ttl: Int64 = 10) {
        self.kv = kv
        self.keys = keys
        self.machine = machine
        self.ttl = ttl
    }

    /// Whether this agent leads now. Stands (again) when it has no live key: after etcd was
    /// unreachable, or its lease ran out while the machine slept.
    package func leads() -> Bool {
        do {
            let (key, keeper) = state.withLock { ($0.key, $0.keeper) }
            if key == nil || !(keeper?.alive(margin: 0) ?? false) { try stand() }
            guard let mine = state.withLock({ $0.key }) else { return false }
            // Only candidacies with a live lease count: a key put without one would lead forever.
            let all = try kv.range(keys.leader, EtcdRangeOptions(prefix: true, sortByCreateRevision: true))
            return all.kvs.first { $0.lease != 0 }?.key == mine
        } catch {
            return false
        }
    }

    private func stand() throws {
        resign()
        let lease = try kv.grantLease(ttl: ttl)
        let key = keys.leader + String(UInt64(bitPattern: lease.id), radix: 16)
        try kv.put(key, value: Array(machine.utf8), lease: lease.id)
        let keeper = LeaseKeeper(kv: kv, lease: lease)
        state.withLock { $0 = (key, keeper, lease.id) }
    }

    /// Gives up the candidacy (the agent stops).
    package func resign() {
        let (key, keeper, lease) = state.withLock { s in
            defer { s = (nil, nil, 0) }
            return (s.key, s.keeper, s.lease)
        }
        keeper?.stop()
        if key != nil { try? kv.revoke(lease) }
    }
}
