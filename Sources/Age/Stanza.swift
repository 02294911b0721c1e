/// One recipient stanza of an age header: `-> type args…` followed by a
/// base64 body wrapped at 64 columns.
///
/// Recipients produce stanzas and identities consume them; the header codec
/// takes care of their textual form.
public struct Stanza: Sendable, Equatable {
    /// The first argument, naming the recipient type (e.g. `X25519`, `scrypt`).
    public var type: String
    /// The remaining arguments.
    public var arguments: [String]
    /// The decoded body.
    public var body: [UInt8]

    /// Creates a stanza.
    public init(type: String, arguments: [String], body: [UInt8]) {
        self.type = type
        self.arguments = arguments
        self.body = body
    }
}

extension Stanza {
    /// Body lines hold 48 bytes (64 base64 columns); a shorter line ends the body.
    static let bytesPerLine = 48
    static let columnsPerLine = 64

    /// Checks that an argument can be written and read back (non-empty printable ASCII).
    static func validArgument(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { $0 >= 33 && $0 <= 126 }
    }

    /// Appends the stanza's canonical encoding, including its final (short) body line.
    func encode(into out: inout [UInt8]) {
        out += Array("->".utf8)
        for arg in [type] + arguments {
            out.append(UInt8(ascii: " "))
            out += Array(arg.utf8)
        }
        out.append(UInt8(ascii: "\n"))
        let encoded = body.withUnsafeBytes { Sodium.base64Encode($0, padded: false) }
        var start = 0
        while encoded.count - start >= Self.columnsPerLine {
            out += encoded[start..<(start + Self.columnsPerLine)]
            out.append(UInt8(ascii: "\n"))
            start += Self.columnsPerLine
        }
        // Always end with a short (possibly empty) line: that is what ends a body.
        out += encoded[start...]
        out.append(UInt8(ascii: "\n"))
    }
}
