import FoundationEssentials

/// Every way encrypting or decrypting an age file can fail.
///
/// Cases name the part of the file that failed (armor, header line, stanza,
/// MAC, payload chunk) so a user can tell corruption from a wrong key. Line,
/// stanza and chunk numbers are 1-based. Messages never contain key material,
/// passphrases or file contents beyond public stanza type names.
public enum AgeError: Error, Sendable, Equatable, LocalizedError, CustomStringConvertible {
    // MARK: Armor

    /// The ASCII armor is malformed at `line` (1-based, in the armored text).
    case armor(line: Int, ArmorProblem)

    // MARK: Header

    /// The header does not parse at `line` (1-based, counting the version line as 1).
    case header(line: Int, HeaderProblem)
    /// A stanza of a type this module implements is malformed. `index` is 1-based.
    case stanza(index: Int, type: String, StanzaProblem)
    /// An `scrypt` stanza shares the header with other stanzas, which the spec forbids.
    case scryptNotAlone
    /// The file's scrypt work factor (log2 N) exceeds the identity's limit; scrypt was not run.
    case workFactorTooLarge(logN: Int, maximum: Int)
    /// No identity could unwrap any stanza. Lists the stanza types the file has.
    case noIdentityMatched(stanzaTypes: [String])
    /// The file is passphrase-encrypted and the passphrase is wrong.
    case incorrectPassphrase
    /// The file key was unwrapped but the header MAC does not match: the header was altered.
    case headerMACMismatch

    // MARK: Payload

    /// The file ends before the 16-byte payload nonce that follows the header.
    case missingNonce
    /// Payload chunk `chunk` (1-based) failed authentication: corrupted, tampered or cut short.
    case payloadAuthenticationFailed(chunk: Int)
    /// The payload ends after `chunks` complete chunks without a final chunk.
    case truncatedPayload(chunks: Int)
    /// The final chunk `chunk` is empty, which is only allowed for an empty file.
    case emptyFinalChunk(chunk: Int)
    /// Bytes follow the final payload chunk (`afterChunk`, 1-based).
    case trailingData(afterChunk: Int)

    // MARK: Keys and API use

    /// An `age1…` recipient string is invalid.
    case invalidRecipient(KeyProblem)
    /// An `AGE-SECRET-KEY-1…` identity is invalid; `line` is set when it came from an identity file.
    case invalidIdentity(line: Int?, KeyProblem)
    /// `encrypt` was called without recipients.
    case noRecipients
    /// `decrypt` was called without identities.
    case noIdentities
    /// An scrypt (passphrase) recipient must be the only recipient of a file.
    case scryptRecipientNotAlone
    /// A scrypt work factor outside 1...30 was requested for encryption.
    case invalidWorkFactor(Int)
    /// An empty passphrase was given.
    case emptyPassphrase
    /// libsodium could not run scrypt at this work factor (out of memory).
    case scryptFailed(logN: Int)

    /// What exactly is wrong with the ASCII armor.
    public enum ArmorProblem: Sendable, Equatable {
        /// The first non-blank line is not `-----BEGIN AGE ENCRYPTED FILE-----`.
        case missingBeginLine
        /// An empty line inside the armored block.
        case emptyLine
        /// A line longer than 64 columns.
        case lineTooLong
        /// A line is not canonical, padded base64 (or has stray characters or spaces).
        case invalidBase64
        /// A short data line is not followed by `-----END AGE ENCRYPTED FILE-----`.
        case missingEndLine
        /// The input ends inside the armored block.
        case unexpectedEnd
        /// Something other than whitespace follows the end line.
        case trailingGarbage
    }

    /// What exactly is wrong with a header line.
    public enum HeaderProblem: Sendable, Equatable {
        /// The file has no bytes at all.
        case empty
        /// The header stops before its MAC line (truncated file).
        case unexpectedEnd
        /// The first line is not `age-encryption.org/v1`.
        case malformedVersionLine
        /// The version is not `v1`; the associated value is a sanitised excerpt.
        case unsupportedVersion(String)
        /// The line ends with CR LF; age headers use bare LF.
        case carriageReturn
        /// The line is neither a stanza (`-> `) nor the MAC line (`--- `).
        case malformedStanzaLine
        /// A stanza line has no type argument.
        case noArguments
        /// A stanza line has an empty argument (double or trailing space).
        case emptyArgument
        /// A stanza argument has a byte outside printable ASCII (33...126).
        case invalidArgumentCharacter
        /// A stanza body line is not canonical unpadded base64.
        case invalidBodyBase64
        /// A stanza body line is longer than 64 columns.
        case bodyLineTooLong
        /// A stanza body did not end with a line shorter than 64 columns.
        case missingFinalBodyLine
        /// The header has no recipient stanza.
        case noStanzas
        /// The MAC line is not exactly `--- ` followed by one base64 value.
        case malformedMACLine
        /// The MAC is not canonical unpadded base64 of 32 bytes.
        case invalidMAC
    }

    /// What exactly is wrong with a recognised stanza.
    public enum StanzaProblem: Sendable, Equatable {
        /// Wrong number of arguments after the type.
        case wrongArgumentCount(expected: Int, actual: Int)
        /// Argument `position` (1-based, after the type) is not canonical unpadded base64.
        case invalidBase64Argument(position: Int)
        /// Argument `position` decodes to the wrong number of bytes.
        case wrongArgumentLength(position: Int, expected: Int, actual: Int)
        /// The scrypt work factor is not a decimal number without sign or leading zeros.
        case malformedWorkFactor
        /// The body must be exactly 32 bytes (a 16-byte file key and its tag).
        case wrongBodyLength(actual: Int)
        /// The X25519 share is a low-order point (all-zero shared secret).
        case lowOrderShare
        /// (Encryption) a recipient produced an empty or non-printable argument.
        case unencodableArgument
    }

    /// What exactly is wrong with a Bech32 key string.
    public enum KeyProblem: Sendable, Equatable {
        /// Not Bech32: bad characters, missing separator or too short.
        case malformedBech32
        /// Upper- and lowercase letters are mixed.
        case mixedCase
        /// The Bech32 checksum does not match (typo?).
        case invalidChecksum
        /// The human-readable prefix is not the expected one.
        case wrongPrefix(found: String, expected: String)
        /// The key decodes to the wrong number of bytes.
        case wrongLength(Int)
        /// The public key is a low-order point; nothing can be encrypted to it.
        case lowOrderPoint
        /// A key type this module cannot use (post-quantum, plugin).
        case unsupportedType(String)
        /// An identity file holds no identity.
        case noIdentities
    }

    /// A one-line human readable explanation.
    public var description: String {
        switch self {
        case let .armor(line, problem):
            return "invalid ASCII armor at line \(line): \(problem.text)"
        case let .header(line, problem):
            return "invalid age header at line \(line): \(problem.text)"
        case let .stanza(index, type, problem):
            return "invalid \(Self.printable(type)) recipient stanza (stanza \(index)): \(problem.text)"
        case .scryptNotAlone:
            return "invalid age header: a passphrase (scrypt) stanza must be the only stanza in the file"
        case let .workFactorTooLarge(logN, maximum):
            return "scrypt work factor 2^\(logN == Int.max ? "(huge)" : String(logN)) "
                + "exceeds the maximum 2^\(maximum); refusing to run it"
        case let .noIdentityMatched(types):
            let shown = types.prefix(8).map { Self.printable($0) }.joined(separator: ", ")
            let more = types.count > 8 ? ", …" : ""
            // Say why when the file is for recipient types libsodium cannot do.
            let pq =
                types.contains { $0.hasPrefix("mlkem768") }
                ? "; post-quantum (ML-KEM) recipients are not supported" : ""
            return "no identity matched any recipient of the file (stanza types: \(shown)\(more))\(pq)"
        case .incorrectPassphrase:
            return "incorrect passphrase"
        case .headerMACMismatch:
            return "header MAC mismatch: the file header was modified or corrupted"
        case .missingNonce:
            return "file is truncated: it ends before the payload nonce"
        case let .payloadAuthenticationFailed(chunk):
            return "payload chunk \(chunk) failed authentication: the file is corrupted, tampered with or cut short"
        case let .truncatedPayload(chunks):
            return "payload is truncated: it ends after \(chunks) chunk\(chunks == 1 ? "" : "s") without a final chunk"
        case let .emptyFinalChunk(chunk):
            return "payload chunk \(chunk) is an empty final chunk, which only an empty file may have"
        case let .trailingData(chunk):
            return "trailing data after the final payload chunk \(chunk)"
        case let .invalidRecipient(problem):
            return "invalid age recipient: \(problem.text)"
        case let .invalidIdentity(line, problem):
            if let line { return "invalid age identity at line \(line): \(problem.text)" }
            return "invalid age identity: \(problem.text)"
        case .noRecipients:
            return "no recipients given"
        case .noIdentities:
            return "no identities given"
        case .scryptRecipientNotAlone:
            return "a passphrase (scrypt) recipient must be the only recipient"
        case let .invalidWorkFactor(n):
            return "scrypt work factor \(n) is outside 1...30"
        case .emptyPassphrase:
            return "passphrase is empty"
        case let .scryptFailed(logN):
            return "scrypt with work factor 2^\(logN) failed (not enough memory?)"
        }
    }

    /// `LocalizedError` hook so `localizedDescription` is useful.
    public var errorDescription: String? { description }

    /// Stanza types come from the file; keep them short and printable in messages.
    static func printable(_ s: String) -> String {
        let clean = String(s.unicodeScalars.filter { $0.value >= 33 && $0.value <= 126 }.map(Character.init))
        return clean.count > 40 ? String(clean.prefix(40)) + "…" : clean
    }
}

extension AgeError.ArmorProblem {
    var text: String {
        switch self {
        case .missingBeginLine:
            return "expected \"-----BEGIN AGE ENCRYPTED FILE-----\" (not an age file?)"
        case .emptyLine: return "empty line inside the armored data"
        case .lineTooLong: return "line is longer than 64 columns"
        case .invalidBase64: return "line is not canonical padded base64"
        case .missingEndLine: return "expected \"-----END AGE ENCRYPTED FILE-----\" after the last, short data line"
        case .unexpectedEnd: return "input ends before \"-----END AGE ENCRYPTED FILE-----\""
        case .trailingGarbage: return "unexpected data after the end line"
        }
    }
}

extension AgeError.HeaderProblem {
    var text: String {
        switch self {
        case .empty: return "file is empty"
        case .unexpectedEnd: return "header ends before its MAC line (truncated file?)"
        case .malformedVersionLine: return "expected \"age-encryption.org/v1\" (not an age file?)"
        case let .unsupportedVersion(v):
            return "unsupported version \"\(AgeError.printable(v))\" (only v1 is supported)"
        case .carriageReturn: return "line ends with CR LF; age headers use LF line endings"
        case .malformedStanzaLine: return "expected a stanza line \"-> TYPE ARGS…\" or the MAC line \"--- MAC\""
        case .noArguments: return "stanza line has no type"
        case .emptyArgument: return "stanza line has an empty argument (double or trailing space)"
        case .invalidArgumentCharacter: return "stanza argument has a character outside printable ASCII"
        case .invalidBodyBase64: return "stanza body line is not canonical unpadded base64"
        case .bodyLineTooLong: return "stanza body line is longer than 64 columns"
        case .missingFinalBodyLine: return "stanza body must end with a line shorter than 64 columns (possibly empty)"
        case .noStanzas: return "header has no recipient stanza"
        case .malformedMACLine: return "MAC line must be \"--- \" followed by the base64 MAC"
        case .invalidMAC: return "MAC is not canonical unpadded base64 of 32 bytes"
        }
    }
}

extension AgeError.StanzaProblem {
    var text: String {
        switch self {
        case let .wrongArgumentCount(expected, actual):
            return "expected \(expected) argument\(expected == 1 ? "" : "s") after the type, found \(actual)"
        case let .invalidBase64Argument(position):
            return "argument \(position) is not canonical unpadded base64"
        case let .wrongArgumentLength(position, expected, actual):
            return "argument \(position) is \(actual) bytes, expected \(expected)"
        case .malformedWorkFactor:
            return "work factor must be a decimal number without sign or leading zeros"
        case let .wrongBodyLength(actual):
            return "body is \(actual) bytes, expected 32"
        case .lowOrderShare:
            return "ephemeral share is a low-order point"
        case .unencodableArgument:
            return "an argument is empty or has a character outside printable ASCII"
        }
    }
}

extension AgeError.KeyProblem {
    var text: String {
        switch self {
        case .malformedBech32: return "not a valid Bech32 string"
        case .mixedCase: return "mixes upper- and lowercase letters"
        case .invalidChecksum: return "Bech32 checksum mismatch (typo?)"
        case let .wrongPrefix(found, expected):
            return "prefix \"\(AgeError.printable(found))\" is not \"\(expected)\""
        case let .wrongLength(n): return "key is \(n) bytes, expected 32"
        case .lowOrderPoint: return "public key is a low-order point"
        case let .unsupportedType(what): return "\(what) keys are not supported"
        case .noIdentities: return "no identity found"
        }
    }
}
