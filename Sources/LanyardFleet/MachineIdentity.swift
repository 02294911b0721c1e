import Age
import FoundationEssentials
import LanyardCore
import LanyardStore
import LanyardSupport

/// This machine's keys for its fleet: an X25519 age identity (what shared credentials are
/// encrypted to) and the Ed25519 signing key derived from it (what membership entries and shared
/// credentials are signed with). Created on `fleet init` or `fleet join`, kept in the machine's
/// own credential store (keyring or encrypted file) under an entry of the reserved namespace
/// (``Slot/init(reserved:)``) that no slot name can reach, so it is as protected as the
/// credentials it unlocks.
package struct MachineIdentity: Sendable {
    /// The reserved store entry that holds the identity.
    package static let storeSlot = Slot(reserved: "identity")
    /// The HKDF label of the signing key's derivation (never change it: members are known by it).
    static let signingLabel = "lanyard fleet signing key v1"
    /// The provider name the identity's store entry carries.
    static let provider = "lanyard-fleet"

    package let identity: X25519Identity
    package let signing: Ed25519.SigningKey

    package init(identity: X25519Identity) {
        self.identity = identity
        signing = Ed25519.SigningKey(derivedFrom: identity, label: Self.signingLabel)
    }

    package var recipient: String { identity.recipient.string }
    /// The public signing key, base64.
    package var signingKey: String { Data(signing.publicKey).base64EncodedString() }
    package var fingerprint: String { Self.fingerprint(recipient: recipient, signingKey: signingKey) }

    /// A short, speakable digest of a machine's two public keys for people to compare
    /// (`3F2A-91BC-0D11-77E4-A0B1`): both keys, so a request cannot pair a real machine's
    /// recipient with someone else's signing key.
    package static func fingerprint(recipient: String, signingKey: String) -> String {
        grouped(hex: SHA256.digest(Array("lanyard-fleet-machine\n\(recipient)\n\(signingKey)".utf8)))
    }

    /// 80 bits of a digest as five groups of four hex digits.
    package static func grouped(hex digest: [UInt8]) -> String {
        let hex = hexString(digest.prefix(10)).uppercased()
        var groups: [String] = []
        var rest = Substring(hex)
        while !rest.isEmpty {
            groups.append(String(rest.prefix(4)))
            rest = rest.dropFirst(4)
        }
        return groups.joined(separator: "-")
    }

    /// A fingerprint as typed by a person: upper case, without dashes or spaces.
    package static func normalized(_ fingerprint: String) -> String {
        fingerprint.uppercased().filter { $0 != "-" && $0 != " " }
    }

    /// The identity kept in `store`, or nil when there is none yet.
    package static func load(from store: any CredentialStore) throws -> MachineIdentity? {
        let credential: Credential
        do { credential = try store.get(storeSlot) } catch StoreError.notFound { return nil }
        guard credential.provider == provider else {
            throw FleetError.identityUnavailable(detail: "the store entry \(storeSlot.name) is not a fleet identity")
        }
        do { return MachineIdentity(identity: try X25519Identity(credential.tokens.accessToken)) } catch {
            throw FleetError.identityUnavailable(
                detail: "the stored identity does not parse (\(error.userFacingDescription))"
            )
        }
    }

    /// The identity kept in `store`, made and stored first when there is none.
    package static func loadOrCreate(in store: any CredentialStore) throws -> MachineIdentity {
        if let existing = try load(from: store) { return existing }
        let made = MachineIdentity(identity: X25519Identity.generate())
        let entry = Credential(
            provider: provider,
            tokens: TokenSet(accessToken: made.identity.secretKeyString),
            lastRefresh: nil,
            account: AccountInfo()
        )
        try store.put(entry, for: storeSlot)
        return made
    }
}

/// Which local backend holds this machine's identity (`$XDG_DATA_HOME/lanyard/fleet/identity-backend`),
/// chosen once when the identity is made, so later commands look in the same place even when the
/// keyring is out of reach for a while.
package enum IdentityBackend {
    static func path(_ paths: Paths) -> String { SharedSlotState.folder(paths) + "/identity-backend" }

    package static func load(_ paths: Paths) -> BackendKind? {
        guard let data = try? SecureFiles.read(path(paths)) else { return nil }
        return BackendKind(rawValue: String(decoding: data, as: UTF8.self).trimmingSpaces())
    }

    package static func save(_ kind: BackendKind, paths: Paths) throws {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        try SecureFiles.ensureDirectory(SharedSlotState.folder(paths))
        try SecureFiles.atomicWrite(Data(kind.rawValue.utf8), to: path(paths))
    }
}
