import FoundationEssentials
import LanyardCore
import LanyardSupport

/// Where a fleet's data lives in etcd, under `/lanyard/FLEET/`:
///
/// - `created`: the fleet's marker (who created it, when);
/// - `members/MACHINE`: a member's age recipient and fingerprint (public);
/// - `pending/MACHINE`: a join request, the same fields, until a member approves it;
/// - `slots/SLOT`: the shared credential, an age file encrypted to every member's recipient;
/// - `refreshed/SLOT`: which machine last refreshed the slot and when (no secret);
/// - `locks/SLOT/LEASE`: the slot's refresh mutex (etcd's own layout: lowest create revision owns);
/// - `leader/LEASE`: the agents' election, the same way.
package struct FleetKeys: Sendable {
    package let prefix: String

    package init(fleet: String) { prefix = "/lanyard/\(fleet)/" }

    package var created: String { prefix + "created" }
    package var members: String { prefix + "members/" }
    package var pending: String { prefix + "pending/" }
    package var slots: String { prefix + "slots/" }
    package var refreshed: String { prefix + "refreshed/" }
    package var leader: String { prefix + "leader/" }

    package func member(_ machine: String) -> String { members + machine }
    package func pending(_ machine: String) -> String { pending + machine }
    package func slot(_ slot: Slot) -> String { slots + slot.name }
    package func refreshed(_ slot: Slot) -> String { refreshed + slot.name }
    package func locks(_ slot: Slot) -> String { prefix + "locks/" + slot.name + "/" }

    /// The last path component of `key` under `folder`, or nil when `key` is not directly in it.
    package func name(of key: String, in folder: String) -> String? {
        guard key.hasPrefix(folder) else { return nil }
        let rest = String(key.dropFirst(folder.count))
        return rest.isEmpty || rest.contains("/") ? nil : rest
    }
}
