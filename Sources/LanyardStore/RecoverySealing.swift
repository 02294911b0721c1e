import Age
import FoundationEssentials
import LanyardCore
import LanyardSupport

/// What a recovery file holds on disk (docs/store-format.md, "Recovery files"): an age file
/// encrypted to the file store's recipients, or, written by a Lanyard before that, the credential
/// document in clear. Told apart by the age header.
package enum RecoveryDocument {
    /// The first line of every binary age v1 file.
    package static let ageHeader = Data("age-encryption.org/v1\n".utf8)

    /// True when `data` starts like an age file (else it is taken for the old clear JSON).
    package static func isSealed(_ data: Data) -> Bool { data.starts(with: ageHeader) }
}

extension EncryptedFileStore {
    /// Who a recovery file is encrypted to: everyone `store.age` is encrypted to (the store's own
    /// recipient and, for a TPM-sealed store, its recovery recipients), read without unlocking:
    /// from `identity.tpm` or `identity.txt`; for a passphrase store, from the key this process
    /// opened the store with, or the public key cached beside the unlocked identity.
    func recoveryRecipients() throws -> [X25519Recipient] {
        if isSealed {
            let file = try sealedIdentityFile()
            do { return try ([file.recipient] + file.recoveryRecipients).map { try X25519Recipient($0) } } catch {
                throw StoreError.corrupt(source: sealedIdentityPath, detail: "a recipient does not parse")
            }
        }
        if let plain = try SecureFiles.read(plainIdentityPath) {
            return [try parseIdentity(plain, source: plainIdentityPath).recipient]
        }
        if let opened = openedRecipient.withLock({ $0 }) { return [opened] }
        if let cached = KernelKeyring.load(name: publicKeyCacheName),
            let recipient = try? X25519Recipient(String(decoding: cached, as: UTF8.self))
        {
            return [recipient]
        }
        if let identity = try cachedIdentity() { return [identity.recipient] }
        throw StoreError.locked(backend: Self.backendName, hint: "the store's public key is inside identity.age")
    }

    package func sealRecovery(_ document: Data) throws -> Data? {
        let recipients = try recoveryRecipients()
        do { return try Age.encrypt(document, to: recipients) } catch {
            throw StoreError.io(
                path: storePath,
                detail: "cannot encrypt a recovery file: \(error.userFacingDescription)"
            )
        }
    }

    package func openRecovery(_ sealed: Data, source: String) throws -> Data {
        let identity = try identity()
        do { return try Age.decrypt(sealed, with: [identity]) } catch {
            throw StoreError.corrupt(source: source, detail: error.userFacingDescription)
        }
    }
}
