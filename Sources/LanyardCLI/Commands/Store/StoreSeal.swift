import Age
import FoundationEssentials
import Glibc
import LanyardCore
import LanyardStore
import LanyardSupport

extension StoreGroupCommand {
    static let seal = CommandSpec(
        name: "store seal",
        summary: "seal an existing file store's identity with the TPM",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: tpmFlags,
        prints: true,
        takesAccount: false,
        details: """
            Converts a passphrase or --no-passphrase file store in \
            place (--tpm is required): its identity is sealed by \
            this machine's TPM 2.0, the store is encrypted again \
            to it and to a recovery key (as for store init --tpm), \
            and identity.age or identity.txt is removed only once the sealed identity has opened the store. A failure \
            changes nothing the store needs; a run killed after the sealed identity landed is finished by running \
            the command again. A passphrase store that is locked asks for its passphrase first.
            """,
        examples: [
            CommandExample(
                "lanyard store seal --tpm --recovery-file /media/usb/lanyard-recovery.txt",
                "seal the identity of an unattended host's store with its TPM"
            ),
            CommandExample("lanyard store seal --tpm --tpm-pin --no-recovery", "seal with a PIN and no recovery key"),
        ]
    ) { inv in
        guard inv.args.has("tpm") else {
            throw UsageError(message: "store seal needs --tpm (the TPM is the only sealer)", command: inv.spec.name)
        }
        let (file, _) = try fileStore(inv)
        try checkTPMFlags(inv, tpm: true, makesRecoveryKey: !file.isSealed)
        guard file.isInitialized else {
            throw StoreError.unavailable(
                backend: EncryptedFileStore.backendName,
                hint: "create one with `lanyard store init --tpm`"
            )
        }
        let finishing = file.isSealed
        // Finishing an interrupted run reuses the recovery recipients identity.tpm already names.
        let pin = finishing ? try existingTPMPIN(inv, file) : try newTPMPIN(inv)
        let recovery = finishing ? RecoveryChoice.none : try RecoveryChoice(inv)
        try recovery.writeFile(inv, storePath: file.storePath)
        let reader = PassphraseReader(environment: inv.context.environment)
        let outcome: EncryptedFileStore.SealOutcome
        do {
            outcome = try reader.namingSource {
                try file.sealInPlace(pin: pin, recovery: recovery.recipients) {
                    try reader.read(prompt: "Passphrase for the Lanyard file store: ")
                }
            }
        } catch {
            recovery.removeFile()
            throw error
        }
        let recipients = ((try? file.sealedIdentity()) ?? nil)?.recoveryRecipients ?? []
        inv.emit(
            StoreSealView(
                store: file.storePath,
                outcome: outcome.rawValue,
                pin: pin != nil,
                recovery: recipients,
                recoveryFile: recovery.file
            )
        ) {
            switch outcome {
            case .sealed:
                inv.stderr.line(
                    "Sealed the file store's identity with the TPM at \(file.tpm)\(pin == nil ? "" : " with a PIN"); "
                        + "the clear identity is gone. Its blocks may survive on the disk: "
                        + "a store that was ever unprotected is "
                        + "only as safe as the disks and backups that held it."
                )
                recovery.report(inv, storePath: file.storePath)
            case .finished:
                inv.stderr.line(
                    "Finished an interrupted `store seal`: the sealed identity "
                        + "opens the store, and the clear identity is gone."
                )
            }
        }
        return .ok
    }

    /// The flags of `store init --tpm` and `store seal --tpm`.
    static let tpmFlags = [
        FlagSpec("tpm", "seal the identity with this machine's TPM 2.0 (no passphrase)"),
        FlagSpec(
            "tpm-pin",
            "with --tpm: also guard it with a PIN (asked twice, or from LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS)"
        ),
        FlagSpec(
            "recovery-file",
            value: "FILE",
            "with --tpm: write the new recovery key to FILE (0600; must not exist) instead of printing it"
        ),
        FlagSpec(
            "recovery-recipient",
            value: "AGE1…",
            "with --tpm: your own age public key recovers the store, instead of a new key (repeatable)"
        ),
        FlagSpec("no-recovery", "with --tpm: no recovery key (a cleared or replaced TPM then loses the store)"),
    ]

    /// Refuses TPM flags without --tpm, and recovery choices that contradict each other.
    /// `makesRecoveryKey`: false when the recovery recipients are already chosen (finishing an
    /// interrupted `store seal`).
    static func checkTPMFlags(_ inv: Invocation, tpm: Bool, makesRecoveryKey: Bool = true) throws {
        let given = ["tpm-pin", "recovery-file", "recovery-recipient", "no-recovery"].filter {
            inv.args.has($0) || inv.args.value($0) != nil || !inv.args.repeated($0).isEmpty
        }
        if !tpm, let first = given.first { throw UsageError(message: "--\(first) needs --tpm", command: inv.spec.name) }
        if inv.args.has("no-recovery"),
            inv.args.value("recovery-file") != nil || !inv.args.repeated("recovery-recipient").isEmpty
        {
            throw UsageError(
                message: "--no-recovery excludes --recovery-file and --recovery-recipient",
                command: inv.spec.name
            )
        }
        // The new key goes to stdout only in human output: a JSON document is for programs and logs.
        if tpm, inv.json, makesRecoveryKey, !inv.args.has("no-recovery"), inv.args.value("recovery-file") == nil,
            inv.args.repeated("recovery-recipient").isEmpty
        {
            throw UsageError(
                message:
                    "with --json, name where the recovery key goes: --recovery-file FILE, --recovery-recipient AGE1… "
                    + "or --no-recovery (a new key is never put in JSON)",
                command: inv.spec.name
            )
        }
    }

    /// The PIN for a new sealed identity with --tpm-pin (asked twice on a terminal), else nil.
    static func newTPMPIN(_ inv: Invocation) throws -> String? {
        guard inv.args.has("tpm-pin") else { return nil }
        return try PassphraseReader(environment: inv.context.environment).read(
            prompt: "New TPM PIN for the Lanyard file store: ",
            confirm: true
        )
    }

    /// The PIN of the sealed identity already there, when it has one.
    static func existingTPMPIN(_ inv: Invocation, _ file: EncryptedFileStore) throws -> String? {
        guard file.needsTPMPIN else { return nil }
        return try PassphraseReader(environment: inv.context.environment).read(
            prompt: "TPM PIN for the Lanyard file store: "
        )
    }
}

/// Where a TPM-sealed store's recovery key goes: a new key printed or written to a file, the
/// user's own recipients, or none.
struct RecoveryChoice {
    /// A new key, when one is made.
    let key: RecoveryKey?
    /// Where the new key is written (absolute), or nil to print it.
    let file: String?
    /// The user's own recipients.
    let own: [X25519Recipient]

    static let none = RecoveryChoice(key: nil, file: nil, own: [])

    private init(key: RecoveryKey?, file: String?, own: [X25519Recipient]) {
        self.key = key
        self.file = file
        self.own = own
    }

    init(_ inv: Invocation) throws {
        own = try inv.args.repeated("recovery-recipient").map { raw in
            do { return try X25519Recipient(raw) } catch {
                throw UsageError(
                    message: "--recovery-recipient \(TerminalText.escaped(raw)) is not an age X25519 public key: "
                        + error.userFacingDescription,
                    command: inv.spec.name
                )
            }
        }
        file = inv.args.value("recovery-file").map { $0.hasPrefix("/") ? $0 : inv.context.workingDirectory + "/" + $0 }
        let wantsKey = !inv.args.has("no-recovery") && (file != nil || own.isEmpty)
        key = wantsKey ? RecoveryKey() : nil
    }

    /// Every recovery recipient the store is encrypted to.
    var recipients: [X25519Recipient] { (key.map { [$0.identity.recipient] } ?? []) + own }

    /// Writes the new key to ``file`` before the store is made (so a path that cannot be written
    /// stops the command before anything changes).
    func writeFile(_ inv: Invocation, storePath: String) throws {
        guard let key, let file else { return }
        try key.write(to: file, storePath: storePath, now: inv.now)
    }

    /// Removes the key ``writeFile`` wrote, when the store it was for was not made.
    func removeFile() {
        if key != nil, let file { unlink(file) }
    }

    /// Prints the new key (stdout: only the key, an age identity file) and what it is for, or
    /// says there is none.
    func report(_ inv: Invocation, storePath: String) {
        let warning = inv.errorStyle.yellow("warning: ")
        if let key, file == nil {
            inv.stdout.raw(key.identityFile(storePath: storePath, now: inv.now))
            inv.stderr.line(
                "Above (on stdout) is the store's recovery key, shown this once: keep it offline (on paper, or in a "
                    + "password manager on another machine). If this machine's TPM is cleared or replaced, "
                    + "`age -d -i RECOVERY-KEY store.age` opens the store. Lanyard keeps no copy."
            )
        } else if key != nil, let file {
            inv.stderr.line(
                "Wrote the store's recovery key to \(file): "
                    + "keep it offline (move it off this machine). If this machine's "
                    + "TPM is cleared or replaced, `age -d -i \(file) store.age` "
                    + "opens the store. Lanyard keeps no copy."
            )
        }
        if !own.isEmpty {
            inv.stderr.line(
                "The store is also encrypted to \(own.map(\.string).joined(separator: ", ")): "
                    + "that identity opens it without the TPM."
            )
        }
        if key == nil && own.isEmpty {
            inv.stderr.line(
                warning + "no recovery key: if this machine's TPM is cleared, replaced or broken, or this home folder "
                    + "moves to another machine, nothing can open the store, and every slot in it must sign in again."
            )
        }
    }
}

/// `store seal --json`.
struct StoreSealView: JSONView {
    static let keys = ["store", "outcome", "pin", "recovery", "recovery_file"]
    static let optionalKeys: Set<String> = ["recovery_file"]
    let store: String
    /// `sealed`, or `finished` (an interrupted seal completed).
    let outcome: String
    let pin: Bool
    /// The recovery recipients (`age1…`) the store is encrypted to.
    let recovery: [String]
    let recoveryFile: String?
    var json: JSONValue {
        JSONValue.object([
            "store": .string(store), "outcome": .string(outcome), "pin": .bool(pin),
            "recovery": .array(recovery.map(JSONValue.string)), "recovery_file": .optional(recoveryFile),
        ]).droppingNulls
    }
}
