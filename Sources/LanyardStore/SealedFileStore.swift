import Age
import FoundationEssentials
import LanyardCore
import LanyardSupport

/// The file store with its identity sealed by a TPM 2.0 (`store init --tpm`, `store seal --tpm`):
/// `identity.tpm` holds only what the TPM wrapped, `store.age` is encrypted to the identity and to
/// the recovery recipients, and the unsealed identity waits in the kernel keyring like an unlocked
/// passphrase store's, so the TPM is asked once per `[store] unlock-cache` seconds at most.
extension EncryptedFileStore {
    /// What `store seal --tpm` did.
    package enum SealOutcome: String, Sendable {
        /// The clear or passphrase-protected identity was sealed and removed.
        case sealed
        /// An earlier `store seal --tpm` had sealed the identity but stopped before removing the
        /// clear one: the sealed identity opened the store, and the clear one is gone now.
        case finished
    }

    /// The TPM authValue for a PIN: SHA-256 of its UTF-8 bytes (an authValue is at most the name
    /// algorithm's digest size, 32 bytes, and a PIN may be longer).
    static func pinAuth(_ pin: String) -> [UInt8] { SHA256.digest(Array(pin.utf8)) }

    /// Creates a TPM-sealed store: a fresh identity sealed by the TPM at ``tpm`` (guarded by `pin`
    /// when given), an empty `store.age` encrypted to it and to `recovery`, and caches the
    /// identity.
    /// - Returns: false when the identity could not be cached (no kernel keyring): each command
    ///   then unseals it again.
    @discardableResult
    package func initializeSealed(pin: String?, recovery: [X25519Recipient]) throws -> Bool {
        try SecureFiles.ensureDirectory(directory)
        let lock = try FileLock(path: storePath + ".lock")
        defer { withExtendedLifetime(lock) {} }
        guard !isInitialized, try !SecureFiles.checkFile(storePath) else {
            throw StoreError.io(path: storePath, detail: "a file store already exists here")
        }
        let identity = X25519Identity.generate()
        let sealed = try sealedFile(for: identity, pin: pin, recovery: recovery)
        // The store first, then its identity, as `initialize` does.
        try write(StoreDocument(), recipients: [identity.recipient] + recovery)
        do { try SecureFiles.atomicWrite(sealed.encoded(), to: sealedIdentityPath) } catch {
            try? FileManager.default.removeItem(atPath: storePath)
            try? FileManager.default.removeItem(atPath: storePath + ".prev")
            throw error
        }
        return (try? cache(identity)) != nil
    }

    /// Seals the store's identity in place (`store seal --tpm`): the identity (from
    /// `identity.txt`, the unlock cache, or `identity.age` opened with `passphrase()`) is sealed
    /// by the TPM, `store.age` is encrypted again to it and to `recovery`, `identity.tpm` is
    /// written, and only once it has opened the store as the next command will is the clear
    /// identity removed. A failure before that leaves the store as it was (it may already be
    /// encrypted to the recovery recipients too); a crash after `identity.tpm` landed leaves both
    /// identities, and running this again finishes the job (``SealOutcome/finished``).
    package func sealInPlace(
        pin: String?,
        recovery: [X25519Recipient],
        passphrase: () throws -> String
    ) throws -> SealOutcome {
        try SecureFiles.ensureDirectory(directory)
        let lock = try FileLock(path: storePath + ".lock")
        defer { withExtendedLifetime(lock) {} }
        let clear = try [plainIdentityPath, protectedIdentityPath].filter { try SecureFiles.checkFile($0) }
        if isSealed {
            guard !clear.isEmpty else {
                throw StoreError.io(path: sealedIdentityPath, detail: "the file store is already sealed by a TPM")
            }
            let identity = try unsealIdentity(pin: pin)
            _ = try read(identity: identity)
            for path in clear { try SecureFiles.removeDurably(path) }
            try? cache(identity)
            return .finished
        }
        guard try SecureFiles.checkFile(storePath), !clear.isEmpty else { throw Self.notSetUp }
        let identity: X25519Identity
        if let plain = try SecureFiles.read(plainIdentityPath) {
            identity = try parseIdentity(plain, source: plainIdentityPath)
        } else if let cached = try cachedIdentity() {
            identity = cached
        } else {
            identity = try openProtectedIdentity(passphrase: try passphrase())
        }
        let document = try read(identity: identity)
        let sealed = try sealedFile(for: identity, pin: pin, recovery: recovery)
        try write(document, recipients: [identity.recipient] + recovery)
        try SecureFiles.atomicWrite(sealed.encoded(), to: sealedIdentityPath)
        // From here on identity.tpm is the identity: open the store with it from the disk, as the
        // next command will, before the clear one goes.
        let reopened = try unsealIdentity(pin: pin)
        guard reopened.recipient == identity.recipient, try read(identity: reopened) == document else {
            throw StoreError.corrupt(
                source: sealedIdentityPath,
                detail: "the sealed identity does not open the store as the old one did"
            )
        }
        for path in clear { try SecureFiles.removeDurably(path) }
        try? cache(identity)
        return .sealed
    }

    /// `identity` sealed by the TPM, checked: the TPM unseals it again (a right PIN does not count
    /// towards its lockout) and the file decodes.
    func sealedFile(
        for identity: X25519Identity,
        pin: String?,
        recovery: [X25519Recipient]
    ) throws -> SealedIdentityFile {
        var secret = Array(identity.secretKeyString.utf8)
        defer { for i in secret.indices { secret[i] = 0 } }
        let auth = pin.map(Self.pinAuth) ?? []
        let sealed = try TPM.seal(secret, auth: auth, at: tpm)
        var back = try TPM.unseal(
            publicBlob: sealed.publicBlob,
            privateBlob: sealed.privateBlob,
            storageKeyName: sealed.storageKeyName,
            auth: auth,
            at: tpm
        )
        defer { for i in back.indices { back[i] = 0 } }
        guard back == secret else {
            throw TPMError.failed(step: "unseal after seal", code: 0, detail: "the TPM gave back other data")
        }
        let file = SealedIdentityFile(
            recipient: identity.recipient.string,
            storageKeyName: sealed.storageKeyName,
            pin: pin != nil,
            recoveryRecipients: recovery.map(\.string),
            publicBlob: sealed.publicBlob,
            privateBlob: sealed.privateBlob
        )
        do { _ = try SealedIdentityFile.decode(file.encoded()) } catch {
            throw TPMError.failed(
                step: "seal",
                code: 0,
                detail: "the TPM's blobs are not those of a sealed data object (\(error.description))"
            )
        }
        return file
    }

    /// What `doctor` shows of a sealed store (from `identity.tpm` alone; the TPM is asked when the
    /// store is listed): which TPM sealed it, whether a PIN guards it, its recovery recipients, and
    /// a clear identity an interrupted `store seal --tpm` left.
    func describeSeal(_ health: inout StoreHealth) {
        health.provider = "TPM 2.0"
        let file: SealedIdentityFile
        do { file = try sealedIdentityFile() } catch {
            health.problem = error.userFacingDescription
            return
        }
        var notes = [
            "identity sealed by the TPM whose storage key is \(file.storageKeyNameHex) (at \(tpm))",
            file.pin
                ? "a PIN guards it: the TPM's dictionary-attack lockout counts wrong ones"
                : "no PIN: any program running as you on this machine can open it",
        ]
        if file.recoveryRecipients.isEmpty {
            notes.append("no recovery recipient: if this TPM is cleared or replaced, nothing opens the store")
        } else {
            notes.append(
                "recovery recipients (stock age opens the store with their identities): "
                    + file.recoveryRecipients.joined(separator: ", ")
            )
        }
        health.notes = notes
        let clear = [plainIdentityPath, protectedIdentityPath].filter { (try? SecureFiles.checkFile($0)) == true }
        if !clear.isEmpty {
            health.problem =
                "\(clear.map(PathText.lastComponent).joined(separator: " and ")) is still beside identity.tpm "
                + "(an interrupted `lanyard store seal --tpm`): run it again to finish"
        }
    }

    /// `identity.tpm`, decoded; corrupt (naming the line) when it does not decode.
    func sealedIdentityFile() throws -> SealedIdentityFile {
        guard let data = try SecureFiles.read(sealedIdentityPath) else { throw Self.notSetUp }
        do { return try SealedIdentityFile.decode(data) } catch {
            throw StoreError.corrupt(source: sealedIdentityPath, detail: error.description)
        }
    }

    /// Unseals `identity.tpm` with the TPM. A PIN comes from `pin`, else from the unattended
    /// passphrase source; with neither, a store with a PIN is locked. Caches nothing.
    func unsealIdentity(pin given: String?) throws -> X25519Identity {
        let file = try sealedIdentityFile()
        var auth: [UInt8] = []
        if file.pin {
            if let given {
                auth = Self.pinAuth(given)
            } else if let passphraseSource {
                auth = Self.pinAuth(try passphraseSource())
            } else {
                throw StoreError.locked(
                    backend: Self.backendName,
                    hint: "its identity is sealed by the TPM with a PIN: "
                        + "run `lanyard store unlock` "
                        + "(or set LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS to give the PIN)"
                )
            }
        }
        defer { for i in auth.indices { auth[i] = 0 } }
        var secret = try TPM.unseal(
            publicBlob: file.publicBlob,
            privateBlob: file.privateBlob,
            storageKeyName: file.storageKeyName,
            auth: auth,
            at: tpm
        )
        defer { for i in secret.indices { secret[i] = 0 } }
        // Parsed without the file's public key as a hint, so the check below compares the
        // recipient computed from the secret.
        guard let identity = try? X25519Identity(String(decoding: secret, as: UTF8.self)) else {
            throw StoreError.corrupt(
                source: sealedIdentityPath,
                detail: "the TPM unsealed something that is not an age identity"
            )
        }
        guard identity.recipient.string == file.recipient else {
            throw StoreError.corrupt(
                source: sealedIdentityPath,
                detail: "the unsealed identity is not the recipient the file names"
            )
        }
        return identity
    }
}

/// A recovery key for a TPM-sealed store: a fresh age identity whose recipient `store.age` is also
/// encrypted to, so stock `age -d -i KEY store.age` opens the store without the TPM. Lanyard keeps
/// no copy: it is printed once, or written once to a file the user names.
package struct RecoveryKey: Sendable {
    package let identity: X25519Identity

    package init(identity: X25519Identity = .generate()) { self.identity = identity }

    /// The key as an age identity file (what `age-keygen` writes): comments, then the secret.
    package func identityFile(storePath: String, now: Date) -> String {
        "# Lanyard recovery key for the file store \(storePath), created \(RFC3339.string(from: now))\n"
            + "# Keep it offline. With it, `age -d -i THIS-FILE store.age` opens the store without the TPM.\n"
            + "# public key: \(identity.recipient.string)\n\(identity.secretKeyString)\n"
    }

    /// Writes ``identityFile(storePath:now:)`` to `path`, which must not exist (mode 0600, fsynced).
    package func write(to path: String, storePath: String, now: Date) throws {
        try SecureFiles.writeNew(Data(identityFile(storePath: storePath, now: now).utf8), to: path)
    }
}
