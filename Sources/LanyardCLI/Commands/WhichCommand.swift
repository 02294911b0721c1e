import LanyardCore
import LanyardStore
import LanyardSupport

extension ResolutionCommands {
    static let which = CommandSpec(
        name: "which",
        summary: "print the slot commands act on here, and the rule that chose it",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: true,
        takesAccount: true,
        details: "Precedence: --account > LANYARD_ACCOUNT > nearest .lanyard file > the active slot.",
        examples: [
            CommandExample("lanyard which", "the slot commands act on here, and the rule that chose it"),
            CommandExample("LANYARD_ACCOUNT=work lanyard which", "check that the variable wins over a .lanyard pin"),
        ]
    ) { inv in
        let view = try inv.registry.view()
        guard let resolution = try inv.resolveAccount(active: { try view.active() }) else {
            throw RegistryError.noActiveSlot
        }
        let exists = try view.record(of: resolution.slot) != nil
        var path: String?
        if case .pinFile(let p) = resolution.rule { path = p }
        inv.emit(WhichView(slot: resolution.slot, rule: resolution.rule.name, path: path, exists: exists)) {
            inv.stdout.line(
                "\(inv.style.bold(resolution.slot.name))  \(inv.style.dim("(\(resolution.rule.explanation))"))"
            )
        }
        if !exists {
            // With --json the object (`"exists": false`) and the exit status say it: stdout is
            // one JSON document and stderr stays empty, as for every other --json answer.
            if !inv.json {
                inv.stderr.line("lanyard: slot \(resolution.slot.name) does not exist (see `lanyard list`)")
            }
            return .notSignedIn
        }
        return .ok
    }
}

/// `which --json`.
struct WhichView: JSONView {
    static let keys = ["slot", "rule", "path", "exists"]
    static let optionalKeys: Set<String> = ["path"]
    let slot: Slot
    /// The rule's name (`flag`, `environment`, `pin-file`, `active`).
    let rule: String
    /// The pin file, when one chose the slot.
    let path: String?
    let exists: Bool
    var json: JSONValue {
        JSONValue.object([
            "slot": .string(slot.name), "rule": .string(rule), "path": .optional(path), "exists": .bool(exists),
        ]).droppingNulls
    }
}
