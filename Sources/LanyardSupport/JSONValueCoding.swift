import FoundationEssentials

/// A strict, fast JSON reader and writer for ``JSONValue`` (RFC 8259).
///
/// Foundation's Codable JSON costs about 100 µs per registry slot; this costs a few. Errors say
/// what is wrong and at which line and column, and never quote the document.
extension JSONValue {
    /// Parses one JSON document.
    package static func parse(_ data: Data) throws(JSONSyntaxError) -> JSONValue {
        try JSONParser.run(on: data) { parser throws(JSONSyntaxError) in try parser.document() }
    }

    /// Parses the one JSON value that starts at byte `offset` of `data`, ignoring what follows it
    /// (for reading one part of a large document without parsing the rest).
    package static func parseValue(in data: Data, at offset: Int) throws(JSONSyntaxError) -> JSONValue {
        try JSONParser.run(on: data) { parser throws(JSONSyntaxError) in
            parser.i = offset
            return try parser.value()
        }
    }

    /// Parses a document whose top level is an object, as strictly as ``parse(_:)``, without ever
    /// holding the member named `streamed` whole when it is an object: its members go one by one
    /// to `element` (and `member` gets an empty object in its place); every other top-level member
    /// goes to `member`. For large maps (the registry's slots), peak memory is one element's tree.
    /// - Returns: nil for an object; any other document whole (for the caller's shape check).
    package static func parseStreaming(
        _ data: Data,
        streamed: String,
        member: (String, JSONValue) -> Void,
        element: (String, JSONValue) -> Void
    ) throws(JSONSyntaxError) -> JSONValue? {
        try JSONParser.run(on: data) { parser throws(JSONSyntaxError) in
            try parser.streamedDocument(streamed: streamed, member: member) { name, reader throws(JSONSyntaxError) in
                element(name, try reader.value())
            }
        }
    }

    /// ``parseStreaming(_:streamed:member:element:)`` where `element` reads each element's value
    /// itself from a ``JSONReader`` positioned at it (and must read exactly that value): a decoder
    /// that knows the shape it expects builds its result without the intermediate tree.
    package static func parseStreaming(
        _ data: Data,
        streamed: String,
        member: (String, JSONValue) -> Void,
        reader element: (String, inout JSONReader) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) -> JSONValue? {
        try JSONParser.run(on: data) { parser throws(JSONSyntaxError) in
            try parser.streamedDocument(streamed: streamed, member: member, element: element)
        }
    }

    /// The document as UTF-8 text: keys sorted; `pretty` indents by two spaces.
    package func serialized(pretty: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out, pretty: pretty, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(0x0a)
        // A plain loop: appending a `repeatElement` goes through the generic (slow) path.
        for _ in 0..<(indent * 2) { out.append(0x20) }
    }

    func write(to out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n):
            if n.rounded() == n && abs(n) < 1e15 {
                out.append(contentsOf: String(Int64(n)).utf8)
            } else {
                out.append(contentsOf: "\(n)".utf8)
            }
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let items):
            if items.isEmpty {
                out.append(contentsOf: "[]".utf8)
                return
            }
            out.append(0x5b)
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(0x2c) }
                if pretty { JSONValue.newline(&out, indent + 1) }
                item.write(to: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { JSONValue.newline(&out, indent) }
            out.append(0x5d)
        case .object(let dict):
            if dict.isEmpty {
                out.append(contentsOf: "{}".utf8)
                return
            }
            out.append(0x7b)
            for (i, element) in dict.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { out.append(0x2c) }
                if pretty { JSONValue.newline(&out, indent + 1) }
                JSONValue.writeString(element.key, to: &out)
                out.append(0x3a)
                if pretty { out.append(0x20) }
                element.value.write(to: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { JSONValue.newline(&out, indent) }
            out.append(0x7d)
        }
    }

    /// Writes `s` as a JSON string. Besides what JSON requires (quote, backslash, C0 controls),
    /// DEL, C1 controls, bidi marks and overrides and the line and paragraph separators
    /// (``TerminalText/isUnsafe(_:keepLineBreaks:)``) are written as `\uXXXX`: the document means
    /// the same, and printing it on a terminal cannot act on them.
    static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(0x22)
        // Most strings need no escaping: copy them whole. Native strings are scanned in place
        // (String.UTF8View's generic iteration cost several times more). 0xC2, 0xD8 and 0xE2 lead
        // the UTF-8 of every escaped character above ASCII.
        let clean = s.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            for b in bytes where b < 0x20 || b == 0x22 || b == 0x5c || b == 0x7f || b == 0xc2 || b == 0xd8 || b == 0xe2
            { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if clean == true {
            out.append(0x22)
            return
        }
        let hex = Array("0123456789abcdef".utf8)
        for scalar in s.unicodeScalars {
            switch scalar.value {
            case 0x22:
                out.append(0x5c)
                out.append(0x22)
            case 0x5c:
                out.append(0x5c)
                out.append(0x5c)
            case 0x0a:
                out.append(0x5c)
                out.append(0x6e)
            case 0x0d:
                out.append(0x5c)
                out.append(0x72)
            case 0x09:
                out.append(0x5c)
                out.append(0x74)
            case let v where v < 0x80 && !TerminalText.isUnsafe(scalar):
                out.append(UInt8(v))
            case let v where TerminalText.isUnsafe(scalar):
                out.append(contentsOf: [
                    0x5c, 0x75, hex[Int(v >> 12 & 0xf)], hex[Int(v >> 8 & 0xf)], hex[Int(v >> 4 & 0xf)],
                    hex[Int(v & 0xf)],
                ])
            default:
                UTF8.encode(scalar) { out.append($0) }
            }
        }
        out.append(0x22)
    }
}

/// Writes one JSON document piece by piece, byte for byte as ``JSONValue/serialized(pretty:)``
/// writes the same document, for long outputs whose keys the caller already has in order:
/// no dictionary is built and no keys are sorted. Keys must be given in sorted order.
package struct JSONWriter {
    package private(set) var bytes: [UInt8] = []
    let pretty: Bool
    /// Members written so far at each open level.
    var counts: [Int] = []

    package init(pretty: Bool, capacity: Int = 256) {
        self.pretty = pretty
        bytes.reserveCapacity(capacity)
    }

    /// Opens an object (as a value: after ``key(_:)``, in an array, or at the top).
    package mutating func beginObject() { open(0x7b) }
    package mutating func endObject() { close(0x7d) }
    /// Opens an array.
    package mutating func beginArray() { open(0x5b) }
    package mutating func endArray() { close(0x5d) }

    /// The next member's key; its value follows.
    package mutating func key(_ key: String) {
        member()
        JSONValue.writeString(key, to: &bytes)
        bytes.append(0x3a)
        if pretty { bytes.append(0x20) }
    }

    /// The next member's key, a literal that needs no escaping (copied as it is: the cheap path
    /// for the fixed keys of long outputs).
    package mutating func key(_ key: StaticString) {
        member()
        bytes.append(0x22)
        bytes.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        bytes.append(0x22)
        bytes.append(0x3a)
        if pretty { bytes.append(0x20) }
    }

    /// A whole value: after ``key(_:)``, or as the next array element.
    package mutating func value(_ value: JSONValue) {
        if !afterKey { member() }
        afterKey = false
        value.write(to: &bytes, pretty: pretty, indent: counts.count)
    }

    /// The document as text.
    package var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Hands the bytes written so far to `sink` and forgets them (keeping the buffer), so a long
    /// document goes out in pieces instead of being held whole.
    package mutating func flush(to sink: ([UInt8]) -> Void) {
        sink(bytes)
        bytes.removeAll(keepingCapacity: true)
    }

    /// Ends the output with a newline (as a line of output).
    package mutating func newline() { bytes.append(0x0a) }

    private var afterKey = false

    private mutating func member() {
        guard !counts.isEmpty else { return }
        if counts[counts.count - 1] > 0 { bytes.append(0x2c) }
        counts[counts.count - 1] += 1
        if pretty { JSONValue.newline(&bytes, counts.count) }
        afterKey = true
    }

    private mutating func open(_ bracket: UInt8) {
        if !afterKey { member() }
        afterKey = false
        bytes.append(bracket)
        counts.append(0)
    }

    private mutating func close(_ bracket: UInt8) {
        let count = counts.removeLast()
        if count > 0 && pretty { JSONValue.newline(&bytes, counts.count) }
        bytes.append(bracket)
    }
}

/// Reads one JSON value piece by piece, with the parser's checks and error positions. A copy
/// remembers the position: assigning it back rewinds (to read the same value another way).
package struct JSONReader {
    fileprivate var parser: JSONParser

    /// The next byte of the value here (after white space), or nil at the end.
    package mutating func peek() -> UInt8? {
        parser.skipSpace()
        return parser.i < parser.bytes.count ? parser.bytes[parser.i] : nil
    }

    /// The whole value here, as a tree.
    package mutating func value() throws(JSONSyntaxError) -> JSONValue { try parser.value() }

    /// The string here (the caller checked `peek() == "\""`).
    package mutating func string() throws(JSONSyntaxError) -> String { try parser.string() }

    /// `true` or `false` here, or nil (nothing read) when it is something else.
    package mutating func bool() throws(JSONSyntaxError) -> Bool? {
        switch peek() {
        case 0x74:
            try parser.literal("true")
            return true
        case 0x66:
            try parser.literal("false")
            return false
        default: return nil
        }
    }

    /// Reads `null` when it is here; false (nothing read) otherwise.
    package mutating func null() throws(JSONSyntaxError) -> Bool {
        guard peek() == 0x6e else { return false }
        try parser.literal("null")
        return true
    }

    /// Walks the object here (the caller checked `peek() == "{"`), handing each key to `body`,
    /// which reads the member's value and says whether the key was new (false: "duplicate key").
    package mutating func members(
        _ body: (String, inout JSONReader) throws(JSONSyntaxError) -> Bool
    ) throws(JSONSyntaxError) {
        try parser.members { key, inner throws(JSONSyntaxError) in
            var reader = JSONReader(parser: inner)
            defer { inner = reader.parser }
            return try body(key, &reader)
        }
    }
}

/// A JSON document that is not well-formed: what was wrong and where.
package struct JSONSyntaxError: Error, Equatable, Sendable, LocalizedError {
    package let line: Int
    package let column: Int
    package let problem: String
    package var errorDescription: String? { "line \(line), column \(column): \(problem)" }
}

private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var i = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Runs `body` with a parser over `data`'s bytes (valid only inside `body`).
    static func run<R>(
        on data: Data,
        _ body: (inout JSONParser) throws(JSONSyntaxError) -> R
    ) throws(JSONSyntaxError) -> R {
        let result: Result<R, JSONSyntaxError> = data.withUnsafeBytes { raw in
            var parser = JSONParser(bytes: raw.bindMemory(to: UInt8.self))
            do throws(JSONSyntaxError) { return .success(try body(&parser)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    func fail(_ problem: String) -> JSONSyntaxError {
        var line = 1
        var column = 1
        for k in 0..<min(i, bytes.count) {
            if bytes[k] == 0x0a {
                line += 1
                column = 1
            } else if bytes[k] & 0xc0 != 0x80 {
                column += 1
            }
        }
        return JSONSyntaxError(line: line, column: column, problem: problem)
    }

    mutating func document() throws(JSONSyntaxError) -> JSONValue {
        skipSpace()
        if i < bytes.count, bytes[i] == 0xef { throw fail("byte-order mark") }
        let v = try value()
        skipSpace()
        guard i == bytes.count else { throw fail("unexpected text after the document") }
        return v
    }

    /// ``JSONValue/parseStreaming(_:streamed:member:element:)``: `document()` for a top-level
    /// object, with the same checks (duplicate keys, nesting, trailing text) in the same places.
    mutating func streamedDocument(
        streamed: String,
        member: (String, JSONValue) -> Void,
        element: (String, inout JSONReader) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) -> JSONValue? {
        skipSpace()
        if i < bytes.count, bytes[i] == 0xef { throw fail("byte-order mark") }
        guard i < bytes.count else { throw fail("unexpected end of document") }
        guard bytes[i] == 0x7b else { return try document() }  // not an object: the caller's shape check reports it
        var keys = Set<String>()
        try members { key, parser throws(JSONSyntaxError) in
            if key == streamed, parser.i < parser.bytes.count, parser.bytes[parser.i] == 0x7b {
                var names = Set<String>()
                try parser.members { name, inner throws(JSONSyntaxError) in
                    var reader = JSONReader(parser: inner)
                    defer { inner = reader.parser }
                    try element(name, &reader)
                    return names.insert(name).inserted
                }
                member(key, .object([:]))
            } else {
                member(key, try parser.value())
            }
            return keys.insert(key).inserted
        }
        skipSpace()
        guard i == bytes.count else { throw fail("unexpected text after the document") }
        return nil
    }

    /// Walks the object at `i`, handing each key to `body`, which must read the member's value and
    /// say whether the key was new (false: a duplicate key, a syntax error).
    mutating func members(_ body: (String, inout JSONParser) throws(JSONSyntaxError) -> Bool) throws(JSONSyntaxError) {
        try nest()
        i += 1
        skipSpace()
        if i < bytes.count, bytes[i] == 0x7d {
            i += 1
            depth -= 1
            return
        }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == 0x22 else { throw fail("expected a string key") }
            let key = try string()
            skipSpace()
            guard i < bytes.count, bytes[i] == 0x3a else { throw fail("expected ':' after a key") }
            i += 1
            skipSpace()
            guard try body(key, &self) else { throw fail("duplicate key") }
            skipSpace()
            guard i < bytes.count else { throw fail("unexpected end of document inside an object") }
            if bytes[i] == 0x2c {
                i += 1
                continue
            }
            if bytes[i] == 0x7d {
                i += 1
                depth -= 1
                return
            }
            throw fail("expected ',' or '}' in an object")
        }
    }

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0a || bytes[i] == 0x0d || bytes[i] == 0x09 { i += 1 }
    }

    mutating func value() throws(JSONSyntaxError) -> JSONValue {
        guard i < bytes.count else { throw fail("unexpected end of document") }
        switch bytes[i] {
        case 0x7b: return try object()
        case 0x5b: return try array()
        case 0x22: return .string(try string())
        case 0x74:
            try literal("true")
            return .bool(true)
        case 0x66:
            try literal("false")
            return .bool(false)
        case 0x6e:
            try literal("null")
            return .null
        case 0x2d, 0x30...0x39: return .number(try number())
        default: throw fail("unexpected character")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard i + w.count <= bytes.count, zip(w, bytes[i..<(i + w.count)]).allSatisfy({ $0 == $1 }) else {
            throw fail("unexpected character")
        }
        i += w.count
    }

    mutating func nest() throws(JSONSyntaxError) {
        depth += 1
        if depth > 256 { throw fail("nested more than 256 levels") }
    }

    mutating func object() throws(JSONSyntaxError) -> JSONValue {
        var dict: [String: JSONValue] = [:]
        dict.reserveCapacity(8)  // stored objects have a handful of members: no regrowth on the way
        try members { key, parser throws(JSONSyntaxError) in dict.updateValue(try parser.value(), forKey: key) == nil }
        return .object(dict)
    }

    mutating func array() throws(JSONSyntaxError) -> JSONValue {
        try nest()
        i += 1
        var items: [JSONValue] = []
        skipSpace()
        if i < bytes.count, bytes[i] == 0x5d {
            i += 1
            depth -= 1
            return .array(items)
        }
        while true {
            skipSpace()
            items.append(try value())
            skipSpace()
            guard i < bytes.count else { throw fail("unexpected end of document inside an array") }
            if bytes[i] == 0x2c {
                i += 1
                continue
            }
            if bytes[i] == 0x5d {
                i += 1
                depth -= 1
                return .array(items)
            }
            throw fail("expected ',' or ']' in an array")
        }
    }

    mutating func string() throws(JSONSyntaxError) -> String {
        i += 1
        let start = i
        // Fast path: no escapes.
        var ascii = true
        while i < bytes.count, bytes[i] != 0x22, bytes[i] != 0x5c, bytes[i] >= 0x20 {
            ascii = ascii && bytes[i] < 0x80
            i += 1
        }
        if i < bytes.count, bytes[i] == 0x22 {
            let slice = UnsafeBufferPointer(rebasing: bytes[start..<i])
            i += 1
            if ascii { return String(decoding: slice, as: UTF8.self) }
            guard let s = String(validating: slice, as: UTF8.self) else { throw fail("invalid UTF-8 in a string") }
            return s
        }
        var out = Array(bytes[start..<i])
        while true {
            guard i < bytes.count else { throw fail("unterminated string") }
            let b = bytes[i]
            if b == 0x22 {
                i += 1
                break
            }
            if b < 0x20 { throw fail("control character in a string") }
            if b != 0x5c {
                out.append(b)
                i += 1
                continue
            }
            i += 1
            guard i < bytes.count else { throw fail("unterminated escape") }
            let e = bytes[i]
            i += 1
            switch e {
            case 0x22, 0x5c, 0x2f: out.append(e)
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0c)
            case 0x6e: out.append(0x0a)
            case 0x72: out.append(0x0d)
            case 0x74: out.append(0x09)
            case 0x75:
                var scalar = try hex4()
                if (0xd800...0xdbff).contains(scalar) {
                    guard i + 1 < bytes.count, bytes[i] == 0x5c, bytes[i + 1] == 0x75 else {
                        throw fail("unpaired surrogate")
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xdc00...0xdfff).contains(low) else { throw fail("unpaired surrogate") }
                    scalar = 0x10000 + ((scalar - 0xd800) << 10) + (low - 0xdc00)
                } else if (0xdc00...0xdfff).contains(scalar) {
                    throw fail("unpaired surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("invalid escape")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8 in a string") }
        return s
    }

    mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[i]
            let d: UInt8
            switch b {
            case 0x30...0x39: d = b - 0x30
            case 0x41...0x46: d = b - 0x37
            case 0x61...0x66: d = b - 0x57
            default: throw fail("invalid \\u escape")
            }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    mutating func number() throws(JSONSyntaxError) -> Double {
        let start = i
        if bytes[i] == 0x2d { i += 1 }
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.i
            while p.i < p.bytes.count, p.bytes[p.i] >= 0x30, p.bytes[p.i] <= 0x39 { p.i += 1 }
            return p.i - s
        }
        guard i < bytes.count else { throw fail("invalid number") }
        if bytes[i] == 0x30 { i += 1 } else if digits(&self) == 0 { throw fail("invalid number") }
        if i < bytes.count, bytes[i] == 0x2e {
            i += 1
            guard digits(&self) > 0 else { throw fail("invalid number") }
        }
        if i < bytes.count, bytes[i] == 0x65 || bytes[i] == 0x45 {
            i += 1
            if i < bytes.count, bytes[i] == 0x2b || bytes[i] == 0x2d { i += 1 }
            guard digits(&self) > 0 else { throw fail("invalid number") }
        }
        guard let n = Double(String(decoding: bytes[start..<i], as: UTF8.self)), n.isFinite else {
            throw fail("invalid number")
        }
        return n
    }
}
