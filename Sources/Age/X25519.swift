import Synchronization

/// The native X25519 recipient type (`age1…` public keys).
public struct X25519Recipient: Recipient, Equatable, CustomStringConvertible {
    static let label = "age-encryption.org/v1/X25519"
    static let stanzaType = "X25519"

    /// The 32-byte Curve25519 public key.
    public let publicKey: [UInt8]

    /// Parses an `age1…` Bech32 recipient string.
    public init(_ string: String) throws(AgeError) {
        let decoded: (hrp: String, data: [UInt8])
        do { decoded = try Bech32.decode(string) } catch { throw .invalidRecipient(error.problem) }
        guard decoded.hrp == "age" else { throw .invalidRecipient(.wrongPrefix(found: decoded.hrp, expected: "age")) }
        guard decoded.data.count == 32 else { throw .invalidRecipient(.wrongLength(decoded.data.count)) }
        publicKey = decoded.data
    }

    init(publicKey: [UInt8]) {
        self.publicKey = publicKey
    }

    /// The `age1…` encoding.
    public var string: String { Bech32.encode(hrp: "age", data: publicKey) }

    /// Same as `string`: a public key is safe to print.
    public var description: String { string }

    /// Wraps the file key for this public key with a fresh ephemeral X25519 share.
    public func wrap(fileKey: [UInt8]) throws(AgeError) -> [Stanza] {
        Sodium.ensureInitialized()
        var ephemeral = Sodium.randomBytes(32)
        defer { Sodium.memzero(&ephemeral) }
        let share = ephemeral.withUnsafeBytes { Sodium.scalarmultBase(scalar: $0) }
        guard var shared = ephemeral.withUnsafeBytes({ Sodium.scalarmult(scalar: $0, point: publicKey) }) else {
            throw .invalidRecipient(.lowOrderPoint)
        }
        defer { Sodium.memzero(&shared) }
        var wrapKey = HKDF.sha256(ikm: shared, salt: share + publicKey, info: Self.label)
        defer { Sodium.memzero(&wrapKey) }
        let body = Sodium.sealZeroNonce(key: wrapKey, plaintext: fileKey)
        return [Stanza(type: Self.stanzaType, arguments: [Sodium.base64String(share)], body: body)]
    }
}

/// The native X25519 identity (`AGE-SECRET-KEY-1…`).
///
/// The secret scalar lives in memory owned by this object and is wiped when
/// the last reference goes away. Immutable, hence `Sendable`.
public final class X25519Identity: Identity, Sendable {
    private let secret: SecretBytes
    var secretBytes: SecretBytes { secret }
    /// The public key its owner kept beside the secret (the `# public key:` line age-keygen
    /// writes), not checked against it: used only as the salt when unwrapping, where a wrong one
    /// makes the AEAD fail and the computed key is tried. It spares a scalar multiplication
    /// (about a fifth of a millisecond) on every decryption; ``recipient`` never uses it.
    private let publicKeyHint: [UInt8]?
    private let computedRecipient = Mutex<X25519Recipient?>(nil)

    /// The matching recipient (public key), computed from the secret on first use.
    public var recipient: X25519Recipient {
        computedRecipient.withLock { cached in
            if let cached { return cached }
            let made = X25519Recipient(publicKey: secret.withBytes { Sodium.scalarmultBase(scalar: $0) })
            cached = made
            return made
        }
    }

    /// Takes a copy of `scalar`; the caller wipes its own.
    private init(scalar: [UInt8], publicKeyHint: [UInt8]? = nil) {
        Sodium.ensureInitialized()
        secret = scalar.withUnsafeBytes { SecretBytes($0) }
        self.publicKeyHint = publicKeyHint
    }

    /// A new random identity.
    public static func generate() -> X25519Identity {
        var scalar = Sodium.randomBytes(32)
        defer { Sodium.memzero(&scalar) }
        return X25519Identity(scalar: scalar)
    }

    /// Parses an `AGE-SECRET-KEY-1…` string (uppercase, as age writes it). `publicKey`, the
    /// `age1…` public key kept with it (by age-keygen's `# public key:` line, or the caller's own
    /// cache), saves computing it to decrypt; a wrong or unreadable one costs only that saving.
    public convenience init(_ string: String, publicKey: String?) throws(AgeError) {
        try self.init(string, hint: publicKey.flatMap { try? X25519Recipient($0).publicKey })
    }

    /// Parses an `AGE-SECRET-KEY-1…` string (uppercase, as age writes it).
    public convenience init(_ string: String) throws(AgeError) {
        try self.init(string, hint: nil)
    }

    private convenience init(_ string: String, hint: [UInt8]?) throws(AgeError) {
        Sodium.ensureInitialized()
        var decoded: (hrp: String, data: [UInt8])
        do { decoded = try Bech32.decode(string) } catch { throw .invalidIdentity(line: nil, error.problem) }
        defer { Sodium.memzero(&decoded.data) }
        if decoded.hrp == "AGE-SECRET-KEY-PQ-" {
            throw .invalidIdentity(line: nil, .unsupportedType("post-quantum (ML-KEM)"))
        }
        guard decoded.hrp == "AGE-SECRET-KEY-" else {
            throw .invalidIdentity(line: nil, .wrongPrefix(found: decoded.hrp, expected: "AGE-SECRET-KEY-"))
        }
        guard decoded.data.count == 32 else { throw .invalidIdentity(line: nil, .wrongLength(decoded.data.count)) }
        self.init(scalar: decoded.data, publicKeyHint: hint)
    }

    /// The `AGE-SECRET-KEY-1…` encoding. This is the secret key: handle with care.
    public var secretKeyString: String {
        secret.withBytes { Bech32.encode(hrp: "AGE-SECRET-KEY-", data: Array($0)) }
    }

    /// Returns the file key from the first X25519 stanza addressed to this identity.
    ///
    /// Malformed X25519 stanzas are errors even if another stanza would match,
    /// as the spec requires; stanzas of other types are ignored.
    public func unwrap(stanzas: [Stanza]) throws(AgeError) -> [UInt8]? {
        Sodium.ensureInitialized()
        for (i, stanza) in stanzas.enumerated() where stanza.type == X25519Recipient.stanzaType {
            let fail = { (p: AgeError.StanzaProblem) in AgeError.stanza(index: i + 1, type: stanza.type, p) }
            guard stanza.arguments.count == 1 else {
                throw fail(.wrongArgumentCount(expected: 1, actual: stanza.arguments.count))
            }
            guard let share = Sodium.base64Decode(stanza.arguments[0]) else {
                throw fail(.invalidBase64Argument(position: 1))
            }
            guard share.count == 32 else {
                throw fail(.wrongArgumentLength(position: 1, expected: 32, actual: share.count))
            }
            guard stanza.body.count == 32 else { throw fail(.wrongBodyLength(actual: stanza.body.count)) }
            guard var shared = secret.withBytes({ Sodium.scalarmult(scalar: $0, point: share) }) else {
                throw fail(.lowOrderShare)
            }
            defer { Sodium.memzero(&shared) }
            /// The file key, if the stanza opens with `publicKey` as this identity's public key.
            func open(as publicKey: [UInt8]) -> [UInt8]? {
                var wrapKey = HKDF.sha256(ikm: shared, salt: share + publicKey, info: X25519Recipient.label)
                defer { Sodium.memzero(&wrapKey) }
                return Sodium.openZeroNonce(key: wrapKey, ciphertext: stanza.body)
            }
            // The kept public key first; the computed one when that fails (unless they are equal).
            if let hint = publicKeyHint, let fileKey = open(as: hint) { return fileKey }
            if publicKeyHint != recipient.publicKey, let fileKey = open(as: recipient.publicKey) { return fileKey }
        }
        return nil
    }
}
