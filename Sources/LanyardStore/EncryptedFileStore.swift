import Age
import FoundationEssentials
import LanyardCore
import LanyardSupport

/// Every slot's credential in one age v1 file, `$XDG_DATA_HOME/lanyard/store.age`, encrypted to
/// the store's own X25519 identity. The identity lives beside it in `identity.age` (itself age
/// scrypt-encrypted with the user's passphrase), in `identity.tpm` (sealed by the machine's TPM
/// 2.0, with the store also encrypted to recovery recipients) or, on explicit opt-in for
/// unattended hosts, in `identity.txt` at 0600. Stock `age` opens the store with the identity, or
/// with a recovery key (docs/store-format.md).
///
/// Unlocking costs one scrypt, or one unseal by the TPM; the unlocked identity then waits in the
/// kernel user keyring with a timeout, so the commands that follow touch neither. Writes take an
/// exclusive lock, replace the file durably and keep the previous generation as `store.age.prev`.
/// A file that fails to decrypt is reported as `corrupt` and never touched.
package final class EncryptedFileStore: CredentialStore, Sendable {
    package let kind = BackendKind.file
    package static let backendName = "encrypted file"
    package let directory: String
    package var storePath: String { directory + "/store.age" }
    package var protectedIdentityPath: String { directory + "/identity.age" }
    package var plainIdentityPath: String { directory + "/identity.txt" }
    /// The identity sealed by the TPM (``SealedIdentityFile``).
    package var sealedIdentityPath: String { directory + "/identity.tpm" }
    /// How long an unlocked identity stays cached, in seconds.
    package let unlockCacheSeconds: TimeInterval
    /// Where a passphrase comes from without asking (LANYARD_PASSPHRASE_FILE, LANYARD_ASKPASS); nil
    /// when nothing is configured. A locked store opens with it (and is cached when the kernel keyring works), so
    /// unattended hosts and containers without a kernel keyring can use a passphrase-protected store.
    package let passphraseSource: (@Sendable () throws -> String)?
    /// What `passphraseSource` reads (`LANYARD_PASSPHRASE_FILE PATH`), named when its passphrase is wrong.
    package let passphraseSourceName: String?
    /// Where the TPM is, given; nil: the process's TPM2TOOLS_TCTI or TCTI, else the default.
    private let givenTPM: TPMLocation?
    /// The store's own recipient, once this process has opened the store (not a secret): a
    /// passphrase store's recipient sits inside `identity.age`, so a recovery file written after
    /// the cache expired, or with no kernel keyring, is still encrypted to it.
    let openedRecipient = Locked<X25519Recipient?>(nil)

    /// - Parameter tpm: the TPM a sealed identity is sealed by and opened with; nil reads
    ///   TPM2TOOLS_TCTI and TCTI when it is needed (a caller with config.ini passes
    ///   ``TPMLocation/resolve(environment:configured:)`` with `[store] tpm-tcti`).
    package init(
        paths: Paths,
        unlockCacheSeconds: TimeInterval = 900,
        passphraseSource: (@Sendable () throws -> String)? = nil,
        passphraseSourceName: String? = nil,
        tpm: TPMLocation? = nil
    ) {
        directory = paths.dataDirectory
        self.unlockCacheSeconds = unlockCacheSeconds
        self.passphraseSource = passphraseSource
        self.passphraseSourceName = passphraseSourceName
        givenTPM = tpm
    }

    /// The TPM this store's identity is sealed by (when it is).
    package var tpm: TPMLocation { givenTPM ?? .resolve(environment: nil, configured: nil) }

    var cacheName: String { "lanyard:file-store:" + storePath }
    /// The unlocked identity's public key (not a secret; a hint that spares computing it).
    var publicKeyCacheName: String { "lanyard:file-store-public:" + storePath }

    /// No store at this path yet.
    static let notSetUp = StoreError.unavailable(
        backend: backendName,
        hint: "no file store here; create one with `lanyard store init`"
    )

    /// Keeps the unlocked identity in the kernel keyring for `unlockCacheSeconds`.
    func cache(_ identity: X25519Identity) throws(StoreError) {
        try KernelKeyring.store(
            name: cacheName,
            secret: Array(identity.secretKeyString.utf8),
            timeout: unlockCacheSeconds
        )
        // The public key beside it, under a name of its own (the secret's entry keeps the format
        // every version reads): reading it back spares computing it on every command.
        try? KernelKeyring.store(
            name: publicKeyCacheName,
            secret: Array(identity.recipient.string.utf8),
            timeout: unlockCacheSeconds
        )
    }

    /// Why unlocked identities cannot be cached here (no kernel keyring), or nil when they can.
    package static var cacheUnavailableReason: String? { KernelKeyring.unavailableReason() }

    /// Whether `store init` has run.
    package var isInitialized: Bool {
        (try? SecureFiles.checkFile(storePath)) == true
            && ((try? SecureFiles.checkFile(protectedIdentityPath)) == true
                || (try? SecureFiles.checkFile(plainIdentityPath)) == true
                || isSealed)
    }

    /// Whether the identity is protected by a passphrase (false for `--no-passphrase` and TPM-sealed stores).
    package var isPassphraseProtected: Bool { !isSealed && (try? SecureFiles.checkFile(protectedIdentityPath)) == true }

    /// Whether the identity is sealed by a TPM (`identity.tpm`). It wins over a clear identity
    /// left beside it by an interrupted `store seal --tpm`.
    package var isSealed: Bool { (try? SecureFiles.checkFile(sealedIdentityPath)) == true }

    /// The sealed identity's file, decoded; nil when the store is not sealed by a TPM. Reads only
    /// the file (not secret): for `store status` and `doctor`.
    package func sealedIdentity() throws -> SealedIdentityFile? {
        guard isSealed else { return nil }
        return try sealedIdentityFile()
    }

    /// Whether opening the store needs a TPM PIN (a sealed identity with an authValue).
    package var needsTPMPIN: Bool { ((try? sealedIdentity()) ?? nil)?.pin == true }

    /// Creates the identity and an empty store, and caches the unlocked identity.
    /// - Parameter passphrase: protects the identity; nil stores it unprotected at 0600.
    /// - Returns: false when the unlocked identity could not be cached (no kernel keyring here):
    ///   the store exists but stays locked.
    @discardableResult
    package func initialize(passphrase: String?, workFactor: Int = 18) throws -> Bool {
        try SecureFiles.ensureDirectory(directory)
        let lock = try FileLock(path: storePath + ".lock")
        defer { withExtendedLifetime(lock) {} }
        guard !isInitialized, try !SecureFiles.checkFile(storePath) else {
            throw StoreError.io(path: storePath, detail: "a file store already exists here")
        }
        let identity = X25519Identity.generate()
        let identityText =
            "# Lanyard file-store identity, created \(RFC3339.string(from: Date()))\n"
            + "# public key: \(identity.recipient.string)\n\(identity.secretKeyString)\n"
        let identityFile: Data
        let identityPath: String
        if let passphrase {
            do {
                identityFile = try Age.encrypt(
                    Data(identityText.utf8),
                    to: [try ScryptRecipient(passphrase: passphrase, workFactor: workFactor)],
                    armored: true
                )
            } catch {
                throw StoreError.io(
                    path: protectedIdentityPath,
                    detail: "cannot encrypt the identity: \(error.userFacingDescription)"
                )
            }
            identityPath = protectedIdentityPath
        } else {
            identityFile = Data(identityText.utf8)
            identityPath = plainIdentityPath
        }
        // The store first, then its identity: a failure in between leaves no identity without a
        // store (which would make the next `store init` refuse, and every command call it locked).
        try write(StoreDocument(), recipients: [identity.recipient])
        do { try SecureFiles.atomicWrite(identityFile, to: identityPath) } catch {
            try? FileManager.default.removeItem(atPath: storePath)
            try? FileManager.default.removeItem(atPath: storePath + ".prev")
            throw error
        }
        guard passphrase != nil else { return true }
        return (try? cache(identity)) != nil
    }

    /// Checks `passphrase` against the protected identity and caches the unlocked identity.
    /// A wrong passphrase changes nothing. A TPM-sealed store takes it as its PIN (one try: the
    /// TPM counts a wrong one) and is unsealed by the TPM.
    package func unlock(passphrase: String) throws {
        if isSealed {
            try cache(try unsealIdentity(pin: passphrase))
            return
        }
        guard try SecureFiles.checkFile(protectedIdentityPath) else {
            if try SecureFiles.checkFile(plainIdentityPath) { return }  // nothing to unlock
            throw Self.notSetUp
        }
        let identity = try openProtectedIdentity(passphrase: passphrase)
        try cache(identity)
    }

    /// Unlocks with passphrases from `ask` (given the attempt number, from 1), asking again after a
    /// wrong one until `tries` were wrong (then `wrongPassphrase`). Nothing changes until one opens
    /// the store.
    package func unlock(tries: Int, ask: (_ attempt: Int) throws -> String) throws {
        let tries = max(tries, 1)
        for attempt in 1..<tries {
            do { return try unlock(passphrase: try ask(attempt)) } catch StoreError.wrongPassphrase {}
        }
        try unlock(passphrase: try ask(tries))
    }

    /// Decrypts identity.age with `passphrase` (one scrypt).
    func openProtectedIdentity(passphrase: String) throws -> X25519Identity {
        guard let sealed = try SecureFiles.read(protectedIdentityPath) else {
            throw Self.notSetUp
        }
        let identityText: Data
        do {
            identityText = try Age.decrypt(sealed, with: [try ScryptIdentity(passphrase: passphrase)])
        } catch .incorrectPassphrase {
            throw StoreError.wrongPassphrase
        } catch {
            throw StoreError.corrupt(source: protectedIdentityPath, detail: error.userFacingDescription)
        }
        return try parseIdentity(identityText, source: protectedIdentityPath)
    }

    /// Forgets the cached identity; returns false when it was not cached.
    @discardableResult
    package func lock() -> Bool {
        _ = KernelKeyring.remove(name: publicKeyCacheName)
        return KernelKeyring.remove(name: cacheName)
    }

    /// The identity that opens the store: the cached unlocked one of a TPM-sealed store (else
    /// unsealed now), the unprotected file, else the cached unlocked one.
    func identity() throws -> X25519Identity {
        if isSealed {
            if let cached = try cachedIdentity() { return cached }
            let identity = try unsealIdentity(pin: nil)
            try? cache(identity)
            return identity
        }
        if let plain = try SecureFiles.read(plainIdentityPath) {
            return try parseIdentity(plain, source: plainIdentityPath)
        }
        guard try SecureFiles.checkFile(protectedIdentityPath) else {
            throw Self.notSetUp
        }
        guard let cached = try cachedIdentity() else {
            if let passphraseSource {
                let identity: X25519Identity
                do { identity = try openProtectedIdentity(passphrase: try passphraseSource()) } catch StoreError
                    .wrongPassphrase
                {
                    throw passphraseSourceName.map { StoreError.wrongPassphraseFrom(source: $0) } ?? .wrongPassphrase
                }
                try? cache(identity)
                return identity
            }
            if let reason = KernelKeyring.unavailableReason() {
                throw StoreError.locked(
                    backend: Self.backendName,
                    hint: "the kernel keyring is unavailable here (\(reason)), so the store "
                        + "cannot stay unlocked: set LANYARD_PASSPHRASE_FILE "
                        + "or LANYARD_ASKPASS so each command can open it"
                )
            }
            throw StoreError.locked(backend: Self.backendName, hint: "run `lanyard store unlock`")
        }
        return cached
    }

    /// The unlocked identity the kernel keyring holds, or nil.
    func cachedIdentity() throws -> X25519Identity? {
        guard var cached = KernelKeyring.load(name: cacheName) else { return nil }
        defer { for i in cached.indices { cached[i] = 0 } }
        let publicKey = KernelKeyring.load(name: publicKeyCacheName).map { String(decoding: $0, as: UTF8.self) }
        do { return try X25519Identity(String(decoding: cached, as: UTF8.self), publicKey: publicKey) } catch {
            lock()
            throw StoreError.locked(
                backend: Self.backendName,
                hint: "the cached identity was unreadable; run `lanyard store unlock`"
            )
        }
    }

    func parseIdentity(_ data: Data, source: String) throws -> X25519Identity {
        do {
            guard let first = try Age.parseIdentityFile(String(decoding: data, as: UTF8.self)).first else {
                throw StoreError.corrupt(source: source, detail: "no identity in the file")
            }
            return first
        } catch let error as AgeError {
            throw StoreError.corrupt(source: source, detail: error.userFacingDescription)
        }
    }

    func read(identity: X25519Identity) throws -> StoreDocument {
        openedRecipient.withLock { $0 = identity.recipient }
        guard let sealed = try SecureFiles.read(storePath) else {
            throw Self.notSetUp
        }
        let plain: Data
        do { plain = try Age.decrypt(sealed, with: [identity]) } catch {
            throw StoreError.corrupt(source: storePath, detail: error.userFacingDescription)
        }
        do { return try StoreDocument.decode(plain, source: storePath) } catch {
            throw StoreError.corrupt(source: storePath, detail: error.detail)
        }
    }

    func write(_ document: StoreDocument, identity: X25519Identity) throws {
        try write(document, recipients: try recipients(for: identity))
    }

    func write(_ document: StoreDocument, recipients: [X25519Recipient]) throws {
        try SecureFiles.atomicWrite(try seal(document, to: recipients), to: storePath, keepPrevious: true)
    }

    /// Who `store.age` is encrypted to: the store's own recipient, and the recovery recipients a
    /// TPM-sealed store names in `identity.tpm`.
    func recipients(for identity: X25519Identity) throws -> [X25519Recipient] {
        guard isSealed else { return [identity.recipient] }
        let recovery = try sealedIdentityFile().recoveryRecipients.map { text in
            // The decoder accepted only recipients that parse.
            do { return try X25519Recipient(text) } catch {
                throw StoreError.corrupt(source: sealedIdentityPath, detail: "a recovery recipient does not parse")
            }
        }
        return [identity.recipient] + recovery
    }

    /// `document` encrypted to `recipients`: the bytes of `store.age`.
    func seal(_ document: StoreDocument, to recipients: [X25519Recipient]) throws -> Data {
        do { return try Age.encrypt(document.jsonData(), to: recipients) } catch {
            throw StoreError.io(path: storePath, detail: "cannot encrypt: \(error.userFacingDescription)")
        }
    }

    /// Read-modify-write under the store's exclusive lock.
    func modify<T>(_ body: (inout StoreDocument) throws -> T) throws -> T {
        let identity = try identity()
        try SecureFiles.ensureDirectory(directory)
        let lock = try FileLock(path: storePath + ".lock")
        defer { withExtendedLifetime(lock) {} }
        var document = try read(identity: identity)
        let result = try body(&document)
        try write(document, identity: identity)
        return result
    }

    package func get(_ slot: Slot) throws -> Credential {
        OperationCounts.storeRead()
        let identity = try identity()
        StartupTrace.mark("identity")
        defer { StartupTrace.mark("decrypt") }
        guard let credential = try read(identity: identity).slots[slot] else { throw StoreError.notFound(slot: slot) }
        return credential
    }

    package func put(_ credential: Credential, for slot: Slot) throws {
        try modify { $0.slots[slot] = credential }
    }

    /// Every credential in one write of the file: one decryption, one encryption, one durable
    /// replacement, so all of them land or none (even across a `kill -9`).
    package func putAll(_ credentials: [Slot: Credential]) throws {
        try modify { doc in
            for (slot, credential) in credentials { doc.slots[slot] = credential }
        }
    }

    /// Writes the store with `credentials` added to `store.age.incoming`, holding the store's lock
    /// until `transaction` renames it over `store.age` together with the registry change (or
    /// removes it). One decryption, one encryption, one durable write.
    package func stage(_ credentials: [Slot: Credential], in transaction: RegistryTransaction) throws -> Bool {
        let identity = try identity()
        try SecureFiles.ensureDirectory(directory)
        let lock = try FileLock(path: storePath + ".lock")
        var document = try read(identity: identity)
        for (slot, credential) in credentials { document.slots[slot] = credential }
        let staged = storePath + ".incoming"
        try SecureFiles.writeNew(try seal(document, to: try recipients(for: identity)), to: staged)
        try transaction.adopt(StagedStoreWrite(stagedPath: staged, targetPath: storePath, lock: lock))
        return true
    }

    package func delete(_ slot: Slot) throws {
        try modify { doc in
            guard doc.slots.removeValue(forKey: slot) != nil else { throw StoreError.notFound(slot: slot) }
        }
    }

    package func list() throws -> [Slot] { try read(identity: try identity()).slots.keys.sorted() }

    package func health() -> StoreHealth {
        guard isInitialized else {
            return StoreHealth(
                backend: .file,
                reachable: false,
                locked: false,
                persistent: true,
                location: storePath,
                problem: "not set up (run `lanyard store init`)"
            )
        }
        // A store that opens with an unattended passphrase counts as unlocked: commands can use it,
        // and so does a TPM-sealed one without a PIN (the TPM opens it when it is needed).
        let needsSecret = isPassphraseProtected || needsTPMPIN
        let locked = needsSecret && passphraseSource == nil && KernelKeyring.load(name: cacheName) == nil
        var health = StoreHealth(backend: .file, reachable: true, locked: locked, persistent: true, location: storePath)
        if isSealed { describeSeal(&health) }
        return health
    }
}

/// The JSON inside `store.age`: `{"version": 1, "slots": {SLOT: CREDENTIAL}}`.
struct StoreDocument: JSONDocument, Equatable {
    static let currentVersion = 1
    var slots: [Slot: Credential] = [:]

    init() {}

    init(json: JSONFields) throws(JSONShapeError) {
        let version = try json.int("version")
        guard version == Self.currentVersion else {
            throw JSONShapeError(path: ".version", problem: "is \(version): not supported")
        }
        for (name, value) in try json.object("slots").object {
            guard let slot = try? Slot(stored: name) else {
                throw JSONShapeError(path: ".slots", problem: "has an invalid slot name")
            }
            slots[slot] = try Credential(json: try JSONFields(value, path: ".slots." + name))
        }
    }

    var json: JSONValue {
        var object: [String: JSONValue] = [:]
        for (slot, credential) in slots { object[slot.name] = credential.json }
        return .object(["version": .number(Double(Self.currentVersion)), "slots": .object(object)])
    }
}
