import FoundationEssentials
import Glibc
import LanyardCore
import LanyardStore

enum StoreGroupCommand {
    static let store = CommandSpec(
        name: "store", summary: "set up, unlock, lock or migrate credential stores",
        arguments: "init|unlock|lock|status|migrate [SLOT…]", minArguments: 1, maxArguments: 1000,
        flags: [
            FlagSpec("no-passphrase", "init: keep the file-store identity unprotected (unattended hosts)"),
            FlagSpec("to", value: "BACKEND", choices: BackendKind.allCases.map(\.rawValue), "migrate: secret-service or file"),
            FlagSpec("dry-run", "migrate: show what would move"),
        ],
        prints: true, takesAccount: false,
        details: """
        init creates the encrypted-file store (asks for a passphrase); unlock caches the unlocked identity in the kernel \\
        keyring for [store] unlock-cache seconds; lock forgets it; migrate copies slots to another backend, reads them back \\
        and compares, then deletes the source copy. Passphrases come from the terminal, LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS.
        """, subcommands: ["init", "unlock", "lock", "status", "migrate"]) { inv in
        let sub = inv.args.positionals[0]
        let rest = Array(inv.args.positionals.dropFirst())
        if sub != "migrate" && !rest.isEmpty {
            throw UsageError(message: "unexpected argument \"\(rest[0])\": usage: \(inv.spec.usage)", command: "store")
        }
        let config = try inv.config()
        let file = EncryptedFileStore(paths: inv.paths, unlockCacheSeconds: config.unlockCacheSeconds)
        switch sub {
        case "init":
            let protect = !inv.args.has("no-passphrase")
            if file.isInitialized { throw StoreError.io(path: file.storePath, detail: "a file store already exists here") }
            let passphrase = protect ? try PassphraseReader(environment: inv.context.environment)
                .read(prompt: "New passphrase for the Lanyard file store: ", confirm: true) : nil
            let unlocked = try file.initialize(passphrase: passphrase)
            inv.emit(.object(["store": .string(file.storePath), "passphrase": .bool(protect), "unlocked": .bool(unlocked)])) {
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
        case "unlock":
            guard file.isPassphraseProtected else {
                if !file.isInitialized { throw StoreError.unavailable(backend: EncryptedFileStore.backendName, hint: "create one with `lanyard store init`") }
                inv.emit(.object(["unlocked": .bool(true), "passphrase": .bool(false)])) { inv.stdout.line("This store has no passphrase; nothing to unlock.") }
                return .ok
            }
            let reader = PassphraseReader(environment: inv.context.environment)
            // On a terminal a mistyped passphrase gets two more tries; a file or askpass gives the same one again.
            try file.unlock(tries: inv.mayAskForPassphrase ? Invocation.passphraseTries : 1) { attempt in
                try reader.read(prompt: attempt == 1 ? "Passphrase for the Lanyard file store: " : "Wrong passphrase; try again: ")
            }
            inv.emit(.object(["unlocked": .bool(true), "cache_seconds": .number(config.unlockCacheSeconds)])) {
                inv.stdout.line("Unlocked for \(RelativeTime.span(config.unlockCacheSeconds)) (`lanyard store lock` locks it now).")
            }
        case "lock":
            let was = file.lock()
            inv.emit(.object(["locked": .bool(true), "was_unlocked": .bool(was)])) {
                inv.stdout.line(was ? "Locked the file store." : "The file store was not unlocked.")
            }
        case "status":
            let health = file.health()
            inv.emit(JSONValue.object([
                "store": .string(file.storePath), "initialized": .bool(file.isInitialized), "passphrase": .bool(file.isPassphraseProtected),
                "locked": .bool(health.locked), "problem": .optional(health.problem),
            ]).droppingNulls) {
                if !file.isInitialized { inv.stdout.line("No file store (create one with `lanyard store init`).") } else {
                    inv.stdout.line("\(file.storePath): \(health.locked ? "locked" : "unlocked")\(file.isPassphraseProtected ? "" : " (no passphrase)")")
                }
            }
        default:
            guard let raw = inv.args.value("to"), let target = BackendKind(rawValue: raw) else {
                throw UsageError(message: "migrate needs --to secret-service or --to file", command: "store")
            }
            let slots = try rest.map { try SlotCommands.parseSlot($0, inv) }
            func describe(_ step: MigrationStep) -> String {
                let verb = ["moved": "moved", "already-there": "already in", "registry-only": "moved (no stored credential)",
                            "would-move": "would move"][step.outcome] ?? step.outcome
                return "\(step.slot.name): \(verb) \(step.outcome == "already-there" ? "" : "\(step.from.displayName) → ")\(step.to.displayName)"
            }
            // Progress goes out as each slot lands, so an interrupted migration shows how far it got.
            let steps = try inv.accounts().migrate(to: target, slots: slots, dryRun: inv.args.has("dry-run")) { step in
                if !inv.json { inv.stdout.line("\(describe(step))") }
            }
            inv.emit(.object(["steps": .array(steps.map {
                .object(["slot": .string($0.slot.name), "from": .string($0.from.rawValue), "to": .string($0.to.rawValue),
                         "outcome": .string($0.outcome)])
            })])) {
                if steps.isEmpty { inv.stdout.line("No slots to migrate.") }
                for step in steps where step.outcome == "already-there" || step.outcome == "would-move" { inv.stdout.line("\(describe(step))") }
            }
        }
        return .ok
    }
}
