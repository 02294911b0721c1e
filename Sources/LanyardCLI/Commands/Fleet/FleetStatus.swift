import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardSupport

extension FleetCommands {
    static let status = CommandSpec(
        name: "fleet status",
        summary: "members, shared slots, the leader and etcd's health",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: true,
        takesAccount: false,
        details: "Asks every endpoint for its status; exits 5 when the fleet cannot be read (no quorum, no endpoint).",
        examples: [
            CommandExample("lanyard fleet status", "the fleet at a glance"),
            CommandExample("lanyard fleet status --json", "the same for scripts"),
        ]
    ) { inv in
        let report = try inv.accounts().fleetStatus()
        inv.emit(FleetStatusView(report: report)) {
            let standing = report.standing == "pending" ? "waiting for approval" : report.standing
            inv.stdout.line("Fleet \(report.fleet), this machine \(report.machine) (\(standing))")
            if report.standing == "pending", let mine = report.pending.first(where: { $0.machine == report.machine }) {
                inv.stdout.line("  On a member, after comparing the fingerprint with this screen:")
                inv.stdout.line("    lanyard fleet approve \(report.machine) --fingerprint \(mine.fingerprint)")
            }
            if let alarm = report.alarm {
                inv.stdout.line(
                    "WRITES STOPPED "
                        + "(\(alarm.kind == "forked" ? "the membership log is forked" : "membership behind")): "
                        + "\(alarm.message)"
                )
                for entry in alarm.entries {
                    inv.stdout.line("  entry \(alarm.seq) \(entry.fingerprint): \(TerminalText.escaped(entry.about))")
                }
            }
            for removed in report.removedAccess {
                switch removed.access {
                case .revoked: break
                case .notRevoked(let user, let commands):
                    inv.stdout.line(
                        "etcd access of \(removed.machine) not revoked "
                            + "(its user \(TerminalText.escaped(user)) still exists); with etcd's root user:"
                    )
                    for c in commands { inv.stdout.line("  \(TerminalText.escaped(c))") }
                case .unknown(_, let reason, let commands):
                    inv.stdout.line(
                        "etcd access of \(removed.machine) may not be revoked: "
                            + "\(TerminalText.escaped(reason)); with etcd's root user:"
                    )
                    for c in commands { inv.stdout.line("  \(TerminalText.escaped(c))") }
                }
            }
            if let fingerprint = report.fingerprint { inv.stdout.line("Fleet fingerprint: \(fingerprint)") }
            for e in report.endpoints {
                let leader = e.memberID != nil && e.memberID == e.leaderID ? ", leader" : ""
                let state = e.problem.map { "unreachable: " + $0 } ?? "ok, version \(e.version ?? "?")\(leader)"
                inv.stdout.line("  etcd \(e.endpoint): \(state)")
            }
            if let problem = report.problem { inv.stdout.line("  problem: \(problem)") }
            inv.stdout.line("Members: \(report.members.map(\.machine).joined(separator: ", "))")
            if !report.pending.isEmpty {
                inv.stdout.line(
                    "Asking to join: "
                        + "\(report.pending.map { "\($0.machine) (\($0.fingerprint))" }.joined(separator: ", "))"
                )
            }
            inv.stdout.line("Refresh leader: \(report.leader ?? "none (no agent running)")")
            if !report.damaged.isEmpty {
                inv.stdout.line("Damaged (ignored; a member's next write replaces a damaged log entry):")
                for d in report.damaged { inv.stdout.line("  \(d)") }
            }
            for s in report.slots {
                let by = s.refreshedBy.map { ", last written by \($0)" } ?? ""
                if let problem = s.problem {
                    inv.stdout.line("  \(s.slot.name.padded(toWidth: 20)) refused: \(problem)")
                    continue
                }
                let here =
                    !s.local
                    ? "not on this machine (run `lanyard fleet sync`)"
                    : s.uploadPending
                        ? "newer here, waiting to be written"
                        : s.localCurrent ? "local copy current" : "local copy behind"
                inv.stdout.line("  \(s.slot.name.padded(toWidth: 20)) \(here)\(by)")
            }
        }
        if report.problem != nil && !report.healthy { return .storeUnavailable }
        return .ok
    }
}

/// `fleet status --json`.
struct FleetStatusView: JSONView {
    static let keys = [
        "fleet", "machine", "standing", "healthy", "problem", "fingerprint", "endpoints", "members", "pending",
        "leader", "slots", "damaged",
        "alarm", "removed_access",
    ]
    static let optionalKeys: Set<String> = ["problem", "leader", "fingerprint", "alarm"]
    let report: FleetStatusReport
    var json: JSONValue {
        JSONValue.object([
            "fleet": .string(report.fleet), "machine": .string(report.machine), "standing": .string(report.standing),
            "healthy": .bool(report.healthy), "problem": .optional(report.problem),
            "fingerprint": .optional(report.fingerprint),
            "damaged": .array(report.damaged.map(JSONValue.string)),
            "endpoints": .array(
                report.endpoints.map { e in
                    JSONValue.object([
                        "endpoint": .string(e.endpoint), "ok": .bool(e.problem == nil),
                        "leader": .bool(e.memberID != nil && e.memberID == e.leaderID),
                        "version": .optional(e.version), "problem": .optional(e.problem),
                    ]).droppingNulls
                }
            ),
            "members": .array(report.members.map { FleetMemberView(member: $0).json }),
            "pending": .array(report.pending.map { FleetMemberView(member: $0).json }),
            "leader": .optional(report.leader),
            "alarm": report.alarm.map { a in
                JSONValue.object([
                    "kind": .string(a.kind), "seq": .string(String(a.seq)), "message": .string(a.message),
                    "entries": .array(
                        a.entries.map { .object(["fingerprint": .string($0.fingerprint), "about": .string($0.about)]) }
                    ),
                ])
            } ?? .null,
            "removed_access": .array(
                report.removedAccess.map { r in
                    JSONValue.object([
                        "machine": .string(r.machine), "revoked": .bool(r.access.isRevoked),
                        "detail": .string(EtcdAccessView.text(r.access)),
                    ])
                }
            ),
            "slots": .array(
                report.slots.map { s in
                    JSONValue.object([
                        "slot": .string(s.slot.name), "refreshed_by": .optional(s.refreshedBy),
                        "refreshed_at": .date(s.refreshedAt),
                        "local": .bool(s.local), "local_current": .bool(s.localCurrent),
                        "upload_pending": .bool(s.uploadPending),
                        "generation": .string(String(s.generation)), "problem": .optional(s.problem),
                    ]).droppingNulls
                }
            ),
        ]).droppingNulls
    }
}
