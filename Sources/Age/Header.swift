/// The age v1 header: version line, recipient stanzas and the MAC line.
///
/// Parsing is strict and canonical (every header has exactly one encoding), so
/// the MAC can be checked over the bytes as read rather than a re-encoding.
struct Header {
    static let intro = Array("age-encryption.org/v1".utf8)
    static let versionPrefix = Array("age-encryption.org/".utf8)

    /// The recipient stanzas, in file order.
    var stanzas: [Stanza]
    /// The 32-byte header MAC.
    var mac: [UInt8]
    /// Number of leading bytes the MAC covers (through the `---` of the MAC line).
    var macInputLength: Int
    /// Offset of the first payload byte (the nonce), right after the MAC line.
    var payloadOffset: Int

    /// Parses a header from the start of `buf`; the payload is whatever follows.
    static func parse(_ buf: UnsafeRawBufferPointer) throws(AgeError) -> Header {
        var reader = LineReader(buf: buf)
        if buf.isEmpty { throw .header(line: 1, .empty) }

        // Version line.
        guard let first = reader.nextLine() else {
            let prefixLength = min(buf.count, versionPrefix.count)
            if buf.starts(with: versionPrefix[..<prefixLength]) { throw .header(line: 1, .unexpectedEnd) }
            throw .header(line: 1, .malformedVersionLine)
        }
        if !first.elementsEqual(intro) {
            if first.last == 0x0D, first.dropLast().elementsEqual(intro) { throw .header(line: 1, .carriageReturn) }
            if first.starts(with: versionPrefix) {
                let version = String(decoding: first.dropFirst(versionPrefix.count).prefix(32), as: UTF8.self)
                throw .header(line: 1, .unsupportedVersion(version))
            }
            throw .header(line: 1, .malformedVersionLine)
        }

        var stanzas: [Stanza] = []
        while true {
            let lineNumber = reader.lineNumber + 1
            let start = reader.offset
            guard let line = reader.nextLine() else { throw .header(line: lineNumber, .unexpectedEnd) }

            if line.starts(with: [0x2D, 0x2D, 0x2D]) {  // "---": the MAC line
                if line.last == 0x0D { throw .header(line: lineNumber, .carriageReturn) }
                let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
                guard parts.count == 2, parts[0].elementsEqual([0x2D, 0x2D, 0x2D]) else {
                    throw .header(line: lineNumber, .malformedMACLine)
                }
                guard let mac = Sodium.base64Decode(UnsafeRawBufferPointer(rebasing: parts[1]), padded: false),
                    mac.count == 32
                else { throw .header(line: lineNumber, .invalidMAC) }
                if stanzas.isEmpty { throw .header(line: lineNumber, .noStanzas) }
                return Header(stanzas: stanzas, mac: mac, macInputLength: start + 3, payloadOffset: reader.offset)
            }

            stanzas.append(try parseStanza(opening: line, lineNumber: lineNumber, reader: &reader))
        }
    }

    private static func parseStanza(
        opening line: Slice<UnsafeRawBufferPointer>,
        lineNumber: Int,
        reader: inout LineReader
    ) throws(AgeError) -> Stanza {
        guard line.starts(with: [0x2D, 0x3E]) else { throw .header(line: lineNumber, .malformedStanzaLine) }  // "->"
        if line.last == 0x0D { throw .header(line: lineNumber, .carriageReturn) }
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts[0].count == 2 else { throw .header(line: lineNumber, .malformedStanzaLine) }
        let args = parts.dropFirst()
        if args.isEmpty { throw .header(line: lineNumber, .noArguments) }
        var strings: [String] = []
        strings.reserveCapacity(args.count)
        for arg in args {
            if arg.isEmpty { throw .header(line: lineNumber, .emptyArgument) }
            guard arg.allSatisfy({ $0 >= 33 && $0 <= 126 }) else {
                throw .header(line: lineNumber, .invalidArgumentCharacter)
            }
            strings.append(String(decoding: arg, as: UTF8.self))
        }

        var body: [UInt8] = []
        while true {
            let bodyLine = reader.lineNumber + 1
            guard let text = reader.nextLine() else { throw .header(line: bodyLine, .unexpectedEnd) }
            // '-' is not a base64 symbol: a stanza or MAC line here means the body
            // never had its terminating short line.
            if text.starts(with: [0x2D, 0x3E]) || text.starts(with: [0x2D, 0x2D, 0x2D]) {
                throw .header(line: bodyLine, .missingFinalBodyLine)
            }
            if text.last == 0x0D { throw .header(line: bodyLine, .carriageReturn) }
            if text.count > Stanza.columnsPerLine { throw .header(line: bodyLine, .bodyLineTooLong) }
            guard let chunk = Sodium.base64Decode(UnsafeRawBufferPointer(rebasing: text), padded: false) else {
                throw .header(line: bodyLine, .invalidBodyBase64)
            }
            body += chunk
            if chunk.count < Stanza.bytesPerLine {
                return Stanza(type: strings[0], arguments: Array(strings.dropFirst()), body: body)
            }
        }
    }

    /// The header through `---`, which is what the MAC covers.
    static func encodeWithoutMAC(_ stanzas: [Stanza]) -> [UInt8] {
        var out = intro
        out.append(UInt8(ascii: "\n"))
        for stanza in stanzas { stanza.encode(into: &out) }
        out += Array("---".utf8)
        return out
    }

    /// The MAC key is HKDF(file key, salt: empty, info: "header").
    static func computeMAC(fileKey: [UInt8], header: UnsafeRawBufferPointer) -> [UInt8] {
        var key = fileKey.withUnsafeBytes { ikm in
            HKDF.sha256(ikm: ikm, salt: UnsafeRawBufferPointer(start: nil, count: 0), info: "header")
        }
        defer { Sodium.memzero(&key) }
        return key.withUnsafeBytes { Sodium.hmacSHA256(key: $0, parts: [header]) }
    }
}

/// Splits a buffer into LF-terminated lines; a final line without LF is not a line.
struct LineReader {
    let buf: UnsafeRawBufferPointer
    /// Offset of the next unread byte.
    private(set) var offset = 0
    /// Number of lines returned so far.
    private(set) var lineNumber = 0

    init(buf: UnsafeRawBufferPointer) { self.buf = buf }

    /// The next line without its LF, or nil if no LF remains.
    mutating func nextLine() -> Slice<UnsafeRawBufferPointer>? {
        guard offset < buf.count,
            let lf = buf[offset...].firstIndex(of: 0x0A)
        else { return nil }
        let line = buf[offset..<lf]
        offset = lf + 1
        lineNumber += 1
        return line
    }
}
