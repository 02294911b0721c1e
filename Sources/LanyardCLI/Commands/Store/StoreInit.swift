import LanyardStore
import LanyardSupport

extension StoreGroupCommand {
    static let initStore = CommandSpec(
        name: "store init", summary: "create the encrypted-file store and its identity", arguments: "",
        minArguments: 0, maxArguments: 0,
        flags: [FlagSpec("no-passphrase", "keep the file-store identity unprotected (unattended hosts)")],
        prints: true, takesAccount: false,
        details: """
        Creates the store and its identity, protected by a passphrase asked twice on the terminal (or read from \
        LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS), and leaves it unlocked for [store] unlock-cache seconds. \
        --no-passphrase keeps the identity unprotected at mode 0600 and warns what that means. An existing store \
        is never replaced (exit 1).
        """,
        examples: [
            CommandExample("lanyard store init", "create the store, protected by a passphrase"),
            CommandExample("LANYARD_PASSPHRASE_FILE=~/.config/lanyard/pass lanyard store init", "take the passphrase from a file (scripts)"),
            CommandExample("lanyard store init --no-passphrase", "an unattended host: no passphrase, the identity kept at 0600"),
        ]) { inv in
        let (file, _) = try fileStore(inv)
        let protect = !inv.args.has("no-passphrase")
        if file.isInitialized { throw StoreError.io(path: file.storePath, detail: "a file store already exists here") }
        let passphrase = protect ? try PassphraseReader(environment: inv.context.environment)
            .read(prompt: "New passphrase for the Lanyard file store: ", confirm: true) : nil
        let unlocked = try file.initialize(passphrase: passphrase)
        inv.emit(StoreInitView(store: file.storePath, passphrase: protect, unlocked: unlocked)) {
            inv.stdout.line("Created the encrypted file store at \(file.storePath).")
            if !unlocked, let reason = EncryptedFileStore.cacheUnavailableReason {
                inv.stderr.line(inv.errorStyle.yellow("warning: ") + "the kernel keyring is unavailable here (\(reason)), so the store "
                    + "cannot stay unlocked: set LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS so each command can open it.")
            }
            if !protect {
                inv.stderr.line(inv.errorStyle.yellow("warning: ") + "the store's identity is kept unprotected in \(file.plainIdentityPath) (mode 0600).")
                inv.stderr.line("Anyone who can read your files (backups, root, a stolen disk) can read every credential in the store.")
            }
        }
        return .ok
    }
}

/// `store init --json`.
struct StoreInitView: JSONView {
    static let keys = ["store", "passphrase", "unlocked"]
    let store: String
    let passphrase: Bool
    /// Whether the new store stays unlocked (the kernel keyring holds its identity).
    let unlocked: Bool
    var json: JSONValue { .object(["store": .string(store), "passphrase": .bool(passphrase), "unlocked": .bool(unlocked)]) }
}
