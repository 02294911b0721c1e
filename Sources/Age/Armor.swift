import FoundationEssentials

/// The strict ASCII armor of age files: PEM with label `AGE ENCRYPTED FILE`,
/// 64-column canonical padded base64, no headers (RFC 7468 §3, strict form).
///
/// Only whitespace is tolerated around the block, and CRLF line endings are
/// accepted; everything else that would make the encoding malleable is refused.
public enum Armor {
    /// The opening line.
    public static let beginLine = "-----BEGIN AGE ENCRYPTED FILE-----"
    /// The closing line.
    public static let endLine = "-----END AGE ENCRYPTED FILE-----"

    private static let begin = Array(beginLine.utf8)
    private static let end = Array(endLine.utf8)

    /// Armors binary age data. The output ends with a newline.
    public static func encode(_ data: Data) -> Data {
        let encoded = data.withUnsafeBytes { Sodium.base64Encode($0, padded: true) }
        var out = begin
        out.reserveCapacity(encoded.count + encoded.count / 64 + begin.count + end.count + 4)
        out.append(0x0A)
        var start = 0
        while start < encoded.count {
            let stop = min(encoded.count, start + Stanza.columnsPerLine)
            out += encoded[start..<stop]
            out.append(0x0A)
            start = stop
        }
        out += end
        out.append(0x0A)
        return Data(out)
    }

    /// Removes the armor, returning the binary age file.
    public static func decode(_ text: Data) throws(AgeError) -> Data {
        let result: Result<[UInt8], AgeError> = text.withUnsafeBytes { raw in
            do throws(AgeError) { return .success(try decode(raw)) } catch { return .failure(error) }
        }
        return Data(try result.get())
    }

    static func decode(_ raw: UnsafeRawBufferPointer) throws(AgeError) -> [UInt8] {
        var reader = ArmorLineReader(buf: raw)

        // Leading blank lines are allowed; the first other line must open the block.
        while true {
            guard let line = reader.next() else { throw .armor(line: reader.lineNumber + 1, .unexpectedEnd) }
            if line.allSatisfy(isWhitespace) { continue }
            guard line.elementsEqual(begin) else { throw .armor(line: reader.lineNumber, .missingBeginLine) }
            break
        }

        var out: [UInt8] = []
        out.reserveCapacity(raw.count / 4 * 3)
        while true {
            guard let line = reader.next() else { throw .armor(line: reader.lineNumber + 1, .unexpectedEnd) }
            if line.elementsEqual(end) { break }
            if line.isEmpty { throw .armor(line: reader.lineNumber, .emptyLine) }
            if line.count > Stanza.columnsPerLine { throw .armor(line: reader.lineNumber, .lineTooLong) }
            guard let bytes = Sodium.base64Decode(UnsafeRawBufferPointer(rebasing: line), padded: true) else {
                throw .armor(line: reader.lineNumber, .invalidBase64)
            }
            out += bytes
            if bytes.count < Stanza.bytesPerLine {
                // Only the last data line may be short, and the end line follows it.
                guard let next = reader.next() else { throw .armor(line: reader.lineNumber + 1, .unexpectedEnd) }
                guard next.elementsEqual(end) else { throw .armor(line: reader.lineNumber, .missingEndLine) }
                break
            }
        }

        // After the block, whitespace only.
        let rest = raw[reader.offset...]
        if let bad = rest.firstIndex(where: { !isWhitespace($0) }) {
            let extraLines = raw[reader.offset..<bad].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
            throw .armor(line: reader.lineNumber + 1 + extraLines, .trailingGarbage)
        }
        return out
    }

    /// Whether `file` should be read as armored: binary age files begin with the
    /// version prefix, so anything else (non-empty) is treated as armor.
    static func looksArmored(_ raw: UnsafeRawBufferPointer) -> Bool {
        guard !raw.isEmpty else { return false }
        let n = min(raw.count, Header.versionPrefix.count)
        return !raw.prefix(n).elementsEqual(Header.versionPrefix.prefix(n))
    }

    private static func isWhitespace(_ c: UInt8) -> Bool {
        c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0B || c == 0x0C || c == 0x0D
    }
}

/// Lines split on LF with one trailing CR removed; the last line may lack an LF.
private struct ArmorLineReader {
    let buf: UnsafeRawBufferPointer
    private(set) var offset = 0
    private(set) var lineNumber = 0

    init(buf: UnsafeRawBufferPointer) { self.buf = buf }

    mutating func next() -> Slice<UnsafeRawBufferPointer>? {
        guard offset < buf.count else { return nil }
        let lf = buf[offset...].firstIndex(of: 0x0A)
        var line = buf[offset..<(lf ?? buf.count)]
        offset = (lf ?? buf.count - 1) + 1
        lineNumber += 1
        if line.last == 0x0D { line = line.dropLast() }
        return line
    }
}
