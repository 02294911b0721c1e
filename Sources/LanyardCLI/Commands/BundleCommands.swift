import Age
import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore

enum BundleCommands {
    static let export = CommandSpec(
        name: "export", summary: "write slots' credentials to an age-encrypted bundle", arguments: "[SLOT…]",
        minArguments: 0, maxArguments: 1000,
        flags: [
            FlagSpec("to", value: "FILE", "the bundle to write (required; mode 0600)"),
            FlagSpec("recipient", short: "r", value: "AGE1…", "encrypt to this X25519 package key instead of a passphrase (repeatable)"),
            FlagSpec("force", "replace FILE when it exists"),
        ],
        prints: true, takesAccount: false,
        details: """
        Exports the named slots (every slot with a stored credential by default) with their registry metadata. \
        Without --recipient the bundle is encrypted with a passphrase (asked twice on the terminal, or from \
        LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS). Stock `age -d` opens it; layout in docs/store-format.md.
        """,
        examples: [
            CommandExample("lanyard export --to slots.age", "every slot with a credential, protected by a passphrase"),
            CommandExample("lanyard export work --to work.age -r age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p", "one slot, encrypted to another machine's age key"),
        ]) { inv in
        guard let target = inv.args.value("to"), !target.isEmpty else {
            throw UsageError(message: "export needs --to FILE", command: "export")
        }
        let path = target.hasPrefix("/") ? target : inv.context.workingDirectory + "/" + target
        if !inv.args.has("force"), exists(path) {
            throw UsageError(message: "\(target) exists; pass --force to replace it", command: "export")
        }
        let recipients: [any Recipient]
        let x25519 = inv.args.repeated("recipient")
        if !x25519.isEmpty {
            recipients = try x25519.map { raw in
                do { return try X25519Recipient(raw) } catch {
                    throw UsageError(message: "--recipient \(raw) is not an age X25519 package key: \(error.userFacingDescription)", command: "export")
                }
            }
        } else {
            recipients = []
        }

        let named = try inv.args.positionals.map { try SlotCommands.parseSlot($0, inv) }
        let (entries, skipped) = try inv.accounts().exportEntries(named: named)
        let sealRecipients: [any Recipient]
        if recipients.isEmpty {
            let passphrase = try PassphraseReader(environment: inv.context.environment)
                .read(prompt: "Passphrase for the export bundle: ", confirm: true)
            do { sealRecipients = [try ScryptRecipient(passphrase: passphrase)] } catch {
                throw BundleError(code: "bundle_encrypt", message: "cannot use that passphrase: \(error.userFacingDescription)")
            }
        } else {
            sealRecipients = recipients
        }
        let bundle = ExportBundle(exportedAt: inv.now, slots: entries)
        let sealed = try bundle.seal(to: sealRecipients)
        if !inv.args.has("force"), exists(path) {
            throw UsageError(message: "\(target) exists; pass --force to replace it", command: "export")
        }
        try SecureFiles.atomicWrite(sealed, to: path)
        let names = entries.keys.sorted().map(\.name)
        inv.emit(.object([
            "file": .string(path), "slots": .array(names.map(JSONValue.string)),
            "skipped": .array(skipped.map { .string($0.name) }),
            "encryption": .string(recipients.isEmpty ? "passphrase" : "x25519"),
        ])) {
            for slot in skipped { inv.stderr.line("lanyard: skipped \(slot.name) (no stored credential)") }
            inv.stdout.line("Exported \(names.count) slot\(names.count == 1 ? "" : "s") (\(names.joined(separator: ", "))) to \(target).")
        }
        return .ok
    }

    static let `import` = CommandSpec(
        name: "import", summary: "restore slots from an export bundle", arguments: "FILE",
        minArguments: 1, maxArguments: 1,
        flags: [
            FlagSpec("rename", value: "OLD=NEW", "import the bundle's slot OLD as NEW (repeatable)"),
            FlagSpec("identity", short: "i", value: "FILE", "an age identity file, for bundles exported with --recipient"),
            FlagSpec("yes", short: "y", "overwrite existing slots without asking"),
        ],
        prints: true, takesAccount: false,
        details: """
        Decrypts and checks the whole bundle before writing anything; a damaged or tampered bundle changes nothing. \
        Existing slots keep their backend; new slots go to the backend new sign-ins use. Overwriting an existing slot \
        asks on a terminal and, without a terminal, needs --yes.
        """,
        examples: [
            CommandExample("lanyard import slots.age", "restore every slot in the bundle (asks before overwriting)"),
            CommandExample("lanyard import work.age --identity ~/.config/age/key.txt --rename work=work-laptop", "open with an age identity and import under another name"),
        ]) { inv in
        let source = inv.args.positionals[0]
        let path = source.hasPrefix("/") ? source : inv.context.workingDirectory + "/" + source
        let renames = try parseRenames(inv)
        guard let file = try SecureFiles.read(path) else { throw BundleError(code: "bundle_missing", message: "no bundle at \(source)") }

        let identities: [any Identity]
        if let identityFile = inv.args.value("identity") {
            let identityPath = identityFile.hasPrefix("/") ? identityFile : inv.context.workingDirectory + "/" + identityFile
            guard let text = FileManager.default.contents(atPath: identityPath) else {
                throw UsageError(message: "cannot read the identity file \(identityFile)", command: "import")
            }
            do { identities = try Age.parseIdentityFile(String(decoding: text, as: UTF8.self)) } catch {
                throw UsageError(message: "\(identityFile) is not an age identity file: \(error.userFacingDescription)", command: "import")
            }
        } else {
            let passphrase = try PassphraseReader(environment: inv.context.environment).read(prompt: "Passphrase for \(source): ")
            do { identities = [try ScryptIdentity(passphrase: passphrase)] } catch {
                throw BundleError(code: "wrong_passphrase", message: "cannot use that passphrase: \(error.userFacingDescription)")
            }
        }
        let bundle = try ExportBundle.open(file, with: identities, source: source, identityFile: inv.args.value("identity"))

        // Everything is checked before anything is written.
        try ExportBundle.check(bundle.slots, knownProviders: Set(try inv.config().providers.keys), source: source)
        for old in renames.keys where bundle.slots[old] == nil {
            throw UsageError(message: "--rename \(old.name)=…: the bundle has no slot \(old.name) (it has \(bundle.slots.keys.sorted().map(\.name).joined(separator: ", ")))", command: "import")
        }
        var incoming: [Slot: ExportBundle.Entry] = [:]
        for (slot, entry) in bundle.slots {
            let target = renames[slot] ?? slot
            guard incoming[target] == nil else {
                throw UsageError(message: "two bundle slots would both be imported as \(target.name); use --rename", command: "import")
            }
            incoming[target] = entry
        }
        let document = try inv.registry.load()
        let existing = incoming.keys.filter { document.slots[$0] != nil }.sorted()
        if !existing.isEmpty && !inv.args.has("yes") {
            let list = existing.map(\.name).joined(separator: ", ")
            guard inv.context.stdinIsTTY else {
                throw UsageError(message: "refusing to overwrite existing slot\(existing.count == 1 ? "" : "s") \(list) without --yes (no terminal to ask)", command: "import")
            }
            guard inv.confirm("Overwrite the existing slot\(existing.count == 1 ? "" : "s") \(list) with the bundle's credentials?") else {
                inv.stderr.line("Nothing imported.")
                return .failure  // a "no" is an answer, not an interruption (130 is for Ctrl-C)
            }
        }
        let imported = try inv.accounts().importSlots(incoming, source: source)
        inv.emit(.object(["file": .string(path), "exported_at": .date(bundle.exportedAt), "slots": .array(imported.map {
            .object(["slot": .string($0.slot.name), "backend": .string($0.backend.rawValue), "replaced": .bool($0.replaced)])
        })])) {
            for item in imported {
                inv.stdout.line("\(item.replaced ? "Replaced" : "Imported") \(item.slot.name) (\(item.backend.displayName)).")
            }
        }
        return .ok
    }

    static func parseRenames(_ inv: Invocation) throws -> [Slot: Slot] {
        var renames: [Slot: Slot] = [:]
        for raw in inv.args.repeated("rename") {
            let parts = raw.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2 else { throw UsageError(message: "--rename needs OLD=NEW, got \"\(raw)\"", command: "import") }
            let old = try SlotCommands.parseSlot(parts[0], inv), new = try SlotCommands.parseSlot(parts[1], inv)
            guard renames[old] == nil else { throw UsageError(message: "--rename \(old.name) is given twice", command: "import") }
            renames[old] = new
        }
        return renames
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }
}
