import FoundationEssentials
import Age
import LanyardCore
import LanyardSupport
import LanyardStore

/// This machine's X25519 age identity for its fleet: created on `fleet init` or `fleet join`,
/// kept in the machine's own credential store (keyring or encrypted file) under a reserved slot
/// that the registry never lists, so it is as protected as the credentials it unlocks.
package struct MachineIdentity: Sendable {
    /// The reserved store slot that holds the identity.
    package static let storeSlot = try! Slot("lanyard-fleet-identity")
    /// The provider name the identity's store entry carries.
    static let provider = "lanyard-fleet"

    package let identity: X25519Identity

    package var recipient: String { identity.recipient.string }
    package var fingerprint: String { Self.fingerprint(of: recipient) }

    /// A short, speakable digest of a recipient for people to compare (`3F2A-91BC-0D11-77E4`).
    package static func fingerprint(of recipient: String) -> String {
        let hex = TokenFingerprint.of(recipient).uppercased()
        var groups: [String] = []
        var rest = Substring(hex.prefix(16))
        while !rest.isEmpty { groups.append(String(rest.prefix(4))); rest = rest.dropFirst(4) }
        return groups.joined(separator: "-")
    }

    /// The identity kept in `store`, or nil when there is none yet.
    package static func load(from store: any CredentialStore) throws -> MachineIdentity? {
        let credential: Credential
        do { credential = try store.get(storeSlot) } catch StoreError.notFound { return nil }
        guard credential.provider == provider else {
            throw FleetError.identityUnavailable(detail: "the store entry \(storeSlot.name) is not a fleet identity")
        }
        do { return MachineIdentity(identity: try X25519Identity(credential.tokens.accessToken)) } catch {
            throw FleetError.identityUnavailable(detail: "the stored identity does not parse (\(error.userFacingDescription))")
        }
    }

    /// The identity kept in `store`, made and stored first when there is none.
    package static func loadOrCreate(in store: any CredentialStore) throws -> MachineIdentity {
        if let existing = try load(from: store) { return existing }
        let made = MachineIdentity(identity: X25519Identity.generate())
        let entry = Credential(provider: provider, tokens: TokenSet(accessToken: made.identity.secretKeyString), lastRefresh: nil,
                               account: AccountInfo())
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
