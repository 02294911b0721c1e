import LanyardCore
import LanyardStore

extension StoreGroupCommand {
    static let store = CommandSpec(
        group: "store",
        summary: "set up, unlock, lock or migrate credential stores",
        details: """
            The encrypted-file backend (an age file under $XDG_DATA_HOME/lanyard) for hosts without a desktop keyring, \
            and moving slots between backends. Passphrases come from the terminal, LANYARD_PASSPHRASE_FILE or \
            LANYARD_ASKPASS, never from the command line.
            """,
        examples: [
            CommandExample("lanyard store init", "create the file store on a server (asks for a new passphrase twice)"),
            CommandExample("lanyard store unlock", "open it for [store] unlock-cache seconds"),
            CommandExample("lanyard store migrate --to file", "move every slot from the keyring into the file store"),
        ],
        subcommands: [initStore, seal, unlock, lock, status, migrate]
    )

    static func fileStore(_ inv: Invocation) throws -> (EncryptedFileStore, LanyardConfig) {
        let config = try inv.config()
        return (
            EncryptedFileStore(
                paths: inv.paths,
                unlockCacheSeconds: config.unlockCacheSeconds,
                tpm: .resolve(environment: inv.context.environment, configured: config.tpmTCTI)
            ), config
        )
    }
}
