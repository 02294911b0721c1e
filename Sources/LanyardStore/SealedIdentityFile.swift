import Age
import FoundationEssentials

/// `identity.tpm`: the file store's age identity sealed by a TPM 2.0, as the TPM wrapped it. Only
/// the TPM that sealed it can open it (docs/store-format.md, "TPM-sealed identity"). It holds
/// nothing secret by itself: the store's public recipient, the name of the TPM storage key it
/// was sealed under, whether a PIN guards it, the store's recovery recipients, and the TPM's
/// public and private blobs of the sealed object (TPM2B_PUBLIC and TPM2B_PRIVATE as libtss2-mu
/// marshals them), in lowercase hex:
///
/// ```
/// # Lanyard file-store identity, sealed by a TPM 2.0 (docs/store-format.md)
/// lanyard-tpm-identity v1
/// recipient age1…
/// storage-key 000b…
/// pin no
/// recovery age1…
/// public 0030…
/// private 0091…
/// ```
///
/// Comment lines (`#`) may come only before the first line; then every line is one keyword, one
/// space and its value, in this order, `recovery` zero to 16 times, each line ending in `\n`.
/// The decoder is strict (``decode(_:)``): anything else is refused, naming the line and what is
/// wrong with it.
package struct SealedIdentityFile: Equatable, Sendable {
    /// The first line after the comments.
    package static let versionLine = "lanyard-tpm-identity v1"
    /// At most this many recovery recipients.
    package static let maximumRecoveryRecipients = 16

    /// The store's own recipient (`age1…`), the public half of the sealed identity.
    package var recipient: String
    /// The TPM name of the storage key the identity was sealed under: the name algorithm
    /// (0x000b, SHA-256) and the SHA-256 of the key's public area. Tells this machine's TPM from another.
    package var storageKeyName: [UInt8]
    /// Whether the sealed object has an authValue (a PIN), which the TPM's dictionary-attack
    /// lockout guards.
    package var pin: Bool
    /// Every other recipient `store.age` is encrypted to (`age1…`): the recovery keys.
    package var recoveryRecipients: [String]
    /// TPM2B_PUBLIC of the sealed object.
    package var publicBlob: [UInt8]
    /// TPM2B_PRIVATE of the sealed object (encrypted by the TPM under the storage key).
    package var privateBlob: [UInt8]

    package init(
        recipient: String,
        storageKeyName: [UInt8],
        pin: Bool,
        recoveryRecipients: [String],
        publicBlob: [UInt8],
        privateBlob: [UInt8]
    ) {
        self.recipient = recipient
        self.storageKeyName = storageKeyName
        self.pin = pin
        self.recoveryRecipients = recoveryRecipients
        self.publicBlob = publicBlob
        self.privateBlob = privateBlob
    }

    /// The storage key's name in hex (`000b…`), as tpm2-tools print it.
    package var storageKeyNameHex: String { Self.hex(storageKeyName) }

    /// The file's bytes.
    package func encoded() -> Data {
        var text =
            "# Lanyard file-store identity, sealed by a TPM 2.0: only that TPM can open it (docs/store-format.md)\n"
        text += Self.versionLine + "\n"
        text += "recipient \(recipient)\n"
        text += "storage-key \(storageKeyNameHex)\n"
        text += "pin \(pin ? "yes" : "no")\n"
        for recovery in recoveryRecipients { text += "recovery \(recovery)\n" }
        text += "public \(Self.hex(publicBlob))\n"
        text += "private \(Self.hex(privateBlob))\n"
        return Data(text.utf8)
    }

    /// Reads the file, refusing anything but what ``encoded()`` writes (comments aside).
    package static func decode(_ data: Data) throws(SealedIdentityFileError) -> SealedIdentityFile {
        guard data.count <= 16 * 1024 else {
            throw SealedIdentityFileError(line: nil, problem: "is larger than 16 KiB")
        }
        guard !data.isEmpty else { throw SealedIdentityFileError(line: nil, problem: "is empty") }
        guard data.last == 0x0A else {
            throw SealedIdentityFileError(line: nil, problem: "does not end with a line break")
        }
        var lines = [[UInt8]]()
        var current = [UInt8]()
        for byte in data {
            if byte == 0x0A {
                lines.append(current)
                current = []
            } else {
                current.append(byte)
            }
        }
        var index = 0
        func fail(_ problem: String) -> SealedIdentityFileError {
            SealedIdentityFileError(line: index + 1, problem: problem)
        }
        while index < lines.count, lines[index].first == UInt8(ascii: "#") {
            guard lines[index].allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
                throw fail("a comment with a control or non-ASCII character")
            }
            index += 1
        }
        guard index < lines.count, lines[index] == Array(versionLine.utf8) else {
            throw fail("expected \"\(versionLine)\"")
        }
        index += 1
        /// The value of the line `keyword VALUE` at `index`, or nil when the line has another keyword.
        func value(_ keyword: String) throws(SealedIdentityFileError) -> String? {
            guard index < lines.count else { return nil }
            let line = lines[index]
            let prefix = Array((keyword + " ").utf8)
            guard line.starts(with: prefix) else { return nil }
            let rest = line.dropFirst(prefix.count)
            guard !rest.isEmpty, rest.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw fail("\(keyword): expected one value of visible ASCII characters")
            }
            return String(decoding: rest, as: UTF8.self)
        }
        func required(_ keyword: String) throws(SealedIdentityFileError) -> String {
            guard let found = try value(keyword) else { throw fail("expected \"\(keyword) …\"") }
            return found
        }
        func recipientValue(_ keyword: String) throws(SealedIdentityFileError) -> String? {
            guard let text = try value(keyword) else { return nil }
            guard (try? X25519Recipient(text))?.string == text else {
                throw fail("\(keyword): not an age X25519 recipient (age1…)")
            }
            index += 1
            return text
        }
        guard let recipient = try recipientValue("recipient") else { throw fail("expected \"recipient age1…\"") }
        let name = try hexValue(try required("storage-key"), fail: fail)
        guard name.count == 34, name[0] == 0x00, name[1] == 0x0B else {
            throw fail("storage-key: expected a SHA-256 TPM name (000b and 32 bytes)")
        }
        index += 1
        let pin: Bool
        switch try required("pin") {
        case "yes": pin = true
        case "no": pin = false
        default: throw fail("pin: expected yes or no")
        }
        index += 1
        var recovery = [String]()
        while true {
            let line = index + 1
            guard let next = try recipientValue("recovery") else { break }
            guard recovery.count < maximumRecoveryRecipients else {
                throw SealedIdentityFileError(
                    line: line,
                    problem: "more than \(maximumRecoveryRecipients) recovery recipients"
                )
            }
            guard next != recipient, !recovery.contains(next) else {
                throw SealedIdentityFileError(line: line, problem: "recovery: a recipient named twice")
            }
            recovery.append(next)
        }
        let publicBlob = try hexValue(try required("public"), fail: fail)
        if let problem = Self.publicProblem(publicBlob, pin: pin) { throw fail("public: \(problem)") }
        index += 1
        let privateBlob = try hexValue(try required("private"), fail: fail)
        if let problem = Self.privateProblem(privateBlob) { throw fail("private: \(problem)") }
        index += 1
        guard index == lines.count else { throw fail("unexpected line after \"private\"") }
        return SealedIdentityFile(
            recipient: recipient,
            storageKeyName: name,
            pin: pin,
            recoveryRecipients: recovery,
            publicBlob: publicBlob,
            privateBlob: privateBlob
        )
    }

    /// Lowercase hex, every byte two digits.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Bytes from lowercase hex; anything else (uppercase, odd length, other characters) is refused,
    /// so each file has one spelling.
    static func hexValue(
        _ text: String,
        fail: (String) -> SealedIdentityFileError
    ) throws(SealedIdentityFileError) -> [UInt8] {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { throw fail("an odd number of hex digits") }
        func digit(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let high = digit(utf8[i]), let low = digit(utf8[i + 1]) else { throw fail("not lowercase hex") }
            bytes.append(high << 4 | low)
            i += 2
        }
        return bytes
    }

    /// Why `blob` is not the TPM2B_PUBLIC of a sealed data object as Lanyard makes them, or nil.
    /// The layout (TPM 2.0 Part 2): size, type (KEYEDHASH), nameAlg (SHA-256), objectAttributes,
    /// authPolicy (empty), keyedHash scheme (NULL), unique (a SHA-256 digest).
    static func publicProblem(_ blob: [UInt8], pin: Bool) -> String? {
        var reader = BigEndianReader(blob)
        guard let size = reader.u16(), Int(size) == blob.count - 2 else {
            return "its size field does not match its length (\(blob.count) bytes)"
        }
        guard reader.u16() == 0x0008 else { return "not a keyed-hash (sealed data) object" }
        guard reader.u16() == 0x000B else { return "its name algorithm is not SHA-256" }
        guard let attributes = reader.u32() else { return "ends inside objectAttributes" }
        let required: UInt32 = 0x0000_0002 | 0x0000_0010 | 0x0000_0040  // fixedTPM, fixedParent, userWithAuth
        // sensitiveDataOrigin, restricted, decrypt, sign
        let forbidden: UInt32 = 0x0000_0020 | 0x0001_0000 | 0x0002_0000 | 0x0004_0000
        guard attributes & required == required, attributes & forbidden == 0 else {
            return "objectAttributes are not those of a sealed data object"
        }
        guard (attributes & 0x0000_0400 == 0) == pin else {
            return pin
                ? "the object is noDA, but the file says a PIN guards it"
                : "the object is not noDA, but the file says it has no PIN"
        }
        guard reader.u16() == 0 else { return "it has an authPolicy (Lanyard seals without one)" }
        guard reader.u16() == 0x0010 else { return "its keyed-hash scheme is not NULL" }
        guard reader.u16() == 32, reader.skip(32) else { return "its unique field is not a SHA-256 digest" }
        guard reader.atEnd else { return "bytes follow the public area" }
        return nil
    }

    /// Why `blob` is not a TPM2B_PRIVATE, or nil: a size, then that many bytes (at most 1550,
    /// libtss2's buffer), which only the TPM can check.
    static func privateProblem(_ blob: [UInt8]) -> String? {
        var reader = BigEndianReader(blob)
        guard let size = reader.u16(), size > 0, Int(size) == blob.count - 2 else {
            return "its size field does not match its length (\(blob.count) bytes)"
        }
        guard size <= 1550 else { return "longer than a TPM2B_PRIVATE can be" }
        return nil
    }
}

/// A sealed-identity file that ``SealedIdentityFile/decode(_:)`` refused: which line (1-based;
/// nil for the file as a whole) and what is wrong. Never quotes the file.
package struct SealedIdentityFileError: Error, Equatable, Sendable {
    package let line: Int?
    package let problem: String

    package var description: String { line.map { "line \($0): \(problem)" } ?? problem }
}

/// Reads big-endian integers from bytes, as TPM structures are marshalled.
private struct BigEndianReader {
    let bytes: [UInt8]
    var offset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var atEnd: Bool { offset == bytes.count }
    mutating func u16() -> UInt16? {
        guard offset + 2 <= bytes.count else { return nil }
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }
    mutating func u32() -> UInt32? {
        guard let high = u16(), let low = u16() else { return nil }
        return UInt32(high) << 16 | UInt32(low)
    }
    mutating func skip(_ count: Int) -> Bool {
        guard offset + count <= bytes.count else { return false }
        offset += count
        return true
    }
}
