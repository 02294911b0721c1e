import LanyardStore
import LanyardSupport

extension StoreGroupCommand {
    static let status = CommandSpec(
        name: "store status",
        summary: "say whether a file store exists and whether it is locked",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: true,
        takesAccount: false,
        details: "Reads the store's files and the kernel keyring only: it never asks for a passphrase.",
        examples: [
            CommandExample("lanyard store status", "is there a store here, and is it unlocked?"),
            CommandExample(
                "lanyard store status --json",
                "the same for scripts: {\"store\", \"initialized\", \"passphrase\", \"tpm\", \"locked\"}"
            ),
        ]
    ) { inv in
        let (file, _) = try fileStore(inv)
        let health = file.health()
        let sealed = file.isSealed
        inv.emit(
            StoreStatusView(
                store: file.storePath,
                initialized: file.isInitialized,
                passphrase: file.isPassphraseProtected,
                tpm: sealed,
                locked: health.locked,
                problem: health.problem
            )
        ) {
            if !file.isInitialized {
                inv.stdout.line("No file store (create one with `lanyard store init`).")
            } else {
                let protection =
                    sealed
                    ? (file.needsTPMPIN ? " (sealed by the TPM, with a PIN)" : " (sealed by the TPM)")
                    : file.isPassphraseProtected ? "" : " (no passphrase)"
                inv.stdout.line("\(file.storePath): \(health.locked ? "locked" : "unlocked")\(protection)")
            }
        }
        return .ok
    }
}

/// `store status --json`.
struct StoreStatusView: JSONView {
    static let keys = ["store", "initialized", "passphrase", "tpm", "locked", "problem"]
    static let optionalKeys: Set<String> = ["problem"]
    let store: String
    let initialized: Bool
    let passphrase: Bool
    /// Whether the identity is sealed by the TPM.
    let tpm: Bool
    let locked: Bool
    let problem: String?
    var json: JSONValue {
        JSONValue.object([
            "store": .string(store), "initialized": .bool(initialized), "passphrase": .bool(passphrase),
            "tpm": .bool(tpm),
            "locked": .bool(locked), "problem": .optional(problem),
        ]).droppingNulls
    }
}
