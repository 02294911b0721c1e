import Age
import FoundationEssentials
import LanyardCore
import LanyardStore
import LanyardSupport

/// The plaintext of an export bundle (layout in docs/store-format.md, "Export bundles"):
/// `{"version": 1, "exported_at": RFC3339, "slots": {SLOT: {"credential": CREDENTIAL, "record": SLOT_RECORD}}}`.
package struct ExportBundle: JSONDocument, Equatable, Sendable {
    package static let currentVersion = 1

    package struct Entry: Equatable, Sendable {
        package var credential: Credential
        package var record: SlotRecord
        package init(credential: Credential, record: SlotRecord) {
            self.credential = credential
            self.record = record
        }
    }

    package var exportedAt: Date
    package var slots: [Slot: Entry]

    package init(exportedAt: Date, slots: [Slot: Entry]) {
        self.exportedAt = exportedAt
        self.slots = slots
    }

    package init(json: JSONFields) throws(JSONShapeError) {
        let version = try json.int("version")
        guard version == Self.currentVersion else {
            throw JSONShapeError(
                path: ".version",
                problem: "is \(version): not supported (this Lanyard reads version \(Self.currentVersion))"
            )
        }
        guard let date = try json.optionalDate("exported_at") else {
            throw JSONShapeError(path: ".exported_at", problem: "is missing")
        }
        exportedAt = date
        slots = [:]
        for (name, value) in try json.object("slots").object {
            guard let slot = try? Slot(name) else {
                throw JSONShapeError(path: ".slots", problem: "has an invalid slot name")
            }
            let entry = try JSONFields(value, path: ".slots." + name)
            let credential = try Credential(json: try entry.object("credential"))
            let record = try SlotRecord(json: try entry.object("record"))
            // A bundle is a file from outside: its account names must be text a terminal can show.
            _ = try credential.account.checkedOutsideText(place: ".slots." + name + ".credential.account")
            _ = try record.account.checkedOutsideText(place: ".slots." + name + ".record.account")
            slots[slot] = Entry(credential: credential, record: record)
        }
    }

    package var json: JSONValue {
        var object: [String: JSONValue] = [:]
        for (slot, entry) in slots {
            object[slot.name] = .object(["credential": entry.credential.json, "record": entry.record.json])
        }
        return .object([
            "version": .number(Double(Self.currentVersion)), "exported_at": .date(exportedAt), "slots": .object(object),
        ])
    }

    /// Encrypts the bundle to `recipients` (one scrypt recipient, or X25519 recipients).
    package func seal(to recipients: [any Recipient]) throws -> Data {
        do { return try Age.encrypt(jsonData(pretty: true), to: recipients) } catch {
            throw BundleError(
                code: .bundleEncrypt,
                message: "cannot encrypt the bundle: \(error.userFacingDescription)"
            )
        }
    }

    /// Decrypts and decodes a bundle; anything short of a whole, authentic, well-formed bundle throws.
    /// - Parameter identityFile: the `--identity` file `identities` came from, when they did
    ///   (for the message when none of them opens the bundle); nil for a passphrase.
    /// - Parameter passphraseSource: where the passphrase came from when not the terminal
    ///   (`LANYARD_PASSPHRASE_FILE PATH`), named when it is wrong.
    package static func open(
        _ file: Data,
        with identities: [any Identity],
        source: String,
        identityFile: String? = nil,
        passphraseSource: String? = nil
    ) throws -> ExportBundle {
        let plain: Data
        do { plain = try Age.decrypt(file, with: identities) } catch .incorrectPassphrase {
            throw BundleError(
                code: .wrongPassphrase,
                message: "wrong passphrase for \(TerminalText.escaped(source))"
                    + (passphraseSource.map { " (from \($0))" } ?? "")
            )
        } catch .noIdentityMatched(let types) {
            let bundle = TerminalText.escaped(source)
            if types.contains("scrypt") {
                throw BundleError(
                    code: .bundleNoIdentity,
                    message: "\(bundle) is passphrase-encrypted: leave out --identity"
                )
            }
            if let identityFile {
                throw BundleError(
                    code: .bundleNoIdentity,
                    message: "the identity in \(TerminalText.escaped(identityFile)) does not open \(bundle)"
                        + (types.contains("X25519") ? " (it is encrypted to other X25519 recipients)" : "")
                )
            }
            let hint = types.contains("X25519") ? " (it is encrypted to X25519 recipients: pass --identity FILE)" : ""
            throw BundleError(code: .bundleNoIdentity, message: "no identity opens \(bundle)\(hint)")
        } catch {
            throw BundleError(
                code: .bundleCorrupt,
                message: "\(TerminalText.escaped(source)) is damaged, truncated or was tampered "
                    + "with (\(error.userFacingDescription)); nothing was imported"
            )
        }
        do { return try decode(plain, source: source) } catch {
            throw BundleError(
                code: .bundleCorrupt,
                message: "\(TerminalText.escaped(source)) is not a valid Lanyard bundle: "
                    + "\(error.detail); nothing was imported"
            )
        }
    }
}

extension ExportBundle {
    /// Refuses entries that cannot be imported as they are, before anything is written: none at
    /// all (`bundle_empty`), a record whose provider is not its credential's
    /// (`bundle_provider_mismatch`), or a provider config.ini does not configure
    /// (`bundle_unknown_provider`). The error names the first slot at fault, in name order.
    /// - Parameters:
    ///   - entries: by the slot name to report (the bundle's own, or the name it is imported as).
    ///   - source: the bundle, as the user named it.
    package static func check(_ entries: [Slot: Entry], knownProviders: Set<String>, source: String) throws(BundleError)
    {
        let bundle = TerminalText.escaped(source)
        guard !entries.isEmpty else {
            throw BundleError(code: .bundleEmpty, message: "\(bundle) holds no slots; nothing was imported")
        }
        for (slot, entry) in entries.sorted(by: { $0.key < $1.key }) {
            let recordProvider = entry.record.provider
            let provider = entry.credential.provider
            guard recordProvider == provider else {
                throw BundleError(
                    code: .bundleProviderMismatch,
                    message: "slot \(slot.name) of \(bundle): its record names provider "
                        + "\(quoted(recordProvider)) but its credential is "
                        + "for \(quoted(provider)); nothing was imported",
                    slot: slot.name
                )
            }
            guard knownProviders.contains(provider) else {
                throw BundleError(
                    code: .bundleUnknownProvider,
                    message: "slot \(slot.name) of \(bundle) is for provider \(quoted(provider)), "
                        + "which config.ini does not configure (configured: "
                        + "\(knownProviders.sorted().joined(separator: ", "))); nothing was imported",
                    slot: slot.name
                )
            }
        }
    }

    /// Text from the bundle, quoted and escaped for a message (at most 64 characters of it).
    private static func quoted(_ text: String) -> String {
        let shown = text.count > 64 ? String(text.prefix(64)) + "…" : text
        return "\"" + TerminalText.escaped(shown) + "\""
    }
}

/// A bundle problem (exit 1). Messages never contain secrets.
package struct BundleError: LanyardError, Equatable {
    package let code: ErrorCode
    package let message: String
    /// The slot at fault, when the problem is one slot's.
    package let slot: String?
    package init(code: ErrorCode, message: String, slot: String? = nil) {
        self.code = code
        self.message = message
        self.slot = slot
    }
    package var errorDescription: String? { message }
}
