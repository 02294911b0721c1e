import LanyardCore
import LanyardFleet
import LanyardStore

extension SlotCommands {
    static let list = CommandSpec(
        name: "list",
        summary: "list every slot with its account, plan and state",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [FlagSpec("names", "print only the slot names, one per line (for scripts and completions)")],
        prints: true,
        takesAccount: false,
        details: "Reads only the registry (and config.ini, which must parse): no keyring or store is unlocked.",
        examples: [
            CommandExample("lanyard list", "every slot, its account, plan, state and expiry"),
            CommandExample("lanyard list --names", "only the names, one a line (for scripts)"),
            CommandExample(
                "lanyard list --json | jq -r '.slots[] | select(.state != \"signed-in\") | .slot'",
                "the slots that need attention"
            ),
        ]
    ) { inv in
        // A config.ini that does not parse is said as every other command says it (its
        // `config.ini:LINE:` line), not passed over; with no config file nothing is loaded.
        _ = try inv.config()
        let document = try inv.registry.load()
        if inv.args.has("names") {
            inv.emit(ListNamesView(names: document.sortedSlots.map(\.0))) {
                for (slot, _) in document.sortedSlots { inv.stdout.line("\(slot.name)") }
            }
            return .ok
        }
        let shared = SharedSlotState.fleets(paths: inv.paths)
        if inv.json {
            ListView(document: document, shared: shared).write(pretty: true) { inv.stdout.write(bytes: $0) }
            return .ok
        }
        if document.slots.isEmpty {
            inv.stdout.line("No slots yet. Sign an account in with `lanyard login`.")
        } else {
            let s = inv.style
            let rows = document.sortedSlots.map { slot, record -> [HumanText] in
                let active = slot == document.active
                return [
                    active ? s.green("*") : " ", active ? s.bold(slot.name) : "\(slot.name)", "\(record.provider)",
                    "\(record.account.email ?? "-")", "\(record.account.plan?.displayName ?? "-")",
                    s.state(record.state),
                    "\(record.expiresAt.map { RelativeTime.describe($0, now: inv.now) } ?? "-")",
                    "\(record.backend.rawValue)\(shared[slot].map { ", fleet " + $0 } ?? "")",
                ]
            }
            inv.stdout.write(
                Table.render(
                    header: [" ", "SLOT", "PROVIDER", "ACCOUNT", "PLAN", "STATE", "EXPIRES", "BACKEND"],
                    rows: rows,
                    style: s
                )
            )
        }
        return .ok
    }
}
