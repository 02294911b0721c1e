import LanyardCore

/// Where a fleet's data lives in etcd, under `/lanyard/FLEET/`. etcd is only the transport:
/// every value that carries authority is signed by a member (``SignedDocument``).
///
/// - `created`: the fleet's marker (who created it, when; informative only);
/// - `log/0000000001`, …: the membership log (``Membership``), genesis first;
/// - `pending/MACHINE`: a join request, signed with the keys it asks to be admitted with;
/// - `slots/SLOT`: the shared value (``SharedValue``): a signed, numbered credential sealed to
///   every member, or a tombstone;
/// - `intents/SLOT`: a refresh under way (``RefreshIntent``);
/// - `refreshed/SLOT`: which machine last wrote the slot and when (informative only);
/// - `locks/SLOT/LEASE`: the slot's refresh mutex (etcd's own layout: lowest create revision owns);
/// - `leader/LEASE`: the agents' election, the same way.
package struct FleetKeys: Sendable {
    package let prefix: String

    package init(fleet: String) { prefix = "/lanyard/\(fleet)/" }

    package var created: String { prefix + "created" }
    package var log: String { prefix + "log/" }
    package var pending: String { prefix + "pending/" }
    package var slots: String { prefix + "slots/" }
    package var intents: String { prefix + "intents/" }
    package var refreshed: String { prefix + "refreshed/" }
    package var leader: String { prefix + "leader/" }

    /// Entry `seq` of the membership log (ten digits, so keys sort by number).
    package func log(_ seq: Int64) -> String {
        let digits = String(seq)
        return log + String(repeating: "0", count: max(0, 10 - digits.count)) + digits
    }
    package func pending(_ machine: String) -> String { pending + machine }
    package func slot(_ slot: Slot) -> String { slots + slot.name }
    package func intent(_ slot: Slot) -> String { intents + slot.name }
    package func refreshed(_ slot: Slot) -> String { refreshed + slot.name }
    package func locks(_ slot: Slot) -> String { prefix + "locks/" + slot.name + "/" }

    /// The last path component of `key` under `folder`, or nil when `key` is not directly in it.
    package func name(of key: String, in folder: String) -> String? {
        guard key.hasPrefix(folder) else { return nil }
        let rest = String(key.dropFirst(folder.count))
        return rest.isEmpty || rest.contains("/") ? nil : rest
    }
}
