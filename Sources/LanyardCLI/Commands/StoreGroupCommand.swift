import FoundationEssentials
import Glibc
import LanyardCore
import LanyardStore

/// `lanyard store init|unlock|lock|status|migrate`: the encrypted-file store, and moving slots
/// between backends.
enum StoreGroupCommand {
    static let store = CommandSpec(
        group: "store", summary: "set up, unlock, lock or migrate credential stores",
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
        subcommands: [initStore, unlock, lock, status, migrate])

    static func fileStore(_ inv: Invocation) throws -> (EncryptedFileStore, LanyardConfig) {
        let config = try inv.config()
        return (EncryptedFileStore(paths: inv.paths, unlockCacheSeconds: config.unlockCacheSeconds), config)
    }

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
        return .ok
    }

    static let unlock = CommandSpec(
        name: "store unlock", summary: "unlock the file store for [store] unlock-cache seconds", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: false,
        details: """
        Asks for the passphrase, runs scrypt once and caches the unlocked identity in the kernel keyring for \
        [store] unlock-cache seconds, so the commands that follow need no passphrase. A wrong passphrase changes \
        nothing (exit 1).
        """,
        examples: [
            CommandExample("lanyard store unlock", "unlock before a session of work"),
            CommandExample("LANYARD_ASKPASS=/usr/bin/ssh-askpass lanyard store unlock", "ask through a graphical prompt"),
        ]) { inv in
        let (file, config) = try fileStore(inv)
        guard file.isPassphraseProtected else {
            if !file.isInitialized { throw StoreError.unavailable(backend: EncryptedFileStore.backendName, hint: "create one with `lanyard store init`") }
            inv.emit(.object(["unlocked": .bool(true), "passphrase": .bool(false)])) { inv.stdout.line("This store has no passphrase; nothing to unlock.") }
            return .ok
        }
        let passphrase = try PassphraseReader(environment: inv.context.environment).read(prompt: "Passphrase for the Lanyard file store: ")
        try file.unlock(passphrase: passphrase)
        inv.emit(.object(["unlocked": .bool(true), "cache_seconds": .number(config.unlockCacheSeconds)])) {
            inv.stdout.line("Unlocked for \(RelativeTime.span(config.unlockCacheSeconds)) (`lanyard store lock` locks it now).")
        }
        return .ok
    }

    static let lock = CommandSpec(
        name: "store lock", summary: "forget the unlocked file store now", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: false,
        details: "Removes the cached identity from the kernel keyring; the next command that needs the store asks for the passphrase again.",
        examples: [CommandExample("lanyard store lock", "lock the store before leaving the machine")]) { inv in
        let (file, _) = try fileStore(inv)
        let was = file.lock()
        inv.emit(.object(["locked": .bool(true), "was_unlocked": .bool(was)])) {
            inv.stdout.line(was ? "Locked the file store." : "The file store was not unlocked.")
        }
        return .ok
    }

    static let status = CommandSpec(
        name: "store status", summary: "say whether a file store exists and whether it is locked", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: false,
        details: "Reads the store's files and the kernel keyring only: it never asks for a passphrase.",
        examples: [
            CommandExample("lanyard store status", "is there a store here, and is it unlocked?"),
            CommandExample("lanyard store status --json", "the same for scripts: {\"store\", \"initialized\", \"passphrase\", \"locked\"}"),
        ]) { inv in
        let (file, _) = try fileStore(inv)
        let health = file.health()
        inv.emit(JSONValue.object([
            "store": .string(file.storePath), "initialized": .bool(file.isInitialized), "passphrase": .bool(file.isPassphraseProtected),
            "locked": .bool(health.locked), "problem": .optional(health.problem),
        ]).droppingNulls) {
            if !file.isInitialized { inv.stdout.line("No file store (create one with `lanyard store init`).") } else {
                inv.stdout.line("\(file.storePath): \(health.locked ? "locked" : "unlocked")\(file.isPassphraseProtected ? "" : " (no passphrase)")")
            }
        }
        return .ok
    }

    static let migrate = CommandSpec(
        name: "store migrate", summary: "move slots to another backend (copy, read back, compare, then delete)", arguments: "[SLOT…]",
        minArguments: 0, maxArguments: 1000,
        flags: [
            FlagSpec("to", value: "BACKEND", choices: BackendKind.allCases.map(\.rawValue), "secret-service or file (required)"),
            FlagSpec("dry-run", "show what would move"),
        ],
        prints: true, takesAccount: false,
        details: """
        Moves the named slots (every slot by default) to the backend --to names: each credential is copied, read \
        back and compared, the registry records the new backend, and only then is the source copy deleted. A \
        kill -9 at any point leaves every slot readable from at least one backend. Progress is printed as each \
        slot lands.
        """,
        examples: [
            CommandExample("lanyard store migrate --to file --dry-run", "see what would move into the file store"),
            CommandExample("lanyard store migrate --to file", "move every slot into the file store"),
            CommandExample("lanyard store migrate --to secret-service work", "move one slot into the desktop keyring"),
        ]) { inv in
        guard let raw = inv.args.value("to"), let target = BackendKind(rawValue: raw) else {
            throw UsageError(message: "migrate needs --to secret-service or --to file", command: inv.spec.name)
        }
        let slots = try inv.args.positionals.map { try SlotCommands.parseSlot($0, inv) }
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
        return .ok
    }
}
