import LanyardCore
import LanyardStore
import LanyardSupport

extension StoreGroupCommand {
    static let unlock = CommandSpec(
        name: "store unlock",
        summary: "unlock the file store for [store] unlock-cache seconds",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: true,
        takesAccount: false,
        details: """
            Asks for the passphrase, runs scrypt once and caches the unlocked identity in the kernel keyring for \
            [store] unlock-cache seconds, so the commands that follow need no passphrase. A wrong passphrase changes \
            nothing (exit 1). A store sealed by the TPM is unsealed now (asking for its PIN, once, when it has one; a \
            wrong PIN exits 5 and says how many tries the TPM has left).
            """,
        examples: [
            CommandExample("lanyard store unlock", "unlock before a session of work"),
            CommandExample(
                "LANYARD_ASKPASS=/usr/bin/ssh-askpass lanyard store unlock",
                "ask through a graphical prompt"
            ),
        ]
    ) { inv in
        let (file, config) = try fileStore(inv)
        if file.isSealed {
            let pin =
                file.needsTPMPIN
                ? try PassphraseReader(environment: inv.context.environment)
                    .read(prompt: "TPM PIN for the Lanyard file store: ") : ""
            try file.unlock(passphrase: pin)
            inv.emit(StoreUnlockView.unlocked(cacheSeconds: config.unlockCacheSeconds)) {
                inv.stdout.line(
                    "Unsealed by the TPM; unlocked for \(RelativeTime.span(config.unlockCacheSeconds)) "
                        + "(`lanyard store lock` locks it now)."
                )
            }
            return .ok
        }
        guard file.isPassphraseProtected else {
            if !file.isInitialized {
                throw StoreError.unavailable(
                    backend: EncryptedFileStore.backendName,
                    hint: "create one with `lanyard store init`"
                )
            }
            inv.emit(StoreUnlockView.noPassphrase) {
                inv.stdout.line("This store has no passphrase; nothing to unlock.")
            }
            return .ok
        }
        let reader = PassphraseReader(environment: inv.context.environment)
        // On a terminal a mistyped passphrase gets two more tries; a file or askpass gives the same one again.
        try reader.namingSource {
            try file.unlock(tries: inv.mayAskForPassphrase ? Invocation.passphraseTries : 1) { attempt in
                try reader.read(
                    prompt: attempt == 1 ? "Passphrase for the Lanyard file store: " : "Wrong passphrase; try again: "
                )
            }
        }
        inv.emit(StoreUnlockView.unlocked(cacheSeconds: config.unlockCacheSeconds)) {
            inv.stdout.line(
                "Unlocked for \(RelativeTime.span(config.unlockCacheSeconds)) (`lanyard store lock` locks it now)."
            )
        }
        return .ok
    }
}

/// `store unlock --json`: `{"unlocked", "cache_seconds"}`, or `{"unlocked", "passphrase": false}`
/// for a store without a passphrase.
enum StoreUnlockView: JSONView {
    case unlocked(cacheSeconds: Double)
    case noPassphrase

    static let keys = ["unlocked", "cache_seconds", "passphrase"]
    static let optionalKeys: Set<String> = ["cache_seconds", "passphrase"]
    var json: JSONValue {
        switch self {
        case .unlocked(let seconds): .object(["unlocked": .bool(true), "cache_seconds": .number(seconds)])
        case .noPassphrase: .object(["unlocked": .bool(true), "passphrase": .bool(false)])
        }
    }
}
