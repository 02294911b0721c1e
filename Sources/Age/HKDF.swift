/// HKDF-SHA-256 (RFC 5869), built from HMAC because libsodium 1.0.18 has no HKDF.
///
/// age only ever asks for 32 bytes of output, which is exactly one SHA-256
/// block of HKDF-Expand: OKM = T(1) = HMAC(PRK, info || 0x01).
enum HKDF {
    /// Derives a 32-byte key. An empty salt is an HMAC key of zero length, which
    /// HMAC pads to the same block as RFC 5869's "HashLen zeros" default.
    static func sha256(ikm: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer, info: String) -> [UInt8] {
        var prk = Sodium.hmacSHA256(key: salt, parts: [ikm])
        defer { Sodium.memzero(&prk) }
        var infoBytes = Array(info.utf8)
        infoBytes.append(0x01)
        return prk.withUnsafeBytes { key in
            infoBytes.withUnsafeBytes { Sodium.hmacSHA256(key: key, parts: [$0]) }
        }
    }

    /// Array convenience for callers that already hold arrays.
    static func sha256(ikm: [UInt8], salt: [UInt8], info: String) -> [UInt8] {
        ikm.withUnsafeBytes { i in salt.withUnsafeBytes { s in sha256(ikm: i, salt: s, info: info) } }
    }
}
