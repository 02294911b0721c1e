import LanyardAuth
import LanyardSupport

extension ResolutionCommands {
    static let unpin = CommandSpec(
        name: "unpin",
        summary: "remove ./.lanyard from this directory",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: true,
        takesAccount: false,
        details: "Only the file in the working directory is removed; a pin in a parent directory is reported.",
        examples: [
            CommandExample("lanyard unpin", "remove this folder's pin (a parent's pin may still apply)")
        ]
    ) { inv in
        let outcome = try inv.accounts().unpin(in: inv.context.workingDirectory)
        inv.emit(UnpinView(removed: outcome.removed, stillPinnedBy: outcome.stillPinnedByPath)) {
            inv.stdout.line(
                outcome.removed
                    ? "Unpinned \(inv.context.workingDirectory)."
                    : "No .lanyard file in \(inv.context.workingDirectory)."
            )
            if let path = outcome.stillPinnedByPath {
                inv.stdout.line("Still pinned to \(outcome.stillPinnedToName ?? "") by \(path).")
            }
        }
        return outcome.removed ? .ok : .failure
    }
}

/// `unpin --json`.
struct UnpinView: JSONView {
    static let keys = ["removed", "still_pinned_by"]
    static let optionalKeys: Set<String> = ["still_pinned_by"]
    let removed: Bool
    /// The parent's pin file that still applies here.
    let stillPinnedBy: String?
    var json: JSONValue {
        JSONValue.object(["removed": .bool(removed), "still_pinned_by": .optional(stillPinnedBy)]).droppingNulls
    }
}
