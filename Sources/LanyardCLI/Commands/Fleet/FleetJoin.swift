import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardSupport
import LanyardFleet

extension FleetCommands {
    static let join = CommandSpec(
        name: "fleet join", summary: "ask to join the fleet (prints this machine's fingerprint)", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: false,
        details: """
        Makes this machine's fleet identity and writes its public recipient as a join request. A member \
        approves it with `lanyard fleet approve MACHINE --fingerprint FINGERPRINT` after checking the \
        fingerprint printed here; then `lanyard fleet sync` (or the agent) brings the shared slots here.
        """,
        examples: [CommandExample("lanyard fleet join", "on a new machine")]) { inv in
        let request = try inv.accounts().fleetJoin()
        inv.emit(FleetMemberView(member: request)) {
            if request.approvedBy != nil {
                inv.stdout.line("\(request.machine) is already a member.")
            } else {
                inv.stdout.line("Asked to join as \(request.machine).")
                inv.stdout.line("Recipient:   \(request.recipient)")
                inv.stdout.line("Fingerprint: \(request.fingerprint)")
                inv.stdout.line("On a member, check the fingerprint and run:")
                inv.stdout.line("  lanyard fleet approve \(request.machine) --fingerprint \(request.fingerprint)")
            }
        }
        return .ok
    }
}
