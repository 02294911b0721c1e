import Foundation
import Testing

@testable import Age

/// Damaged files: each kind of damage gets its own, precise error.
@Suite("Tamper and truncation")
struct TamperTests {
    let id = X25519Identity.generate()
    let plaintext = randomData(100_000)  // two chunks: 65536 + 34464

    func encrypt() throws -> Data { try Age.encrypt(plaintext, to: [id.recipient]) }

    func flip(_ file: Data, at index: Int, mask: UInt8 = 0x01) -> Data {
        var f = file
        f[f.startIndex + index] ^= mask
        return f
    }

    @Test("wrong passphrase")
    func wrongPassphrase() throws {
        let file = try Age.encrypt(plaintext, to: [try ScryptRecipient(passphrase: "right", workFactor: 10)])
        #expect(throws: AgeError.incorrectPassphrase) {
            try Age.decrypt(file, with: [try ScryptIdentity(passphrase: "wrong")])
        }
    }

    @Test("truncated file")
    func truncated() throws {
        let file = try encrypt()
        let h = headerLength(file)
        // Within the header.
        #expect(throws: AgeError.header(line: 4, .unexpectedEnd)) { try Age.decrypt(file.prefix(h - 5), with: [id]) }
        // Header only, or part of the nonce.
        #expect(throws: AgeError.missingNonce) { try Age.decrypt(file.prefix(h), with: [id]) }
        #expect(throws: AgeError.missingNonce) { try Age.decrypt(file.prefix(h + 10), with: [id]) }
        // Nonce but no chunk; first chunk only (cut at a chunk boundary).
        #expect(throws: AgeError.truncatedPayload(chunks: 0)) { try Age.decrypt(file.prefix(h + 16), with: [id]) }
        #expect(throws: AgeError.truncatedPayload(chunks: 1)) {
            try Age.decrypt(file.prefix(h + 16 + STREAM.encryptedChunkSize), with: [id])
        }
        // Cut inside the final chunk: indistinguishable from corruption of that chunk.
        #expect(throws: AgeError.payloadAuthenticationFailed(chunk: 2)) {
            try Age.decrypt(file.dropLast(1), with: [id])
        }
    }

    @Test("flipped byte in the header")
    func headerFlip() throws {
        let file = try encrypt()
        // Version line.
        #expect(throws: AgeError.header(line: 1, .unsupportedVersion("v0"))) {
            try Age.decrypt(flip(file, at: 20), with: [id])
        }
        // Stanza type: the file key can no longer be found.
        #expect(throws: AgeError.noIdentityMatched(stanzaTypes: ["X24519"])) {
            try Age.decrypt(flip(file, at: 27), with: [id])
        }
        // A stanza for someone else: only the MAC notices.
        let other = X25519Identity.generate()
        let two = try Age.encrypt(plaintext, to: [id.recipient, other.recipient])
        // The second "->".
        let secondStanza = try #require([UInt8](two).indices.filter { two[$0] == 0x3E }.dropFirst().first)
        #expect(throws: AgeError.headerMACMismatch) {
            try Age.decrypt(flip(two, at: secondStanza + 12), with: [id])
        }
    }

    @Test("flipped byte in the MAC")
    func macFlip() throws {
        let file = try encrypt()
        let h = headerLength(file)
        // First base64 symbol of the MAC; 'A'<->'B' style flips keep it valid base64.
        let index = h - 44
        #expect(file[index - 1] == 0x20)
        var tampered = file
        tampered[index] = file[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: AgeError.headerMACMismatch) { try Age.decrypt(tampered, with: [id]) }
    }

    @Test("flipped byte in the payload")
    func payloadFlip() throws {
        let file = try encrypt()
        let h = headerLength(file)
        #expect(throws: AgeError.payloadAuthenticationFailed(chunk: 1)) {
            try Age.decrypt(flip(file, at: h + 16 + 5), with: [id])
        }
        #expect(throws: AgeError.payloadAuthenticationFailed(chunk: 2)) {
            try Age.decrypt(flip(file, at: file.count - 1), with: [id])
        }
        // The nonce feeds the payload key, so it too breaks the first chunk.
        #expect(throws: AgeError.payloadAuthenticationFailed(chunk: 1)) {
            try Age.decrypt(flip(file, at: h + 3), with: [id])
        }
        // Appended bytes after the final chunk.
        #expect(throws: AgeError.payloadAuthenticationFailed(chunk: 2)) {
            try Age.decrypt(file + Data([0]), with: [id])
        }
    }

    @Test("trailing data after a full final chunk")
    func trailing() throws {
        let exact = try Age.encrypt(randomData(65536), to: [id.recipient])
        #expect(throws: AgeError.trailingData(afterChunk: 1)) {
            try Age.decrypt(exact + Data(repeating: 0, count: 20), with: [id])
        }
    }

    @Test("the five kinds of damage give five distinct messages")
    func distinct() throws {
        let file = try encrypt()
        let h = headerLength(file)
        var macTampered = file
        macTampered[h - 44] = file[h - 44] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let scryptFile = try Age.encrypt(plaintext, to: [try ScryptRecipient(passphrase: "right", workFactor: 10)])
        var errors: [AgeError] = []
        for (input, ids) in [
            (flip(file, at: 20), [id] as [any Identity]),
            (macTampered, [id]),
            (flip(file, at: h + 100), [id]),
            (file.prefix(h + 16 + STREAM.encryptedChunkSize), [id]),
            (scryptFile, [try ScryptIdentity(passphrase: "wrong")]),
        ] {
            do { _ = try Age.decrypt(input, with: ids) } catch { errors.append(error) }
        }
        #expect(errors.count == 5)
        #expect(Set(errors.map(\.description)).count == 5)
        for e in errors {
            print("  \(e.localizedDescription)")
            #expect(!e.description.contains(id.secretKeyString) && !e.description.contains("right"))
        }
    }

    @Test("every single-bit flip anywhere in a small file is caught")
    func exhaustive() throws {
        let small = try Age.encrypt(randomData(300), to: [id.recipient])
        let h = headerLength(small)
        for i in 0..<small.count {
            let result = Age.decryptReleasing(flip(small, at: i), with: [id])
            guard let error = result.error else {
                Issue.record("flip at \(i) went unnoticed")
                continue
            }
            if i >= h { #expect(error == .payloadAuthenticationFailed(chunk: 1), "byte \(i): \(error)") }
            #expect(result.plaintext.isEmpty, "byte \(i) released plaintext")
        }
    }
}
