import LanyardAuth
import LanyardCore
import LanyardSupport

extension FleetCommands {
    static let sync = CommandSpec(
        name: "fleet sync",
        summary: "bring every shared slot's local copy up to the fleet's",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: true,
        takesAccount: false,
        details: """
            Adopts credentials other machines refreshed, creates shared slots this machine does not have yet, and \
            writes a refresh whose fleet write failed. The agent does this continuously.
            """,
        examples: [CommandExample("lanyard fleet sync", "after `fleet approve`, on the new machine")]
    ) { inv in
        let manager = try inv.accounts()
        let results = try inv.runAsync { try await manager.fleetSync() }
        inv.emit(FleetSyncView(results: results)) {
            if results.isEmpty { inv.stdout.line("The fleet shares no slots yet.") }
            for (slot, outcome, message) in results {
                inv.stdout.line(
                    "\(slot.name.padded(toWidth: 20)) \(outcome.rawValue)\(message.map { ": " + $0 } ?? "")"
                )
            }
        }
        return results.contains { $0.1 == .refused } ? .failure : .ok
    }
}

/// `fleet sync --json`.
struct FleetSyncView: JSONView {
    static let keys = ["slots"]
    static let slotKeys = ["slot", "outcome", "message"]
    let results: [(Slot, FleetSyncOutcome, String?)]
    var json: JSONValue {
        .object([
            "slots": .array(
                results.map {
                    JSONValue.object([
                        "slot": .string($0.0.name), "outcome": .string($0.1.rawValue), "message": .optional($0.2),
                    ]).droppingNulls
                }
            )
        ])
    }
}
