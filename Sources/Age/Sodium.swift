import CSodium

/// Thin, internal wrapper over the libsodium primitives age needs.
///
/// All C interop lives here so the rest of the module deals only in Swift
/// buffers. libsodium marks most pointer parameters `nonnull` even for empty
/// inputs, so empty buffers are routed through a one-byte scratch pointer.
enum Sodium {
    /// Swift runs global initialisers exactly once, thread-safely (swift_once),
    /// which gives us the "call sodium_init() once" guarantee for free.
    private static let initialized: Bool = sodium_init() >= 0

    /// Makes sure libsodium is initialised; every public entry point calls it.
    static func ensureInitialized() {
        // sodium_init only fails if the OS cannot provide randomness; there is no
        // safe way to continue without it.
        guard initialized else { fatalError("libsodium failed to initialize") }
    }

    static let keyBytes = 32
    static let tagBytes = 16

    // MARK: Randomness and hygiene

    /// `count` bytes from the OS CSPRNG.
    static func randomBytes(_ count: Int) -> [UInt8] {
        ensureInitialized()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { buf in
            if let base = buf.baseAddress { randombytes_buf(base, buf.count) }
        }
        return out
    }

    /// Overwrites the array's storage with zeros in a way the optimiser keeps.
    static func memzero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buf in
            if let base = buf.baseAddress { sodium_memzero(base, buf.count) }
        }
    }

    /// Zeroes a raw buffer the optimiser would otherwise consider dead.
    static func memzero(_ buf: UnsafeMutableRawBufferPointer) {
        if let base = buf.baseAddress { sodium_memzero(base, buf.count) }
    }

    /// Constant-time equality for MACs.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                guard let x = pa.baseAddress, let y = pb.baseAddress else { return false }
                return sodium_memcmp(x, y, a.count) == 0
            }
        }
    }

    // MARK: ChaCha20-Poly1305 (IETF)

    /// Seals `plaintext` into `out` (which must hold plaintext.count + 16 bytes).
    static func seal(
        key: UnsafeRawBufferPointer,
        nonce: UnsafeRawBufferPointer,
        plaintext: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawPointer
    ) {
        var clen: UInt64 = 0
        withNonNull(key) { k in
            withNonNull(nonce) { n in
                withNonNull(plaintext) { m in
                    _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                        out.assumingMemoryBound(to: UInt8.self),
                        &clen,
                        m,
                        UInt64(plaintext.count),
                        nil,
                        0,
                        nil,
                        n,
                        k
                    )
                }
            }
        }
    }

    /// Opens `ciphertext` (payload || tag) into `out`; returns false if the tag is wrong.
    /// libsodium verifies the tag before writing any plaintext.
    static func open(
        key: UnsafeRawBufferPointer,
        nonce: UnsafeRawBufferPointer,
        ciphertext: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawPointer
    ) -> Bool {
        guard ciphertext.count >= tagBytes, key.count == keyBytes, nonce.count == 12 else { return false }
        var mlen: UInt64 = 0
        return withNonNull(key) { k in
            withNonNull(nonce) { n in
                withNonNull(ciphertext) { c in
                    crypto_aead_chacha20poly1305_ietf_decrypt(
                        out.assumingMemoryBound(to: UInt8.self),
                        &mlen,
                        nil,
                        c,
                        UInt64(ciphertext.count),
                        nil,
                        0,
                        n,
                        k
                    ) == 0
                }
            }
        }
    }

    /// One-shot seal with the all-zero nonce used by age's stanza bodies.
    static func sealZeroNonce(key: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        let nonce = [UInt8](repeating: 0, count: 12)
        var out = [UInt8](repeating: 0, count: plaintext.count + tagBytes)
        key.withUnsafeBytes { k in
            nonce.withUnsafeBytes { n in
                plaintext.withUnsafeBytes { p in
                    out.withUnsafeMutableBytes { o in
                        if let base = o.baseAddress { seal(key: k, nonce: n, plaintext: p, into: base) }
                    }
                }
            }
        }
        return out
    }

    /// One-shot open with the all-zero nonce; nil if authentication fails.
    static func openZeroNonce(key: [UInt8], ciphertext: [UInt8]) -> [UInt8]? {
        guard ciphertext.count >= tagBytes else { return nil }
        let nonce = [UInt8](repeating: 0, count: 12)
        // +1 keeps the buffer non-empty (nonnull) when the plaintext is empty.
        var out = [UInt8](repeating: 0, count: ciphertext.count - tagBytes + 1)
        let ok = key.withUnsafeBytes { k in
            nonce.withUnsafeBytes { n in
                ciphertext.withUnsafeBytes { c in
                    out.withUnsafeMutableBytes { o in
                        guard let base = o.baseAddress else { return false }
                        return open(key: k, nonce: n, ciphertext: c, into: base)
                    }
                }
            }
        }
        guard ok else { return nil }
        out.removeLast()
        return out
    }

    // MARK: X25519

    /// X25519(scalar, point); nil when the result is all zeros (low-order point).
    static func scalarmult(scalar: UnsafeRawBufferPointer, point: [UInt8]) -> [UInt8]? {
        guard scalar.count == 32, point.count == 32 else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        let rc = out.withUnsafeMutableBufferPointer { o in
            point.withUnsafeBytes { p in
                withNonNull(scalar) { s in
                    withNonNull(p) { pp in
                        guard let q = o.baseAddress else { return Int32(-1) }
                        return crypto_scalarmult(q, s, pp)
                    }
                }
            }
        }
        // libsodium already refuses small-order inputs; the explicit zero check is
        // what the spec mandates, so keep it regardless of the library's behaviour.
        let zero = out.withUnsafeBufferPointer { sodium_is_zero($0.baseAddress, 32) == 1 }
        if rc != 0 || zero {
            memzero(&out)
            return nil
        }
        return out
    }

    /// X25519(scalar, basepoint).
    static func scalarmultBase(scalar: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        guard scalar.count == 32 else { return out }
        out.withUnsafeMutableBufferPointer { o in
            withNonNull(scalar) { s in
                if let q = o.baseAddress { _ = crypto_scalarmult_base(q, s) }
            }
        }
        return out
    }

    // MARK: HMAC-SHA-256

    /// HMAC-SHA-256 over the concatenation of `parts`. The init/update/final API
    /// accepts keys of any length (the one-shot API insists on 32 bytes).
    static func hmacSHA256(key: UnsafeRawBufferPointer, parts: [UnsafeRawBufferPointer]) -> [UInt8] {
        var state = crypto_auth_hmacsha256_state()
        withNonNull(key) { k in _ = crypto_auth_hmacsha256_init(&state, k, key.count) }
        for part in parts {
            withNonNull(part) { p in _ = crypto_auth_hmacsha256_update(&state, p, UInt64(part.count)) }
        }
        var out = [UInt8](repeating: 0, count: 32)
        out.withUnsafeMutableBufferPointer { o in
            if let base = o.baseAddress { _ = crypto_auth_hmacsha256_final(&state, base) }
        }
        withUnsafeMutableBytes(of: &state) { memzero($0) }
        return out
    }

    /// SHA-256, for callers that need a digest (tests compare payload hashes).
    static func sha256(_ data: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        out.withUnsafeMutableBufferPointer { o in
            withNonNull(data) { d in
                if let q = o.baseAddress { _ = crypto_hash_sha256(q, d, UInt64(data.count)) }
            }
        }
        return out
    }

    // MARK: scrypt

    /// scrypt(N = 2^logN, r = 8, p = 1, dkLen = 32). Callers enforce the work-factor cap first.
    static func scrypt(password: UnsafeRawBufferPointer, salt: [UInt8], logN: Int) -> [UInt8]? {
        guard (1...62).contains(logN) else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        let rc = out.withUnsafeMutableBufferPointer { o in
            salt.withUnsafeBytes { s in
                withNonNull(password) { p in
                    withNonNull(s) { sp in
                        guard let base = o.baseAddress else { return Int32(-1) }
                        return crypto_pwhash_scryptsalsa208sha256_ll(
                            p,
                            password.count,
                            sp,
                            s.count,
                            UInt64(1) << UInt64(logN),
                            8,
                            1,
                            base,
                            32
                        )
                    }
                }
            }
        }
        guard rc == 0 else { return nil }
        return out
    }

    // MARK: Base64

    /// Decodes canonical base64 (RFC 4648 §3.5): any other spelling of the same
    /// bytes is rejected, so the encoding of a header is unique.
    static func base64Decode(_ text: UnsafeRawBufferPointer, padded: Bool) -> [UInt8]? {
        let n = text.count
        if n == 0 { return [] }
        guard let t = text.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        // Non-canonical encodings differ only in the unused low bits of the last
        // symbol; reject them explicitly rather than relying on library version.
        var significant = n
        if padded {
            guard n % 4 == 0 else { return nil }
            if t[n - 1] == UInt8(ascii: "=") { significant -= 1 }
            if t[n - 2] == UInt8(ascii: "=") { significant -= 1 }
        }
        // libsodium 1.0.18 reads input as (signed) char, and bytes >= 0x80 can
        // slip through its constant-time alphabet check as valid symbols (found
        // by fuzzing). Validate the alphabet here before handing it over.
        for i in 0..<significant where base64Value(t[i]) == nil { return nil }
        for i in significant..<n where t[i] != UInt8(ascii: "=") { return nil }
        switch significant % 4 {
        case 1: return nil
        case 2: guard let v = base64Value(t[significant - 1]), v & 0x0F == 0 else { return nil }
        case 3: guard let v = base64Value(t[significant - 1]), v & 0x03 == 0 else { return nil }
        default: break
        }
        var out = [UInt8](repeating: 0, count: n / 4 * 3 + 3)
        var len = 0
        let variant = padded ? sodium_base64_VARIANT_ORIGINAL : sodium_base64_VARIANT_ORIGINAL_NO_PADDING
        let rc = out.withUnsafeMutableBufferPointer { o in
            t.withMemoryRebound(to: CChar.self, capacity: n) { c in
                guard let base = o.baseAddress else { return Int32(-1) }
                // b64_end = nil: libsodium fails unless the whole input was consumed.
                return sodium_base642bin(base, o.count, c, n, nil, &len, nil, variant)
            }
        }
        guard rc == 0 else { return nil }
        out.removeSubrange(len...)
        return out
    }

    /// Convenience for decoding a Swift string (stanza arguments, keys).
    static func base64Decode(_ text: String, padded: Bool = false) -> [UInt8]? {
        var text = text
        return text.withUTF8 { base64Decode(UnsafeRawBufferPointer($0), padded: padded) }
    }

    /// Canonical base64 encoding, with or without `=` padding.
    static func base64Encode(_ bytes: UnsafeRawBufferPointer, padded: Bool) -> [UInt8] {
        if bytes.isEmpty { return [] }
        let variant = padded ? sodium_base64_VARIANT_ORIGINAL : sodium_base64_VARIANT_ORIGINAL_NO_PADDING
        let capacity = sodium_base64_encoded_len(bytes.count, variant)  // includes the NUL
        var out = [CChar](repeating: 0, count: capacity)
        out.withUnsafeMutableBufferPointer { o in
            guard let base = o.baseAddress, let src = bytes.baseAddress else { return }
            _ = sodium_bin2base64(base, capacity, src.assumingMemoryBound(to: UInt8.self), bytes.count, variant)
        }
        return out.prefix(capacity - 1).map { UInt8(bitPattern: $0) }
    }

    /// Convenience: unpadded base64 of an array as a String.
    static func base64String(_ bytes: [UInt8]) -> String {
        let encoded = bytes.withUnsafeBytes { base64Encode($0, padded: false) }
        return String(decoding: encoded, as: UTF8.self)
    }

    private static func base64Value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }

    /// Calls `body` with a non-null pointer even for empty buffers (libsodium's
    /// prototypes are `nonnull`; the length of zero makes the byte unread).
    private static func withNonNull<R>(_ buf: UnsafeRawBufferPointer, _ body: (UnsafePointer<UInt8>) -> R) -> R {
        if let base = buf.baseAddress {
            return body(base.assumingMemoryBound(to: UInt8.self))
        }
        var scratch: UInt8 = 0
        return withUnsafePointer(to: &scratch) { body($0) }
    }
}

/// Secret bytes owned by one object and wiped when it goes away.
///
/// Immutable after `init`, so sharing across threads is safe; the buffer is
/// never handed out except as a scoped read-only pointer.
final class SecretBytes: @unchecked Sendable {
    private let storage: UnsafeMutableRawBufferPointer

    /// Copies `bytes` into owned storage (callers wipe their own copy).
    init(_ bytes: UnsafeRawBufferPointer) {
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 16)
        if let src = bytes.baseAddress, let dst = storage.baseAddress {
            dst.copyMemory(from: src, byteCount: bytes.count)
        }
        count = bytes.count
    }

    /// Number of secret bytes.
    let count: Int

    /// Scoped read access.
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(storage)[0..<count]))
    }

    deinit {
        Sodium.memzero(storage)
        storage.deallocate()
    }
}

/// SHA-256 from the same libsodium age uses, for callers outside the codec that need a digest
/// (Lanyard fingerprints spent refresh tokens with it).
public enum SHA256 {
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        Sodium.ensureInitialized()
        return bytes.withUnsafeBytes { Sodium.sha256($0) }
    }
}
