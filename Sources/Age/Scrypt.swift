/// The native passphrase recipient type (`scrypt` stanzas).
///
/// A file encrypted to a passphrase must have no other recipient.
public struct ScryptRecipient: Recipient {
    static let label = Array("age-encryption.org/v1/scrypt".utf8)
    static let stanzaType = "scrypt"

    private let passphrase: SecretBytes
    /// log2 of the scrypt cost parameter N.
    public let workFactor: Int

    /// - Parameters:
    ///   - passphrase: must not be empty. Its UTF-8 bytes are copied into memory
    ///     that is wiped on release (the `String` itself cannot be wiped).
    ///   - workFactor: log2(N), 1...30. 18 takes about a second and 256 MiB.
    public init(passphrase: String, workFactor: Int = 18) throws(AgeError) {
        guard !passphrase.isEmpty else { throw .emptyPassphrase }
        guard (1...30).contains(workFactor) else { throw .invalidWorkFactor(workFactor) }
        var bytes = Array(passphrase.utf8)
        defer { Sodium.memzero(&bytes) }
        self.passphrase = bytes.withUnsafeBytes { SecretBytes($0) }
        self.workFactor = workFactor
    }

    /// Derives a wrap key with a fresh salt and seals the file key under it.
    public func wrap(fileKey: [UInt8]) throws(AgeError) -> [Stanza] {
        let salt = Sodium.randomBytes(16)
        guard var key = passphrase.withBytes({ Sodium.scrypt(password: $0, salt: Self.label + salt, logN: workFactor) })
        else { throw .scryptFailed(logN: workFactor) }
        defer { Sodium.memzero(&key) }
        let body = Sodium.sealZeroNonce(key: key, plaintext: fileKey)
        return [Stanza(type: Self.stanzaType, arguments: [Sodium.base64String(salt), String(workFactor)], body: body)]
    }
}

/// The passphrase identity matching `ScryptRecipient`.
public struct ScryptIdentity: Identity {
    private let passphrase: SecretBytes
    /// Files asking for a larger work factor are refused before scrypt runs.
    public let maxWorkFactor: Int

    /// - Parameters:
    ///   - passphrase: the passphrase; its UTF-8 bytes are kept in wiped-on-release memory.
    ///   - maxWorkFactor: the largest log2(N) accepted (22 ≈ 4 GiB of memory).
    public init(passphrase: String, maxWorkFactor: Int = 22) throws(AgeError) {
        guard !passphrase.isEmpty else { throw .emptyPassphrase }
        var bytes = Array(passphrase.utf8)
        defer { Sodium.memzero(&bytes) }
        self.passphrase = bytes.withUnsafeBytes { SecretBytes($0) }
        self.maxWorkFactor = maxWorkFactor
    }

    /// Returns the file key if the header's only stanza is an scrypt stanza and
    /// the passphrase is right; nil if the file is not passphrase-encrypted.
    ///
    /// Throws `incorrectPassphrase` on a wrong passphrase (decryption then goes
    /// on with other identities) and `workFactorTooLarge` without running scrypt.
    public func unwrap(stanzas: [Stanza]) throws(AgeError) -> [UInt8]? {
        guard let i = stanzas.firstIndex(where: { $0.type == ScryptRecipient.stanzaType }) else { return nil }
        // Passphrase encryption implies the file came from the passphrase holder;
        // any other stanza would break that, so the whole header is rejected.
        guard stanzas.count == 1 else { throw .scryptNotAlone }
        let stanza = stanzas[i]
        let fail = { (p: AgeError.StanzaProblem) in AgeError.stanza(index: i + 1, type: stanza.type, p) }
        guard stanza.arguments.count == 2 else {
            throw fail(.wrongArgumentCount(expected: 2, actual: stanza.arguments.count))
        }
        guard let salt = Sodium.base64Decode(stanza.arguments[0]) else {
            throw fail(.invalidBase64Argument(position: 1))
        }
        guard salt.count == 16 else { throw fail(.wrongArgumentLength(position: 1, expected: 16, actual: salt.count)) }
        guard let logN = Self.parseWorkFactor(stanza.arguments[1]) else { throw fail(.malformedWorkFactor) }
        guard stanza.body.count == 32 else { throw fail(.wrongBodyLength(actual: stanza.body.count)) }
        // The cap is checked before any expensive work: a hostile file must not
        // be able to make us burn gigabytes and minutes.
        guard logN <= maxWorkFactor else { throw .workFactorTooLarge(logN: logN, maximum: maxWorkFactor) }

        Sodium.ensureInitialized()
        guard
            var key = passphrase.withBytes({
                Sodium.scrypt(password: $0, salt: ScryptRecipient.label + salt, logN: logN)
            })
        else { throw .scryptFailed(logN: logN) }
        defer { Sodium.memzero(&key) }
        guard let fileKey = Sodium.openZeroNonce(key: key, ciphertext: stanza.body) else { throw .incorrectPassphrase }
        return fileKey
    }

    /// `^[1-9][0-9]*$`, saturating at Int.max so overflow reads as "too large".
    static func parseWorkFactor(_ s: String) -> Int? {
        let digits = Array(s.utf8)
        guard let first = digits.first, first >= UInt8(ascii: "1"), first <= UInt8(ascii: "9") else { return nil }
        var value = 0
        for d in digits {
            guard d >= UInt8(ascii: "0"), d <= UInt8(ascii: "9") else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(Int(d - UInt8(ascii: "0")))
            value = (o1 || o2) ? Int.max : sum
        }
        return value
    }
}
