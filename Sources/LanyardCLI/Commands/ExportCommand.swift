import Age
import Glibc
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport

extension BundleCommands {
    static let export = CommandSpec(
        name: "export",
        summary: "write slots' credentials to an age-encrypted bundle",
        arguments: "[SLOT…]",
        minArguments: 0,
        maxArguments: 1000,
        flags: [
            FlagSpec("to", value: "FILE", "the bundle to write (required; mode 0600)"),
            FlagSpec(
                "recipient",
                short: "r",
                value: "AGE1…",
                "encrypt to this X25519 public key instead of a passphrase (repeatable)"
            ),
            FlagSpec("force", "replace FILE when it exists"),
        ],
        prints: true,
        takesAccount: false,
        details: """
            Exports the named slots (every slot with a stored credential by default) with their registry metadata. \
            Without --recipient the bundle is encrypted with a passphrase (asked twice on the terminal, or from \
            LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS). Stock `age -d` opens it; layout in docs/store-format.md.
            """,
        examples: [
            CommandExample("lanyard export --to slots.age", "every slot with a credential, protected by a passphrase"),
            CommandExample(
                "lanyard export work --to work.age -r age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p",
                "one slot, encrypted to another machine's age key"
            ),
        ]
    ) { inv in
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
                    throw UsageError(
                        message: "--recipient \(raw) is not an age X25519 public key: \(error.userFacingDescription)",
                        command: "export"
                    )
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
                throw BundleError(
                    code: .bundleEncrypt,
                    message: "cannot use that passphrase: \(error.userFacingDescription)"
                )
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
        inv.emit(
            ExportView(
                file: path,
                slots: names,
                skipped: skipped,
                encryption: recipients.isEmpty ? "passphrase" : "x25519"
            )
        ) {
            for slot in skipped { inv.stderr.line("lanyard: skipped \(slot.name) (no stored credential)") }
            inv.stdout.line(
                "Exported \(names.count) slot\(names.count == 1 ? "" : "s") "
                    + "(\(names.joined(separator: ", "))) to \(target)."
            )
        }
        return .ok
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }
}

/// `export --json`.
struct ExportView: JSONView {
    static let keys = ["file", "slots", "skipped", "encryption"]
    let file: String
    /// The slots written, by name.
    let slots: [String]
    /// The slots left out (no stored credential).
    let skipped: [Slot]
    /// `passphrase` or `x25519`.
    let encryption: String
    var json: JSONValue {
        .object([
            "file": .string(file), "slots": .array(slots.map(JSONValue.string)),
            "skipped": .array(skipped.map { .string($0.name) }), "encryption": .string(encryption),
        ])
    }
}
