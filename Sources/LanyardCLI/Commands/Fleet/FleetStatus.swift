import LanyardAuth
import LanyardCore
import LanyardSupport
import LanyardFleet

extension FleetCommands {
    static let status = CommandSpec(
        name: "fleet status", summary: "members, shared slots, the leader and etcd's health", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: false,
        details: "Asks every endpoint for its status; exits 5 when the fleet cannot be read (no quorum, no endpoint).",
        examples: [
            CommandExample("lanyard fleet status", "the fleet at a glance"),
            CommandExample("lanyard fleet status --json", "the same for scripts"),
        ]) { inv in
        let report = try inv.accounts().fleetStatus()
        inv.emit(FleetStatusView(report: report)) {
            inv.stdout.line("Fleet \(report.fleet), this machine \(report.machine) (\(report.standing))")
            if let fingerprint = report.fingerprint { inv.stdout.line("Fleet fingerprint: \(fingerprint)") }
            for e in report.endpoints {
                inv.stdout.line("  etcd \(e.endpoint): \(e.problem.map { "unreachable: " + $0 } ?? "ok, version \(e.version ?? "?")\(e.memberID != nil && e.memberID == e.leaderID ? ", leader" : "")")")
            }
            if let problem = report.problem { inv.stdout.line("  problem: \(problem)") }
            inv.stdout.line("Members: \(report.members.map(\.machine).joined(separator: ", "))")
            if !report.pending.isEmpty {
                inv.stdout.line("Asking to join: \(report.pending.map { "\($0.machine) (\($0.fingerprint))" }.joined(separator: ", "))")
            }
            inv.stdout.line("Refresh leader: \(report.leader ?? "none (no agent running)")")
            if !report.damaged.isEmpty {
                inv.stdout.line("Damaged (ignored; a member's next write replaces a damaged log entry):")
                for d in report.damaged { inv.stdout.line("  \(d)") }
            }
            for s in report.slots {
                let by = s.refreshedBy.map { ", last written by \($0)" } ?? ""
                if let problem = s.problem { inv.stdout.line("  \(s.slot.name.padded(toWidth: 20)) refused: \(problem)"); continue }
                let here = !s.local ? "not on this machine (run `lanyard fleet sync`)" : s.uploadPending ? "newer here, waiting to be written" : s.localCurrent ? "local copy current" : "local copy behind"
                inv.stdout.line("  \(s.slot.name.padded(toWidth: 20)) \(here)\(by)")
            }
        }
        if report.problem != nil && !report.healthy { return .storeUnavailable }
        return .ok
    }
}

/// `fleet status --json`.
struct FleetStatusView: JSONView {
    static let keys = ["fleet", "machine", "standing", "healthy", "problem", "fingerprint", "endpoints", "members", "pending", "leader", "slots", "damaged"]
    static let optionalKeys: Set<String> = ["problem", "leader", "fingerprint"]
    let report: FleetStatusReport
    var json: JSONValue {
        JSONValue.object([
            "fleet": .string(report.fleet), "machine": .string(report.machine), "standing": .string(report.standing),
            "healthy": .bool(report.healthy), "problem": .optional(report.problem), "fingerprint": .optional(report.fingerprint),
            "damaged": .array(report.damaged.map(JSONValue.string)),
            "endpoints": .array(report.endpoints.map { e in
                JSONValue.object(["endpoint": .string(e.endpoint), "ok": .bool(e.problem == nil), "leader": .bool(e.memberID != nil && e.memberID == e.leaderID),
                                  "version": .optional(e.version), "problem": .optional(e.problem)]).droppingNulls
            }),
            "members": .array(report.members.map { FleetMemberView(member: $0).json }),
            "pending": .array(report.pending.map { FleetMemberView(member: $0).json }),
            "leader": .optional(report.leader),
            "slots": .array(report.slots.map { s in
                JSONValue.object(["slot": .string(s.slot.name), "refreshed_by": .optional(s.refreshedBy), "refreshed_at": .date(s.refreshedAt),
                                  "local": .bool(s.local), "local_current": .bool(s.localCurrent), "upload_pending": .bool(s.uploadPending),
                                  "generation": .string(String(s.generation)), "problem": .optional(s.problem)]).droppingNulls
            }),
        ]).droppingNulls
    }
}
