import CSodium

/// Ed25519 signatures (libsodium's `crypto_sign`), for data that must be authenticated by a key
/// holder rather than by where it was read from (a fleet's membership log and shared credentials).
///
/// Not part of the age format, so not part of the `Age` product either (`package`): it lives here
/// because this module owns the libsodium wrapper, for the fleet.
package enum Ed25519 {
    /// Bytes in a public key and in a signature.
    package static let publicKeyBytes = 32
    package static let signatureBytes = 64

    /// A signing key. The 64-byte secret lives in memory owned by this object and is wiped when
    /// the last reference goes away.
    package final class SigningKey: Sendable {
        private let secret: SecretBytes
        /// The matching public key (32 bytes).
        package let publicKey: [UInt8]

        /// The key pair made from a 32-byte `seed` (the caller wipes its own copy).
        package init(seed: [UInt8]) {
            precondition(seed.count == 32, "an Ed25519 seed is 32 bytes")
            Sodium.ensureInitialized()
            var pk = [UInt8](repeating: 0, count: 32)
            var sk = [UInt8](repeating: 0, count: 64)
            defer { Sodium.memzero(&sk) }
            _ = seed.withUnsafeBufferPointer { s in crypto_sign_seed_keypair(&pk, &sk, s.baseAddress!) }
            secret = sk.withUnsafeBytes { SecretBytes($0) }
            publicKey = pk
        }

        /// The key derived from an age X25519 identity (HKDF-SHA-256 of its secret scalar, with a
        /// label of its own): one secret to keep, and the two keys always belong together.
        package convenience init(derivedFrom identity: X25519Identity, label: String) {
            var seed = identity.withSecretScalar {
                HKDF.sha256(ikm: $0, salt: UnsafeRawBufferPointer(start: nil, count: 0), info: label)
            }
            defer { Sodium.memzero(&seed) }
            self.init(seed: seed)
        }

        /// The detached signature of `message`.
        package func sign(_ message: [UInt8]) -> [UInt8] {
            var signature = [UInt8](repeating: 0, count: 64)
            secret.withBytes { sk in
                withMessage(message) { m, count in
                    _ = crypto_sign_detached(&signature, nil, m, count, sk.bindMemory(to: UInt8.self).baseAddress!)
                }
            }
            return signature
        }
    }

    /// Whether `signature` is `publicKey`'s signature of `message`. Wrong lengths are false.
    package static func verify(signature: [UInt8], message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == signatureBytes, publicKey.count == publicKeyBytes else { return false }
        Sodium.ensureInitialized()
        return withMessage(message) { m, count in crypto_sign_verify_detached(signature, m, count, publicKey) == 0 }
    }
}

/// libsodium wants a non-null message pointer even for an empty message: one scratch byte then.
private func withMessage<R>(_ message: [UInt8], _ body: (UnsafePointer<UInt8>, UInt64) -> R) -> R {
    let bytes = message.isEmpty ? [0] : message
    return bytes.withUnsafeBufferPointer { body($0.baseAddress!, UInt64(message.count)) }
}

extension X25519Identity {
    /// Scoped read access to the secret scalar (for key derivation inside this module).
    func withSecretScalar<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R { secretBytes.withBytes(body) }
}
