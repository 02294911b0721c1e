import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardIntegrations
import LanyardStore
import LanyardSupport
import LanyardSystem

/// `lanyard doctor`: backends, registry and store consistency, and repairs.
enum DoctorCommand {
    static let command = CommandSpec(
        name: "doctor",
        summary: "check backends and registry ↔ store consistency",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [FlagSpec("repair", "rebuild the registry from what the backends hold")],
        prints: true,
        takesAccount: false,
        details: """
            Whether or not --repair is given, the private folders \
            a killed `lanyard exec` left are recovered: tokens its \
            command rotated are copied back into the slot and the folder removed. \
            `.lanyard` pins that name no slot (the one in effect here, those below the working directory and under \
            the home folder) are problems: commands run below them fail. \
            Exit status 0 when everything is consistent (or was repaired), 1 when problems remain.
            """,
        examples: [
            CommandExample("lanyard doctor", "check the backends and that the registry and the stores agree"),
            CommandExample("lanyard doctor --repair", "rebuild the registry from what the backends hold"),
        ]
    ) { inv in
        let manager = try inv.accounts()
        // Not a repair to ask for: a live refresh token sits in a file there, and the slot's own
        // may be one the command rotated away (refreshing with it would end the sign-in).
        let recovered = try inv.runAsync { await manager.recoverAbandonedExecFolders() }
        var report = try manager.diagnose(pins: inv.pinSearch)
        report.include(recovered)
        if inv.args.has("repair") { report = try manager.repair(report) }
        let fleet = manager.config.fleet == nil ? nil : manager.fleetStatus()
        let view = DoctorView(report: report, fleet: fleet)
        inv.emit(view) { view.text(inv) }
        return view.problems.isEmpty ? .ok : .failure
    }
}

/// `doctor`'s two renderings of a ``DoctorReport``: `--json` and ``text(_:_:)``.
struct DoctorView: JSONView {
    static let keys = [
        "registry", "backends", "slots", "unregistered_items", "stray_pins", "problems", "repaired", "process", "fleet",
    ]
    static let optionalKeys: Set<String> = ["fleet"]
    let report: DoctorReport
    /// The fleet's health, when `[fleet]` is configured.
    var fleet: FleetStatusReport? = nil

    /// The report's problems and the fleet's: etcd out of reach, or this machine not a member.
    var problems: [String] {
        guard let fleet else { return report.problems }
        var fleetProblems: [String] = []
        if let problem = fleet.problem {
            fleetProblems.append(problem)
        } else if fleet.standing != "member" {
            fleetProblems.append(
                "fleet \(fleet.fleet): this machine (\(fleet.machine)) is "
                    + "\(fleet.standing == "pending" ? "waiting for approval" : "not a member"): "
                    + "its shared slots serve valid tokens and are not refreshed; see `lanyard fleet status`"
            )
        }
        // Writes stopped: a membership entry this machine cannot verify, or a forked log.
        if let alarm = fleet.alarm {
            let entries = alarm.entries.map { "entry \(alarm.seq) \($0.fingerprint) (\($0.about))" }.joined(
                separator: "; "
            )
            fleetProblems.append(alarm.message + (entries.isEmpty ? "" : ": " + entries))
        }
        for removed in fleet.removedAccess where !removed.access.isRevoked {
            fleetProblems.append(
                "fleet \(fleet.fleet): etcd access of removed machine \(removed.machine) not revoked "
                    + "(\(EtcdAccessView.text(removed.access))): see `lanyard fleet status` for the commands"
            )
        }
        // A shared value this machine refuses: its slot serves a valid token and is not refreshed.
        for slot in fleet.slots { if let problem = slot.problem { fleetProblems.append(problem) } }
        if !fleet.damaged.isEmpty {
            fleetProblems.append(
                "fleet \(fleet.fleet): \(fleet.damaged.count) "
                    + "key\(fleet.damaged.count == 1 ? "" : "s") under its prefix do not verify "
                    + "(ignored; someone without a member's key wrote there, or a write was cut): "
                    + "see `lanyard fleet status`"
            )
        }
        return report.problems + fleetProblems
    }

    var json: JSONValue {
        .object([
            "registry": .string(report.registryPath),
            "backends": .array(
                report.backends.map { backend in
                    let health = backend.health
                    return .object([
                        "backend": .string(backend.kind.rawValue), "reachable": .bool(health.reachable),
                        "locked": .bool(health.locked),
                        "persistent": .bool(health.persistent), "location": .optional(health.location),
                        "problem": .optional(health.problem),
                        "provider": .optional(health.provider),
                        "notes": .array((health.notes ?? []).map(JSONValue.string)),
                    ])
                }
            ),
            "slots": .array(
                report.slots.map {
                    .object([
                        "slot": .string($0.slot.name), "backend": .string($0.backend.rawValue),
                        "status": .string($0.status.rawValue),
                    ])
                }
            ),
            "unregistered_items": .array(
                report.unregisteredItems.map {
                    .object(["slot": .string($0.slot.name), "backend": .string($0.backend.rawValue)])
                }
            ),
            "stray_pins": .array(
                report.strayPins.map { .object(["path": .string($0.path), "name": .string($0.name)]) }
            ),
            "problems": .array(problems.map(JSONValue.string)),
            "repaired": .array(report.repairs.map { .string($0.description) }),
            "process": .object([
                "dumpable": .bool(ProcessHardening.isDumpable),
                "core_limit": ProcessHardening.coreLimit.map { .number(Double($0)) } ?? .null,
            ]),
            "fleet": fleet.map { f in
                JSONValue.object([
                    "name": .string(f.fleet), "machine": .string(f.machine), "standing": .string(f.standing),
                    "healthy": .bool(f.healthy),
                    "shared_slots": .array(f.slots.map { .string($0.slot.name) }), "problem": .optional(f.problem),
                ]).droppingNulls
            } ?? .null,
        ]).droppingNulls
    }

    func text(_ inv: Invocation) {
        let s = inv.style
        let out = inv.stdout
        out.line(
            s.bold("Registry")
                + "  \(report.registryPath) (\(report.slotCount) slot\(report.slotCount == 1 ? "" : "s"))"
        )
        out.line(s.bold("Backends"))
        for backend in report.backends {
            let health = backend.health
            let words: String
            if !health.reachable {
                words = "not reachable" + (health.problem.map { ": \($0)" } ?? "")
            } else if let problem = health.problem {
                words = "answers, but \(problem)"  // the keyring has no collection where Lanyard writes
            } else {
                words =
                    [
                        health.locked ? "locked" : "unlocked",
                        health.persistent ? "survives reboot" : "lost at logout or reboot",
                    ]
                    .joined(separator: ", ") + (health.location.map { " (\($0))" } ?? "")
            }
            out.line("  \(column(backend.kind.displayName))\(words)")
            if let provider = health.provider {
                out.line("  \(column(""))provided by \(provider)")
                for note in health.notes ?? [] { out.line("  \(column(""))- \(note)") }
            }
        }
        if !report.slots.isEmpty {
            out.line(s.bold("Slots"))
            for check in report.slots {
                out.line("  \(column(check.slot.name))\(column(check.backend.displayName))\(check.status.rawValue)")
            }
        }
        let hardened = !ProcessHardening.isDumpable && ProcessHardening.coreLimit == 0
        out.line(
            s.bold("Process") + "   "
                + (hardened
                    ? "no core dumps, not traceable by other processes"
                    : "may be dumped or traced: prctl(PR_SET_DUMPABLE) or setrlimit(RLIMIT_CORE) was refused")
        )
        if let fleet {
            let health =
                fleet.problem == nil
                ? "\(fleet.standing), \(fleet.slots.count) shared slot\(fleet.slots.count == 1 ? "" : "s"), "
                    + "\(fleet.endpoints.filter { $0.problem == nil }.count) "
                    + "of \(fleet.endpoints.count) etcd endpoints answer" : "unreachable"
            out.line(s.bold("Fleet") + "     \(fleet.fleet) as \(fleet.machine): \(health)")
        }
        for repair in report.repairs { out.line(s.green("repaired: ") + "\(repair.description)") }
        let problems = self.problems
        if problems.isEmpty {
            out.line(s.green("No problems found."))
        } else {
            for p in problems { out.line(s.yellow("problem: ") + "\(p)") }
            if report.needsRepair {
                out.line("Run `lanyard doctor --repair` to rebuild the registry from the backends.")
            }
        }
    }

    private func column(_ text: String) -> String { text.padded(toWidth: 16) }
}
