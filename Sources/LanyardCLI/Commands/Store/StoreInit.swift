import Age
import LanyardStore
import LanyardSupport

extension StoreGroupCommand {
    static let initStore = CommandSpec(
        name: "store init",
        summary: "create the encrypted-file store and its identity",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [FlagSpec("no-passphrase", "keep the file-store identity unprotected (unattended hosts)")] + tpmFlags,
        prints: true,
        takesAccount: false,
        details: """
            Creates the store and its identity, protected by a passphrase asked twice on the terminal (or read from \
            LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS), and leaves it unlocked for [store] unlock-cache seconds. \
            --no-passphrase keeps the identity unprotected at mode 0600 and warns what that means. --tpm seals the \
            identity with this machine's TPM 2.0 instead (no passphrase; --tpm-pin adds a PIN the TPM's lockout \
            guards) and encrypts the store to a recovery key as well: a fresh one printed once on stdout (messages go \
            to stderr), or written to --recovery-file, or your own --recovery-recipient; --no-recovery leaves it out. \
            An existing store is never replaced (exit 1).
            """,
        examples: [
            CommandExample("lanyard store init", "create the store, protected by a passphrase"),
            CommandExample(
                "LANYARD_PASSPHRASE_FILE=~/.config/lanyard/pass lanyard store init",
                "take the passphrase from a file (scripts)"
            ),
            CommandExample(
                "lanyard store init --no-passphrase",
                "an unattended host: no passphrase, the identity kept at 0600"
            ),
            CommandExample(
                "lanyard store init --tpm --recovery-file /media/usb/lanyard-recovery.txt",
                "seal the identity with the TPM; the recovery key goes to a USB stick"
            ),
            CommandExample(
                "lanyard store init --tpm --recovery-recipient "
                    + "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p",
                "seal with the TPM; your own age key can recover the store"
            ),
        ]
    ) { inv in
        let (file, _) = try fileStore(inv)
        let tpm = inv.args.has("tpm")
        let protect = !inv.args.has("no-passphrase")
        if tpm && !protect {
            throw UsageError(message: "--tpm and --no-passphrase exclude each other", command: inv.spec.name)
        }
        try checkTPMFlags(inv, tpm: tpm)
        if file.isInitialized { throw StoreError.io(path: file.storePath, detail: "a file store already exists here") }
        if tpm { return try initSealed(inv, file) }
        let passphrase =
            protect
            ? try PassphraseReader(environment: inv.context.environment)
                .read(prompt: "New passphrase for the Lanyard file store: ", confirm: true) : nil
        let unlocked = try file.initialize(passphrase: passphrase)
        inv.emit(
            StoreInitView(
                store: file.storePath,
                passphrase: protect,
                unlocked: unlocked,
                tpm: false,
                recovery: [],
                recoveryFile: nil
            )
        ) {
            inv.stdout.line("Created the encrypted file store at \(file.storePath).")
            if !unlocked, let reason = EncryptedFileStore.cacheUnavailableReason {
                inv.stderr.line(
                    inv.errorStyle.yellow("warning: ")
                        + "the kernel keyring is unavailable here (\(reason)), so the store "
                        + "cannot stay unlocked: set LANYARD_PASSPHRASE_FILE "
                        + "or LANYARD_ASKPASS so each command can open it."
                )
            }
            if !protect {
                inv.stderr.line(
                    inv.errorStyle.yellow("warning: ")
                        + "the store's identity is kept unprotected in \(file.plainIdentityPath) (mode 0600)."
                )
                inv.stderr.line(
                    "Anyone who can read your files (backups, root, a stolen disk) "
                        + "can read every credential in the store."
                )
            }
        }
        return .ok
    }

    /// `store init --tpm`.
    private static func initSealed(_ inv: Invocation, _ file: EncryptedFileStore) throws -> ExitStatus {
        let pin = try newTPMPIN(inv)
        let recovery = try RecoveryChoice(inv)
        try recovery.writeFile(inv, storePath: file.storePath)
        let unlocked: Bool
        do { unlocked = try file.initializeSealed(pin: pin, recovery: recovery.recipients) } catch {
            recovery.removeFile()
            throw error
        }
        inv.emit(
            StoreInitView(
                store: file.storePath,
                passphrase: false,
                unlocked: unlocked,
                tpm: true,
                recovery: recovery.recipients.map(\.string),
                recoveryFile: recovery.file
            )
        ) {
            inv.stderr.line(
                "Created the encrypted file store at \(file.storePath), its identity sealed by the TPM "
                    + "at \(file.tpm)\(pin == nil ? "" : " with a PIN")."
            )
            recovery.report(inv, storePath: file.storePath)
        }
        return .ok
    }
}

/// `store init --json`.
struct StoreInitView: JSONView {
    static let keys = ["store", "passphrase", "unlocked", "tpm", "recovery", "recovery_file"]
    static let optionalKeys: Set<String> = ["recovery_file"]
    let store: String
    let passphrase: Bool
    /// Whether the new store stays unlocked (the kernel keyring holds its identity).
    let unlocked: Bool
    /// Whether the identity is sealed by the TPM.
    let tpm: Bool
    /// The recovery recipients (`age1…`, public keys) the store is encrypted to besides its own.
    let recovery: [String]
    /// Where the new recovery key was written, when it was.
    let recoveryFile: String?
    var json: JSONValue {
        JSONValue.object([
            "store": .string(store), "passphrase": .bool(passphrase), "unlocked": .bool(unlocked), "tpm": .bool(tpm),
            "recovery": .array(recovery.map(JSONValue.string)), "recovery_file": .optional(recoveryFile),
        ]).droppingNulls
    }
}
