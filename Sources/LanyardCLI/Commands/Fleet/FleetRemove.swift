import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardSupport

extension FleetCommands {
    static let remove = CommandSpec(
        name: "fleet remove",
        summary: "remove a machine and rotate every shared slot away from it",
        arguments: "MACHINE",
        minArguments: 1,
        maxArguments: 1,
        flags: [],
        prints: true,
        takesAccount: false,
        details: """
            Appends a signed `remove` entry to the membership log (or deletes a join request), then rotates every \
            shared slot at once: each is refreshed under its locks and sealed only to the members left, so the \
            refresh token in the removed machine's copy is spent and mints nothing. A slot holding a personal \
            access token cannot rotate: it is re-sealed, and the output names where to revoke the token. When this \
            machine's etcd credentials may manage users (etcd's root role) the removed machine's etcd user is \
            deleted too; otherwise the output prints the `etcdctl` commands, and `fleet status` says its access is \
            open until that user is gone (docs/fleet.md, "Removing a machine").
            """,
        examples: [CommandExample("lanyard fleet remove old-laptop", "after a machine is lost")]
    ) { inv in
        let machine = inv.args.positionals[0]
        let manager = try inv.accounts()
        // Not interruptible: a rotation whose answer is in flight must finish (the server rotated the token).
        let removal = try inv.runAsync(interruptible: false) { try await manager.fleetRemove(machine: machine) }
        inv.emit(FleetRemoveView(removal: removal)) {
            guard removal.wasMember else {
                inv.stdout.line("Deleted \(machine)'s request to join.")
                return
            }
            inv.stdout.line("Removed \(machine) from the fleet.")
            for outcome in removal.slots {
                let name = outcome.slot.name
                switch outcome.result {
                case .rotated(let generation):
                    inv.stdout.line(
                        "  \(name): rotated (generation \(generation)); \(machine)'s copy holds a spent refresh token"
                    )
                case .notRotatable(let page):
                    inv.stdout.line(
                        "  \(name): a personal access token, which nothing rotates: "
                            + "\(machine) can still use it until you revoke it "
                            + (page.map { "at \(TerminalText.escaped($0))" }
                                ?? "at the provider (where its personal access tokens are managed)")
                            + ", then store a new one here (`lanyard login \(name) --with-access-token`)"
                    )
                case .failed(let reason):
                    inv.stdout.line(
                        "  \(name): NOT rotated (\(TerminalText.escaped(reason))); "
                            + "re-sealed without \(machine), but its copy still holds "
                            + "a live refresh token: sign \(name) in again here (`lanyard login \(name)`)"
                    )
                case .unshared:
                    inv.stdout.line("  \(name): no longer shared")
                case .refused(let reason):
                    inv.stdout.line(
                        "  \(name): skipped, its value is none a member signed (\(TerminalText.escaped(reason)))"
                    )
                }
            }
            if let access = removal.etcdAccess {
                switch access {
                case .revoked(let user):
                    inv.stdout.line("Deleted \(machine)'s etcd user \(TerminalText.escaped(user)).")
                case .notRevoked(_, let commands), .unknown(_, _, let commands):
                    inv.stdout.line(
                        "\(machine) can still reach etcd (\(EtcdAccessView.text(access))). With etcd's root user:"
                    )
                    for c in commands { inv.stdout.line("  \(TerminalText.escaped(c))") }
                }
            }
        }
        return removal.slots.allSatisfy({ if case .failed = $0.result { return false } else { return true } })
            ? .ok : .failure
    }

    static let resolve = CommandSpec(
        name: "fleet resolve",
        summary: "choose the fleet's entry of a forked membership log",
        arguments: "FINGERPRINT",
        minArguments: 1,
        maxArguments: 1,
        flags: [],
        prints: true,
        takesAccount: false,
        details: """
            When two different membership entries claim one number (a removed machine signing its own), every member \
            that sees both stops writing for the fleet (`fleet_forked`). `lanyard fleet status` lists both entries \
            with their fingerprints and signers; choose the one you made (the removal you ran, the approval you \
            gave). Keeping the entry verified here puts it back in etcd; keeping the other rebuilds this machine's \
            membership with it. Run it on each member that reports the fork.
            """,
        examples: [
            CommandExample("lanyard fleet resolve 9C1E-04B2-7D3A-55F0-E812", "keep the entry with that fingerprint")
        ]
    ) { inv in
        _ = try inv.accounts().fleetResolve(keep: inv.args.positionals[0])
        let report = try inv.accounts().fleetStatus()
        inv.emit(FleetStatusView(report: report)) {
            inv.stdout.line("Resolved: members are \(report.members.map(\.machine).joined(separator: ", ")).")
            if let alarm = report.alarm { inv.stdout.line("Still stopped: \(alarm.message)") }
        }
        return report.alarm == nil ? .ok : .failure
    }
}

/// A removed machine's etcd access, in words.
enum EtcdAccessView {
    static func text(_ access: EtcdAccessStatus) -> String {
        switch access {
        case .revoked(let user): return "its etcd user \(user) was deleted"
        case .notRevoked(let user, _): return "its etcd user \(user) still exists"
        case .unknown(_, let reason, _): return reason
        }
    }
}

/// `fleet remove --json`.
struct FleetRemoveView: JSONView {
    static let keys = ["machine", "member", "slots", "etcd_access"]
    static let optionalKeys: Set<String> = ["etcd_access"]
    let removal: FleetRemoval
    var json: JSONValue {
        .object([
            "machine": .string(removal.machine), "member": .bool(removal.wasMember),
            "slots": .array(
                removal.slots.map { o in
                    switch o.result {
                    case .rotated(let g):
                        return .object([
                            "slot": .string(o.slot.name), "result": .string("rotated"),
                            "generation": .string(String(g)),
                        ])
                    case .notRotatable(let page):
                        return JSONValue.object([
                            "slot": .string(o.slot.name), "result": .string("not_rotatable"), "page": .optional(page),
                        ]).droppingNulls
                    case .failed(let reason):
                        return .object([
                            "slot": .string(o.slot.name), "result": .string("failed"), "reason": .string(reason),
                        ])
                    case .unshared: return .object(["slot": .string(o.slot.name), "result": .string("unshared")])
                    case .refused(let reason):
                        return .object([
                            "slot": .string(o.slot.name), "result": .string("refused"), "reason": .string(reason),
                        ])
                    }
                }
            ),
            "etcd_access": removal.etcdAccess.map { a in
                JSONValue.object([
                    "revoked": .bool(a.isRevoked), "detail": .string(EtcdAccessView.text(a)),
                    "commands": .array(commandsOf(a).map(JSONValue.string)),
                ])
            } ?? .null,
        ]).droppingNulls
    }
    private func commandsOf(_ a: EtcdAccessStatus) -> [String] {
        switch a {
        case .revoked: return []
        case .notRevoked(_, let c), .unknown(_, _, let c): return c
        }
    }
}
