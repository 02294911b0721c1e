import FoundationEssentials

/// Something a file can be encrypted to: turns a file key into stanzas.
public protocol Recipient: Sendable {
    /// Wraps the 16-byte file key into one or more stanzas for the header.
    func wrap(fileKey: [UInt8]) throws(AgeError) -> [Stanza]
}

/// Something that can decrypt files: recovers the file key from stanzas.
public protocol Identity: Sendable {
    /// Returns the file key if one of `stanzas` is addressed to this identity,
    /// nil if none is. Throws if a stanza of this identity's type is malformed,
    /// which stops decryption; throwing `AgeError.incorrectPassphrase` instead
    /// lets `Age.decrypt` go on with the next identity.
    func unwrap(stanzas: [Stanza]) throws(AgeError) -> [UInt8]?
}

/// age v1 file encryption (https://c2sp.org/age) on libsodium.
///
/// Whole-buffer API: the file and its plaintext are held in memory, which
/// suits credentials and keeps error handling all-or-nothing: `decrypt`
/// returns plaintext only if the whole file authenticated.
public enum Age {
    static let fileKeySize = 16

    /// Encrypts `plaintext` to `recipients`.
    ///
    /// - Parameter armored: wrap the result in ASCII armor (PEM).
    public static func encrypt(
        _ plaintext: Data,
        to recipients: [any Recipient],
        armored: Bool = false
    ) throws(AgeError) -> Data {
        Sodium.ensureInitialized()
        guard !recipients.isEmpty else { throw .noRecipients }
        if recipients.count > 1 && recipients.contains(where: { $0 is ScryptRecipient }) {
            throw .scryptRecipientNotAlone
        }
        var fileKey = Sodium.randomBytes(fileKeySize)
        defer { Sodium.memzero(&fileKey) }

        var stanzas: [Stanza] = []
        for recipient in recipients { stanzas += try recipient.wrap(fileKey: fileKey) }
        if stanzas.count > 1 && stanzas.contains(where: { $0.type == ScryptRecipient.stanzaType }) {
            throw .scryptRecipientNotAlone
        }
        // A custom recipient could hand us something unencodable; fail now, not at decryption.
        for (i, stanza) in stanzas.enumerated() {
            for arg in [stanza.type] + stanza.arguments where !Stanza.validArgument(arg) {
                throw .stanza(index: i + 1, type: AgeError.printable(stanza.type), .unencodableArgument)
            }
        }

        var header = Header.encodeWithoutMAC(stanzas)
        let mac = header.withUnsafeBytes { Header.computeMAC(fileKey: fileKey, header: $0) }
        header += Array(" \(Sodium.base64String(mac))\n".utf8)

        let nonce = Sodium.randomBytes(STREAM.nonceSize)
        var payloadKey = nonce.withUnsafeBytes { STREAM.payloadKey(fileKey: fileKey, nonce: $0) }
        defer { Sodium.memzero(&payloadKey) }

        let payloadSize = STREAM.encryptedSize(plaintext.count)
        var file = Data(count: header.count + nonce.count + payloadSize)
        file.withUnsafeMutableBytes { out in
            out.copyBytes(from: header)
            UnsafeMutableRawBufferPointer(rebasing: out[header.count...]).copyBytes(from: nonce)
            let payload = UnsafeMutableRawBufferPointer(rebasing: out[(header.count + nonce.count)...])
            plaintext.withUnsafeBytes { STREAM.encrypt(key: payloadKey, plaintext: $0, into: payload) }
        }
        return armored ? Armor.encode(file) : file
    }

    /// Decrypts an age file, binary or ASCII-armored (detected automatically).
    ///
    /// Identities are tried in order. Nothing is returned unless the header MAC
    /// and every payload chunk authenticate.
    public static func decrypt(_ file: Data, with identities: [any Identity]) throws(AgeError) -> Data {
        var result = decryptReleasing(file, with: identities)
        if let error = result.error {
            // Authenticated-but-incomplete plaintext is still plaintext: wipe it.
            result.plaintext.withUnsafeMutableBytes { Sodium.memzero($0) }
            throw error
        }
        return result.plaintext
    }

    /// Decrypts like `decrypt`, but on a payload error also returns the plaintext
    /// that authenticated before the error (what a streaming reader would have
    /// released). Used by the conformance tests.
    static func decryptReleasing(_ file: Data, with identities: [any Identity]) -> (plaintext: Data, error: AgeError?) {
        Sodium.ensureInitialized()
        let armored = file.withUnsafeBytes { Armor.looksArmored($0) }
        var binary = file
        if armored {
            do throws(AgeError) { binary = try Armor.decode(file) } catch { return (Data(), error) }
        }
        return binary.withUnsafeBytes { decryptBinary($0, with: identities) }
    }

    private static func decryptBinary(
        _ raw: UnsafeRawBufferPointer,
        with identities: [any Identity]
    ) -> (plaintext: Data, error: AgeError?) {
        var fileKey: [UInt8]
        let header: Header
        do throws(AgeError) {
            header = try Header.parse(raw)
            fileKey = try unwrapFileKey(header.stanzas, with: identities)
        } catch {
            return (Data(), error)
        }
        defer { Sodium.memzero(&fileKey) }

        let mac = Header.computeMAC(
            fileKey: fileKey,
            header: UnsafeRawBufferPointer(rebasing: raw[..<header.macInputLength])
        )
        guard Sodium.constantTimeEqual(mac, header.mac) else { return (Data(), .headerMACMismatch) }

        let payloadStart = header.payloadOffset + STREAM.nonceSize
        guard payloadStart <= raw.count else { return (Data(), .missingNonce) }
        var payloadKey = STREAM.payloadKey(
            fileKey: fileKey,
            nonce: UnsafeRawBufferPointer(rebasing: raw[header.payloadOffset..<payloadStart])
        )
        defer { Sodium.memzero(&payloadKey) }

        let ciphertext = UnsafeRawBufferPointer(rebasing: raw[payloadStart...])
        var plaintext = Data(count: max(ciphertext.count, 1))
        var released = 0
        var failure: AgeError?
        plaintext.withUnsafeMutableBytes { out in
            do throws(AgeError) {
                try STREAM.decrypt(key: payloadKey, ciphertext: ciphertext, into: out, released: &released)
            } catch {
                failure = error
            }
        }
        plaintext.count = released
        return (plaintext, failure)
    }

    /// Tries each identity in turn. A wrong passphrase does not stop the search
    /// (another passphrase may be right) but is reported if nothing else matches.
    private static func unwrapFileKey(_ stanzas: [Stanza], with identities: [any Identity]) throws(AgeError) -> [UInt8]
    {
        if stanzas.count > 1 && stanzas.contains(where: { $0.type == ScryptRecipient.stanzaType }) {
            throw .scryptNotAlone
        }
        // Checked after parsing so a malformed file is reported as such first.
        guard !identities.isEmpty else { throw .noIdentities }
        var wrongPassphrase = false
        for identity in identities {
            do throws(AgeError) {
                if let key = try identity.unwrap(stanzas: stanzas) { return key }
            } catch .incorrectPassphrase {
                wrongPassphrase = true
            }
        }
        if wrongPassphrase { throw .incorrectPassphrase }
        throw .noIdentityMatched(stanzaTypes: stanzas.map(\.type))
    }

    /// Parses an age identity file: one `AGE-SECRET-KEY-1…` per line, `#`
    /// comments and blank lines ignored, LF or CRLF line endings.
    ///
    /// Errors carry the line number but never the line's content.
    public static func parseIdentityFile(_ contents: String) throws(AgeError) -> [X25519Identity] {
        var identities: [X25519Identity] = []
        // age-keygen writes `# public key: age1…` above each key: kept as that key's hint.
        var publicKey: String?
        // Split on bytes: as Characters, "\r\n" is one grapheme and would not split on "\n".
        for (n, rawLine) in contents.utf8.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            var bytes = rawLine
            if bytes.last == 0x0D { bytes = bytes.dropLast() }
            let line = String(decoding: bytes, as: UTF8.self)
            if line.hasPrefix("# public key: ") { publicKey = String(line.dropFirst("# public key: ".count)) }
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("AGE-PLUGIN-") { throw .invalidIdentity(line: n + 1, .unsupportedType("plugin")) }
            do throws(AgeError) {
                identities.append(try X25519Identity(line, publicKey: publicKey))
            } catch .invalidIdentity(_, let problem) {
                throw .invalidIdentity(line: n + 1, problem)
            }
            publicKey = nil
        }
        if identities.isEmpty { throw .invalidIdentity(line: nil, .noIdentities) }
        return identities
    }
}
