import FoundationEssentials
import Glibc
import LanyardCore
import LanyardStore

enum ResolutionCommands {
    static let which = CommandSpec(
        name: "which", summary: "print the slot commands act on here, and the rule that chose it", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: true,
        details: "Precedence: --account > LANYARD_ACCOUNT > nearest .lanyard file > the active slot.",
        examples: [
            CommandExample("lanyard which", "the slot commands act on here, and the rule that chose it"),
            CommandExample("LANYARD_ACCOUNT=work lanyard which", "check that the variable wins over a .lanyard pin"),
        ]) { inv in
        let view = try inv.registry.view()
        guard let resolution = try inv.resolveAccount(active: { try view.active() }) else { throw RegistryError.noActiveSlot }
        let exists = try view.record(of: resolution.slot) != nil
        var path: String?
        if case .pinFile(let p) = resolution.rule { path = p }
        inv.emit(JSONValue.object(["slot": .string(resolution.slot.name), "rule": .string(resolution.rule.name),
                                   "path": .optional(path), "exists": .bool(exists)]).droppingNulls) {
            inv.stdout.line("\(inv.style.bold(resolution.slot.name))  \(inv.style.dim("(\(resolution.rule.explanation))"))")
        }
        if !exists {
            inv.stderr.line("lanyard: slot \(resolution.slot.name) does not exist (see `lanyard list`)")
            return .notSignedIn
        }
        return .ok
    }

    static let pin = CommandSpec(
        name: "pin", summary: "pin SLOT to this directory tree (writes ./.lanyard)", arguments: "SLOT",
        minArguments: 1, maxArguments: 1, flags: [], prints: true, takesAccount: false,
        details: "Commands run in this directory or below use SLOT unless --account or LANYARD_ACCOUNT say otherwise.",
        examples: [
            CommandExample("lanyard pin work", "commands run in this folder and below use work"),
        ]) { inv in
        let slot = try SlotCommands.parseSlot(inv.args.positionals[0], inv)
        let path = try inv.accounts().pin(slot, in: inv.context.workingDirectory)
        inv.emit(.object(["slot": .string(slot.name), "path": .string(path)])) { inv.stdout.line("Pinned \(slot.name) to \(inv.context.workingDirectory).") }
        return .ok
    }

    static let unpin = CommandSpec(
        name: "unpin", summary: "remove ./.lanyard from this directory", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: false,
        details: "Only the file in the working directory is removed; a pin in a parent directory is reported.",
        examples: [
            CommandExample("lanyard unpin", "remove this folder's pin (a parent's pin may still apply)"),
        ]) { inv in
        let outcome = try inv.accounts().unpin(in: inv.context.workingDirectory)
        inv.emit(JSONValue.object(["removed": .bool(outcome.removed), "still_pinned_by": .optional(outcome.stillPinnedByPath)]).droppingNulls) {
            inv.stdout.line(outcome.removed ? "Unpinned \(inv.context.workingDirectory)." : "No .lanyard file in \(inv.context.workingDirectory).")
            if let path = outcome.stillPinnedByPath { inv.stdout.line("Still pinned to \(outcome.stillPinnedToName ?? "") by \(path).") }
        }
        return outcome.removed ? .ok : .failure
    }
}
