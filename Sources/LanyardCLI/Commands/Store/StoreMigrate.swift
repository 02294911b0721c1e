import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

extension StoreGroupCommand {
    static let migrate = CommandSpec(
        name: "store migrate",
        summary: "move slots to another backend (copy, read back, compare, then delete)",
        arguments: "[SLOT…]",
        minArguments: 0,
        maxArguments: 1000,
        flags: [
            FlagSpec(
                "to",
                value: "BACKEND",
                choices: BackendKind.allCases.map(\.rawValue),
                "secret-service or file (required)"
            ),
            FlagSpec("dry-run", "show what would move"),
        ],
        prints: true,
        takesAccount: false,
        details: """
            Moves the named slots (every slot by default) to the backend --to names: each credential is copied, read \
            back and compared, the registry records the new backend, and only then is the source copy deleted. A \
            kill -9 at any point leaves every slot readable from at least one backend. Progress is printed as each \
            slot lands.
            """,
        examples: [
            CommandExample("lanyard store migrate --to file --dry-run", "see what would move into the file store"),
            CommandExample("lanyard store migrate --to file", "move every slot into the file store"),
            CommandExample("lanyard store migrate --to secret-service work", "move one slot into the desktop keyring"),
        ]
    ) { inv in
        guard let raw = inv.args.value("to"), let target = BackendKind(rawValue: raw) else {
            throw UsageError(message: "migrate needs --to secret-service or --to file", command: inv.spec.name)
        }
        let slots = try inv.args.positionals.map { try SlotCommands.parseSlot($0, inv) }
        func describe(_ step: MigrationStep) -> String {
            let verb =
                switch step.outcome {
                case .moved: "moved"
                case .alreadyThere: "already in"
                case .registryOnly: "moved (no stored credential)"
                case .wouldMove: "would move"
                }
            return "\(step.slot.name): \(verb) "
                + "\(step.outcome == .alreadyThere ? "" : "\(step.from.displayName) → ")\(step.to.displayName)"
        }
        // Progress goes out as each slot lands, so an interrupted migration shows how far it got.
        let steps = try inv.accounts().migrate(to: target, slots: slots, dryRun: inv.args.has("dry-run")) { step in
            if !inv.json { inv.stdout.line("\(describe(step))") }
        }
        inv.emit(StoreMigrateView(steps: steps)) {
            if steps.isEmpty { inv.stdout.line("No slots to migrate.") }
            for step in steps where step.outcome == .alreadyThere || step.outcome == .wouldMove {
                inv.stdout.line("\(describe(step))")
            }
        }
        return .ok
    }
}

/// `store migrate --json`.
struct StoreMigrateView: JSONView {
    static let keys = ["steps"]
    let steps: [MigrationStep]
    var json: JSONValue {
        .object([
            "steps": .array(
                steps.map {
                    .object([
                        "slot": .string($0.slot.name), "from": .string($0.from.rawValue), "to": .string($0.to.rawValue),
                        "outcome": .string($0.outcome.rawValue),
                    ])
                }
            )
        ])
    }
}
