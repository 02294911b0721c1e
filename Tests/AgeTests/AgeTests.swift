import Foundation
import Testing

@testable import Age

func randomData(_ count: Int) -> Data { Data(Sodium.randomBytes(count)) }

func hexBytes(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var it = s.makeIterator()
    while let a = it.next(), let b = it.next() { out.append(UInt8(String([a, b]), radix: 16) ?? 0) }
    return out
}

@Suite("Round trips and building blocks")
struct AgeTests {
    @Test("X25519 round trip", arguments: [0, 1, 47, 48, 65535, 65536, 65537, 131_072, 131_073, 200_000])
    func x25519RoundTrip(size: Int) throws {
        let id = X25519Identity.generate()
        let plaintext = randomData(size)
        let file = try Age.encrypt(plaintext, to: [id.recipient])
        #expect(file.count == headerLength(file) + 16 + STREAM.encryptedSize(size))
        #expect(try Age.decrypt(file, with: [id]) == plaintext)
    }

    @Test("armored round trip", arguments: [0, 1, 47, 48, 1000, 65537])
    func armoredRoundTrip(size: Int) throws {
        let id = X25519Identity.generate()
        let plaintext = randomData(size)
        let file = try Age.encrypt(plaintext, to: [id.recipient], armored: true)
        let text = try #require(String(data: file, encoding: .ascii))
        #expect(text.hasPrefix(Armor.beginLine + "\n"))
        #expect(text.hasSuffix(Armor.endLine + "\n"))
        for line in text.split(separator: "\n") { #expect(line.count <= 64 || line.hasPrefix("-----")) }
        #expect(try Age.decrypt(file, with: [id]) == plaintext)
        // CRLF and surrounding whitespace are tolerated.
        let crlf = Data(("\n \t\n" + text.replacingOccurrences(of: "\n", with: "\r\n") + "  \n").utf8)
        #expect(try Age.decrypt(crlf, with: [id]) == plaintext)
        #expect(Armor.encode(try Armor.decode(file)) == file)
    }

    @Test("scrypt round trip and wrong passphrase")
    func scryptRoundTrip() throws {
        let plaintext = randomData(1000)
        let file = try Age.encrypt(plaintext, to: [try ScryptRecipient(passphrase: "correct horse", workFactor: 10)])
        #expect(try Age.decrypt(file, with: [try ScryptIdentity(passphrase: "correct horse")]) == plaintext)
        // Several passphrases: a wrong one does not stop the search.
        let ids: [any Identity] = [
            try ScryptIdentity(passphrase: "nope"), try ScryptIdentity(passphrase: "correct horse"),
        ]
        #expect(try Age.decrypt(file, with: ids) == plaintext)
        #expect(throws: AgeError.incorrectPassphrase) {
            try Age.decrypt(file, with: [try ScryptIdentity(passphrase: "battery staple")])
        }
        // The cap is enforced before scrypt runs.
        #expect(throws: AgeError.workFactorTooLarge(logN: 10, maximum: 9)) {
            try Age.decrypt(file, with: [try ScryptIdentity(passphrase: "correct horse", maxWorkFactor: 9)])
        }
        // An X25519 identity does not match a passphrase file.
        #expect(throws: AgeError.noIdentityMatched(stanzaTypes: ["scrypt"])) {
            try Age.decrypt(file, with: [X25519Identity.generate()])
        }
    }

    @Test("multiple recipients; any identity decrypts")
    func multipleRecipients() throws {
        let a = X25519Identity.generate()
        let b = X25519Identity.generate()
        let c = X25519Identity.generate()
        let plaintext = randomData(5000)
        let file = try Age.encrypt(plaintext, to: [a.recipient, b.recipient])
        #expect(try Age.decrypt(file, with: [b]) == plaintext)
        #expect(try Age.decrypt(file, with: [c, a]) == plaintext)
        #expect(throws: AgeError.noIdentityMatched(stanzaTypes: ["X25519", "X25519"])) {
            try Age.decrypt(file, with: [c])
        }
    }

    @Test("API misuse is reported")
    func misuse() throws {
        let id = X25519Identity.generate()
        #expect(throws: AgeError.noRecipients) { try Age.encrypt(Data(), to: []) }
        #expect(throws: AgeError.scryptRecipientNotAlone) {
            try Age.encrypt(Data(), to: [id.recipient, try ScryptRecipient(passphrase: "p", workFactor: 10)])
        }
        #expect(throws: AgeError.invalidWorkFactor(31)) { try ScryptRecipient(passphrase: "p", workFactor: 31) }
        #expect(throws: AgeError.emptyPassphrase) { try ScryptRecipient(passphrase: "") }
        let file = try Age.encrypt(Data("x".utf8), to: [id.recipient])
        #expect(throws: AgeError.noIdentities) { try Age.decrypt(file, with: []) }
        #expect(throws: AgeError.armor(line: 1, .missingBeginLine)) {
            try Age.decrypt(Data("hello\n".utf8), with: [id])
        }
    }

    @Test("keys: Bech32 encoding round-trips and errors are precise")
    func keys() throws {
        let id = X25519Identity.generate()
        let secret = id.secretKeyString
        #expect(secret.hasPrefix("AGE-SECRET-KEY-1") && secret == secret.uppercased() && secret.count == 74)
        let again = try X25519Identity(secret)
        #expect(again.recipient == id.recipient)
        let recipient = id.recipient.string
        #expect(recipient.hasPrefix("age1") && recipient.count == 62)
        #expect(try X25519Recipient(recipient) == id.recipient)

        // Spec example recipient parses.
        _ = try X25519Recipient("age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj")

        var mixed = Array(secret)
        let letter = try #require(mixed.indices.last { mixed[$0].isLetter })
        mixed[letter] = Character(mixed[letter].lowercased())
        #expect(throws: AgeError.invalidIdentity(line: nil, .mixedCase)) { try X25519Identity(String(mixed)) }
        var typo = Array(secret)
        typo[30] = typo[30] == "Q" ? "P" : "Q"
        #expect(throws: AgeError.invalidIdentity(line: nil, .invalidChecksum)) { try X25519Identity(String(typo)) }
        #expect(throws: AgeError.invalidIdentity(line: nil, .wrongPrefix(found: "age", expected: "AGE-SECRET-KEY-"))) {
            try X25519Identity(recipient)
        }
        #expect(throws: AgeError.invalidRecipient(.wrongPrefix(found: "AGE-SECRET-KEY-", expected: "age"))) {
            try X25519Recipient(secret)
        }
        #expect(throws: AgeError.invalidRecipient(.malformedBech32)) { try X25519Recipient("age1") }
        // Errors never echo the key.
        do {
            _ = try X25519Recipient(secret)
        } catch {
            #expect(!error.description.contains(secret) && !error.description.contains(String(secret.dropFirst(16))))
        }
    }

    /// The public key kept with a secret (age-keygen's `# public key:` line, Lanyard's unlock
    /// cache) only spares computing it: a wrong or unreadable one still decrypts, and the identity's
    /// recipient, which encryption uses, is always the one computed from the secret.
    @Test("a kept public key is a hint: a wrong one still decrypts and never becomes the recipient")
    func publicKeyHint() throws {
        let a = X25519Identity.generate()
        let other = X25519Identity.generate()
        let sealed = try Age.encrypt(Data("hello".utf8), to: [a.recipient])
        for hint in [a.recipient.string, other.recipient.string, "age1notakey", nil] as [String?] {
            let id = try X25519Identity(a.secretKeyString, publicKey: hint)
            #expect(try Age.decrypt(sealed, with: [id]) == Data("hello".utf8), "\(hint ?? "no hint")")
            #expect(id.recipient == a.recipient, "\(hint ?? "no hint")")
        }
        // A file whose comment names another key (edited by hand): still a's key.
        let edited = try Age.parseIdentityFile("# public key: \(other.recipient)\n\(a.secretKeyString)\n")
        #expect(edited.map(\.recipient) == [a.recipient])
        #expect(try Age.decrypt(sealed, with: edited) == Data("hello".utf8))
        // Another identity with a's public key as its hint does not open a's file.
        let impostor = try X25519Identity(other.secretKeyString, publicKey: a.recipient.string)
        #expect(throws: AgeError.self) { try Age.decrypt(sealed, with: [impostor]) }
    }

    @Test("identity file parsing")
    func identityFile() throws {
        let a = X25519Identity.generate()
        let b = X25519Identity.generate()
        let text = "# created: now\r\n# public key: \(a.recipient)\r\n\(a.secretKeyString)\r\n\n\(b.secretKeyString)"
        let ids = try Age.parseIdentityFile(text)
        #expect(ids.map(\.recipient) == [a.recipient, b.recipient])

        #expect(throws: AgeError.invalidIdentity(line: nil, .noIdentities)) {
            try Age.parseIdentityFile("# nothing\n\n")
        }
        #expect(throws: AgeError.invalidIdentity(line: 2, .invalidChecksum)) {
            // Change the last checksum character (to one that differs from it).
            try Age.parseIdentityFile(
                "# x\n\(a.secretKeyString.dropLast())\(a.secretKeyString.last == "Q" ? "P" : "Q")\n"
            )
        }
        #expect(throws: AgeError.invalidIdentity(line: 1, .unsupportedType("post-quantum (ML-KEM)"))) {
            try Age.parseIdentityFile("AGE-SECRET-KEY-PQ-1HZLGZUPT4ETPKDEV8HSGFDCYZ4E522W0A7PU2LHT8EH9W6YLNC3SW78XKG\n")
        }
        #expect(throws: AgeError.invalidIdentity(line: 1, .unsupportedType("plugin"))) {
            try Age.parseIdentityFile("AGE-PLUGIN-YUBIKEY-1QQQQQQ\n")
        }
    }

    @Test("HKDF-SHA-256 matches RFC 5869 (first 32 bytes)")
    func hkdf() {
        // Test case 1 (binary info, so computed through the same HMAC steps).
        let okm1Raw = rfcCase1()
        #expect(Vectors.hex(okm1Raw) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf")
        // Test case 3: empty salt and info (zero-length HMAC key).
        let okm3 = HKDF.sha256(ikm: [UInt8](repeating: 0x0b, count: 22), salt: [], info: "")
        #expect(Vectors.hex(okm3) == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d")
    }

    /// RFC 5869 case 1 has a binary info string, so run HKDF by hand from HMAC.
    private func rfcCase1() -> [UInt8] {
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let salt = [UInt8](0x00...0x0c)
        let info = [UInt8](0xf0...0xf9) + [1]
        let prk = salt.withUnsafeBytes { s in ikm.withUnsafeBytes { Sodium.hmacSHA256(key: s, parts: [$0]) } }
        return prk.withUnsafeBytes { k in info.withUnsafeBytes { Sodium.hmacSHA256(key: k, parts: [$0]) } }
    }

    @Test("base64 is canonical and unpadded in headers")
    func base64() {
        #expect(Sodium.base64Decode("AA") == [0])
        #expect(Sodium.base64Decode("AB") == nil)  // nonzero trailing bits
        #expect(Sodium.base64Decode("AA==") == nil)  // padding
        #expect(Sodium.base64Decode("A") == nil)
        #expect(Sodium.base64Decode("AAA") == [0, 0])
        #expect(Sodium.base64Decode("AAB") == nil)
        #expect(Sodium.base64Decode("AA==", padded: true) == [0])
        #expect(Sodium.base64Decode("AB==", padded: true) == nil)
        #expect(Sodium.base64Decode("AA", padded: true) == nil)
        #expect(Sodium.base64Decode("AA\n") == nil)
        // Bytes >= 0x80 fool libsodium 1.0.18's alphabet check (found by fuzzing).
        for high: UInt8 in [0x80, 0xC4, 0xFF] {
            let text: [UInt8] = [0x41, 0x41, high, 0x41]
            #expect(text.withUnsafeBytes { Sodium.base64Decode($0, padded: false) } == nil)
            #expect(text.withUnsafeBytes { Sodium.base64Decode($0, padded: true) } == nil)
        }
    }

    @Test("fuzzer findings stay fixed")
    func fuzzRegressions() throws {
        let id = X25519Identity.generate()
        let armor = try Data(
            contentsOf: URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().appendingPathComponent("../../Fuzz/seeds/armor/regression-high-bit-base64")
        )
        #expect(throws: AgeError.armor(line: 4, .invalidBase64)) { try Armor.decode(armor) }
        let header = try Data(
            contentsOf: URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().appendingPathComponent(
                    "../../Fuzz/seeds/header/regression-high-bit-base64"
                )
        )
        #expect(throws: AgeError.header(line: 3, .invalidBodyBase64)) { try Age.decrypt(header, with: [id]) }
    }
}

/// Length of the binary header (through the MAC line's LF).
func headerLength(_ file: Data) -> Int {
    let bytes = [UInt8](file)
    var i = 0
    while i + 3 < bytes.count {
        if bytes[i] == 0x0A, bytes[i + 1] == 0x2D, bytes[i + 2] == 0x2D, bytes[i + 3] == 0x2D {
            return (bytes[(i + 1)...].firstIndex(of: 0x0A) ?? bytes.count) + 1
        }
        i += 1
    }
    return bytes.count
}

/// A third-party recipient type that emits a stanza the header cannot carry.
private struct BrokenRecipient: Recipient {
    func wrap(fileKey: [UInt8]) throws(AgeError) -> [Stanza] {
        [Stanza(type: "example.com/broken", arguments: [""], body: [])]
    }
}

/// A third-party identity type: proves the protocols are usable from outside.
private struct FixedKeyIdentity: Identity {
    let key: [UInt8]
    func unwrap(stanzas: [Stanza]) throws(AgeError) -> [UInt8]? {
        stanzas.contains { $0.type == "example.com/fixed" } ? key : nil
    }
}

private struct FixedKeyRecipient: Recipient {
    func wrap(fileKey: [UInt8]) throws(AgeError) -> [Stanza] {
        [Stanza(type: "example.com/fixed", arguments: ["v1"], body: fileKey)]  // insecure: test only
    }
}

@Suite("Extensibility")
struct ExtensibilityTests {
    @Test("custom recipients and identities plug in; bad stanzas are refused at encryption")
    func custom() throws {
        #expect(throws: AgeError.stanza(index: 1, type: "example.com/broken", .unencodableArgument)) {
            try Age.encrypt(Data("x".utf8), to: [BrokenRecipient()])
        }
        let file = try Age.encrypt(Data("hello".utf8), to: [FixedKeyRecipient()])
        let header = try [UInt8](file).withUnsafeBytes { try Header.parse($0) }
        let key = header.stanzas[0].body
        #expect(
            try Age.decrypt(file, with: [X25519Identity.generate(), FixedKeyIdentity(key: key)]) == Data("hello".utf8)
        )
        #expect(throws: AgeError.headerMACMismatch) {
            try Age.decrypt(file, with: [FixedKeyIdentity(key: [UInt8](repeating: 0, count: 16))])
        }
        #expect(throws: AgeError.noIdentityMatched(stanzaTypes: ["example.com/fixed"])) {
            try Age.decrypt(file, with: [X25519Identity.generate()])
        }
    }
}
