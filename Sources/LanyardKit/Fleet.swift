import LanyardAuth
import LanyardCore
import LanyardFleet

/// One slot of ``Accounts/fleetSync(only:)``: what became of it, and why when its fleet copy was
/// refused.
public struct FleetSyncResult: Sendable, Equatable {
    public let slot: Slot
    public let outcome: FleetSyncOutcome
    /// Why the fleet's copy was refused (`outcome == .refused`); nil otherwise.
    public let message: String?
}

/// The fleet operations of `lanyard fleet`: machines that share accounts through an etcd cluster
/// (`[fleet]` in config.ini; docs/fleet.md). A shared slot is refreshed once for every machine;
/// the refresh, the adoption of other machines' refreshes and a sign-in's write to the fleet
/// happen inside ``Client``, ``refresh(_:)`` and ``AuthSession`` as for any slot. Errors are
/// ``FleetError``.
extension Accounts {
    /// Creates the fleet in etcd with this machine as its first member (`fleet init`).
    public func fleetCreate() throws -> FleetMember { try manager.fleetCreate() }

    /// Asks to join the fleet (`fleet join`). `fleetFingerprint` is the fleet's fingerprint as a
    /// member shows it (``fleetFingerprint()`` there, `lanyard fleet status`): this machine pins
    /// that fleet and trusts nothing else etcd serves. A member approves with the returned
    /// ``FleetMember/fingerprint``, checked by a person on both machines.
    public func fleetJoin(fleetFingerprint: String) throws -> FleetMember {
        try manager.fleetJoin(fleetFingerprint: fleetFingerprint)
    }

    /// The fleet's fingerprint as this machine pinned it (nil before `fleetCreate` or `fleetJoin`).
    public func fleetFingerprint() -> String? { manager.fleetFingerprint() }

    /// Admits a machine whose fingerprint a person checked (`fleet approve`); every shared slot is
    /// encrypted to it. - Returns: the new member and the slots it can now read.
    public func fleetApprove(machine: String, fingerprint: String) throws -> (member: FleetMember, slots: [Slot]) {
        try manager.fleetApprove(machine: machine, fingerprint: fingerprint)
    }

    /// Removes a member (`fleet remove`): a signed entry in the membership log, then every shared
    /// slot rotated (refreshed and sealed to the members left, so the removed machine's refresh
    /// token is spent), and its etcd user deleted where this machine's credentials may.
    /// - Returns: what became of each shared slot and of its etcd access.
    public func fleetRemove(machine: String) async throws -> FleetRemoval {
        try await manager.fleetRemove(machine: machine)
    }

    /// Resolves a forked membership log (`fleet resolve`): `fingerprint` is the entry a person
    /// chose, as ``fleetStatus()``'s ``FleetStatusReport/alarm`` lists both.
    public func fleetResolve(keep fingerprint: String) throws { _ = try manager.fleetResolve(keep: fingerprint) }

    /// Shares a slot with every member (`fleet share`). - Returns: the etcd revision written.
    @discardableResult
    public func fleetShare(_ slot: Slot) async throws -> Int64 { try await manager.fleetShare(slot) }

    /// Stops sharing a slot (`fleet unshare`): this machine keeps the live credential as its own;
    /// every other member marks its copy handed over (``FleetSyncOutcome/handedOver``).
    public func fleetUnshare(_ slot: Slot) async throws { try await manager.fleetUnshare(slot) }

    /// Brings the local copy of every shared slot (or of `only`) up to the fleet's, adding the
    /// slots this machine does not have yet, and writes what only this machine holds (`fleet sync`).
    public func fleetSync(only slot: Slot? = nil) async throws -> [FleetSyncResult] {
        try await manager.fleetSync(only: slot).map { FleetSyncResult(slot: $0.0, outcome: $0.1, message: $0.2) }
    }

    /// The fleet as this machine sees it: endpoints, health, members, requests to join, shared
    /// slots, the leading agent (`fleet status`). Never throws: what failed is in `problem`.
    public func fleetStatus() -> FleetStatusReport { manager.fleetStatus() }
}
