import LanyardAuth
import LanyardCore
import LanyardSupport

extension FleetCommands {
    static let share = CommandSpec(
        name: "fleet share",
        summary: "share a slot with every member of the fleet",
        arguments: "SLOT",
        minArguments: 1,
        maxArguments: 1,
        flags: [],
        prints: true,
        takesAccount: false,
        details: """
            Encrypts the slot's credential to every member's recipient and writes it to the fleet. From then on the \
            slot is refreshed once for all machines, under the fleet's lock; each machine keeps a local copy, so \
            `lanyard token` on a fresh token makes no network call.
            """,
        examples: [CommandExample("lanyard fleet share work", "share work")]
    ) { inv in
        let slot = try slotArgument(inv)
        let manager = try inv.accounts()
        _ = try inv.runAsync { try await manager.fleetShare(slot) }
        inv.emit(FleetSlotView(slot: slot, shared: true)) {
            inv.stdout.line("Shared \(slot.name) with fleet \(manager.config.fleet?.name ?? "").")
        }
        return .ok
    }

    static let unshare = CommandSpec(
        name: "fleet unshare",
        summary: "stop sharing a slot (each machine keeps its copy)",
        arguments: "SLOT",
        minArguments: 1,
        maxArguments: 1,
        flags: [],
        prints: true,
        takesAccount: false,
        details: """
            Deletes the slot from the fleet. Every machine keeps its local copy as its own slot; only one of them \
            should go on using it, since the first to refresh spends the refresh token the others hold.
            """,
        examples: [CommandExample("lanyard fleet unshare work", "stop sharing work")]
    ) { inv in
        let slot = try slotArgument(inv)
        let manager = try inv.accounts()
        try inv.runAsync { try await manager.fleetUnshare(slot) }
        inv.emit(FleetSlotView(slot: slot, shared: false)) {
            inv.stdout.line("\(slot.name) is no longer shared; this machine keeps its copy.")
        }
        return .ok
    }
}

/// `fleet share|unshare --json`.
struct FleetSlotView: JSONView {
    static let keys = ["slot", "shared"]
    let slot: Slot
    let shared: Bool
    var json: JSONValue { .object(["slot": .string(slot.name), "shared": .bool(shared)]) }
}
