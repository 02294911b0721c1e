import Age
import FoundationEssentials
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport

extension BundleCommands {
    static let `import` = CommandSpec(
        name: "import",
        summary: "restore slots from an export bundle",
        arguments: "FILE",
        minArguments: 1,
        maxArguments: 1,
        flags: [
            FlagSpec("rename", value: "OLD=NEW", "import the bundle's slot OLD as NEW (repeatable)"),
            FlagSpec(
                "identity",
                short: "i",
                value: "FILE",
                "an age identity file, for bundles exported with --recipient"
            ),
            FlagSpec("yes", short: "y", "overwrite existing slots without asking"),
        ],
        prints: true,
        takesAccount: false,
        details: """
            Decrypts and checks the whole bundle before writing anything; \
            a damaged or tampered bundle changes nothing. \
            Existing slots keep their backend; new slots go to the \
            backend new sign-ins use. Overwriting an existing slot \
            asks on a terminal and, without a terminal, needs --yes.
            """,
        examples: [
            CommandExample("lanyard import slots.age", "restore every slot in the bundle (asks before overwriting)"),
            CommandExample(
                "lanyard import work.age --identity ~/.config/age/key.txt --rename work=work-laptop",
                "open with an age identity and import under another name"
            ),
        ]
    ) { inv in
        let source = inv.args.positionals[0]
        let path = source.hasPrefix("/") ? source : inv.context.workingDirectory + "/" + source
        let renames = try parseRenames(inv)
        guard let file = try SecureFiles.read(path) else {
            throw BundleError(code: .bundleMissing, message: "no bundle at \(source)")
        }

        let identities: [any Identity]
        var passphraseSource: String?
        if let identityFile = inv.args.value("identity") {
            let identityPath =
                identityFile.hasPrefix("/") ? identityFile : inv.context.workingDirectory + "/" + identityFile
            guard let text = FileManager.default.contents(atPath: identityPath) else {
                throw UsageError(message: "cannot read the identity file \(identityFile)", command: "import")
            }
            do { identities = try Age.parseIdentityFile(String(decoding: text, as: UTF8.self)) } catch {
                throw UsageError(
                    message: "\(identityFile) is not an age identity file: \(error.userFacingDescription)",
                    command: "import"
                )
            }
        } else {
            let reader = PassphraseReader(environment: inv.context.environment)
            passphraseSource = reader.unattendedSource
            let passphrase = try reader.read(prompt: "Passphrase for \(source): ")
            do { identities = [try ScryptIdentity(passphrase: passphrase)] } catch {
                throw BundleError(
                    code: .wrongPassphrase,
                    message: "cannot use that passphrase: \(error.userFacingDescription)"
                )
            }
        }
        let bundle = try ExportBundle.open(
            file,
            with: identities,
            source: source,
            identityFile: inv.args.value("identity"),
            passphraseSource: passphraseSource
        )

        // Everything is checked before anything is written.
        try ExportBundle.check(bundle.slots, knownProviders: Set(try inv.config().providers.keys), source: source)
        for old in renames.keys where bundle.slots[old] == nil {
            throw UsageError(
                message: "--rename \(old.name)=…: the bundle has no slot \(old.name) "
                    + "(it has \(bundle.slots.keys.sorted().map(\.name).joined(separator: ", ")))",
                command: "import"
            )
        }
        var incoming: [Slot: ExportBundle.Entry] = [:]
        for (slot, entry) in bundle.slots {
            let target = renames[slot] ?? slot
            guard incoming[target] == nil else {
                throw UsageError(
                    message: "two bundle slots would both be imported as \(target.name); use --rename",
                    command: "import"
                )
            }
            incoming[target] = entry
        }
        let document = try inv.registry.load()
        let existing = incoming.keys.filter { document.slots[$0] != nil }.sorted()
        if !existing.isEmpty && !inv.args.has("yes") {
            let list = existing.map(\.name).joined(separator: ", ")
            guard inv.context.stdinIsTTY else {
                throw UsageError(
                    message: "refusing to overwrite existing slot\(existing.count == 1 ? "" : "s") "
                        + "\(list) without --yes (no terminal to ask)",
                    command: "import"
                )
            }
            guard
                inv.confirm(
                    "Overwrite the existing slot\(existing.count == 1 ? "" : "s") "
                        + "\(list) with the bundle's credentials?"
                )
            else {
                inv.stderr.line("Nothing imported.")
                return .failure  // a "no" is an answer, not an interruption (130 is for Ctrl-C)
            }
        }
        let imported = try inv.accounts().importSlots(incoming, source: source)
        inv.emit(ImportView(file: path, exportedAt: bundle.exportedAt, slots: imported)) {
            for item in imported {
                inv.stdout.line(
                    "\(item.replaced ? "Replaced" : "Imported") \(item.slot.name) (\(item.backend.displayName))."
                )
            }
        }
        return .ok
    }

    static func parseRenames(_ inv: Invocation) throws -> [Slot: Slot] {
        var renames: [Slot: Slot] = [:]
        for raw in inv.args.repeated("rename") {
            let parts = raw.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2 else {
                throw UsageError(message: "--rename needs OLD=NEW, got \"\(raw)\"", command: "import")
            }
            let old = try SlotCommands.parseSlot(parts[0], inv)
            let new = try SlotCommands.parseSlot(parts[1], inv)
            guard renames[old] == nil else {
                throw UsageError(message: "--rename \(old.name) is given twice", command: "import")
            }
            renames[old] = new
        }
        return renames
    }
}

/// `import --json`.
struct ImportView: JSONView {
    static let keys = ["file", "exported_at", "slots"]
    let file: String
    let exportedAt: Date?
    let slots: [ImportedSlot]
    var json: JSONValue {
        .object([
            "file": .string(file), "exported_at": .date(exportedAt),
            "slots": .array(
                slots.map {
                    .object([
                        "slot": .string($0.slot.name), "backend": .string($0.backend.rawValue),
                        "replaced": .bool($0.replaced),
                    ])
                }
            ),
        ])
    }
}
