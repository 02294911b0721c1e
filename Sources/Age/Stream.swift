/// The STREAM payload: 64 KiB ChaCha20-Poly1305 chunks under a key derived
/// from the file key and a 16-byte nonce.
///
/// Chunk nonces are an 11-byte big-endian counter and a final-chunk flag byte,
/// so truncation at a chunk boundary and chunk reordering are both detected.
enum STREAM {
    static let chunkSize = 64 * 1024
    static let encryptedChunkSize = chunkSize + Sodium.tagBytes
    static let nonceSize = 16

    /// payload key = HKDF(ikm: file key, salt: nonce, info: "payload").
    static func payloadKey(fileKey: [UInt8], nonce: UnsafeRawBufferPointer) -> [UInt8] {
        fileKey.withUnsafeBytes { HKDF.sha256(ikm: $0, salt: nonce, info: "payload") }
    }

    /// Ciphertext size for `count` plaintext bytes (an empty file still has one chunk).
    static func encryptedSize(_ count: Int) -> Int {
        let chunks = max(1, (count + chunkSize - 1) / chunkSize)
        return count + chunks * Sodium.tagBytes
    }

    private static func chunkNonce(_ counter: Int, last: Bool) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: 12)
        var c = UInt64(counter)
        for i in stride(from: 10, through: 3, by: -1) {
            nonce[i] = UInt8(truncatingIfNeeded: c)
            c >>= 8
        }
        nonce[11] = last ? 1 : 0
        return nonce
    }

    /// Encrypts `plaintext` into `out`, which must hold `encryptedSize(plaintext.count)` bytes.
    static func encrypt(key: [UInt8], plaintext: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        let chunks = max(1, (plaintext.count + chunkSize - 1) / chunkSize)
        guard let outBase = out.baseAddress else { return }
        key.withUnsafeBytes { k in
            for i in 0..<chunks {
                let start = i * chunkSize
                let end = min(plaintext.count, start + chunkSize)
                let nonce = chunkNonce(i, last: i == chunks - 1)
                nonce.withUnsafeBytes { n in
                    Sodium.seal(
                        key: k,
                        nonce: n,
                        plaintext: UnsafeRawBufferPointer(rebasing: plaintext[start..<end]),
                        into: outBase + i * encryptedChunkSize
                    )
                }
            }
        }
    }

    /// Decrypts and authenticates `ciphertext` into `out` (at least as large).
    ///
    /// `released` counts plaintext bytes that were authenticated before any
    /// error, mirroring what a streaming reader would have handed out.
    static func decrypt(
        key: [UInt8],
        ciphertext: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawBufferPointer,
        released: inout Int
    ) throws(AgeError) {
        released = 0
        // No bytes after the nonce: not even the final chunk is there.
        guard !ciphertext.isEmpty, let outBase = out.baseAddress else { throw .truncatedPayload(chunks: 0) }
        var pos = 0
        var counter = 0
        let k = key
        func open(_ length: Int, last: Bool) -> Bool {
            chunkNonce(counter, last: last).withUnsafeBytes { n in
                k.withUnsafeBytes { kb in
                    Sodium.open(
                        key: kb,
                        nonce: n,
                        ciphertext: UnsafeRawBufferPointer(rebasing: ciphertext[pos..<(pos + length)]),
                        into: outBase + released
                    )
                }
            }
        }

        while true {
            let remaining = ciphertext.count - pos
            // Ran out without seeing a chunk flagged final.
            if remaining == 0 { throw .truncatedPayload(chunks: counter) }
            if remaining < encryptedChunkSize {
                // A short chunk can only be the final one.
                if remaining < Sodium.tagBytes { throw .truncatedPayload(chunks: counter) }
                if remaining == Sodium.tagBytes && counter > 0 { throw .emptyFinalChunk(chunk: counter + 1) }
                guard open(remaining, last: true) else { throw .payloadAuthenticationFailed(chunk: counter + 1) }
                released += remaining - Sodium.tagBytes
                return
            }
            // A full-size chunk may be final; try the likelier flag first.
            let atEnd = remaining == encryptedChunkSize
            var last = atEnd
            if !open(encryptedChunkSize, last: last) {
                last.toggle()
                guard open(encryptedChunkSize, last: last) else {
                    throw .payloadAuthenticationFailed(chunk: counter + 1)
                }
            }
            released += chunkSize
            pos += encryptedChunkSize
            counter += 1
            if last {
                if !atEnd { throw .trailingData(afterChunk: counter) }
                return
            }
        }
    }
}
