// String helpers that NSString used to provide, for code that links FoundationEssentials only.

extension String {
    /// The text a C call left in `buffer`: up to its first NUL (all of it when there is none, as
    /// when the text filled the buffer), as UTF-8 with any invalid byte replaced.
    package init(nulTerminated buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// ``init(nulTerminated:)-([CChar])`` for a fixed-size C `char` array in a struct (imported
    /// as a tuple): `d_name`, an error buffer.
    package init<Tuple>(nulTerminatedTuple tuple: Tuple) {
        self = withUnsafeBytes(of: tuple) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// Without leading and trailing white space and line breaks (as Unicode defines them).
    package func trimmingWhitespaceAndNewlines() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }

    /// Padded with spaces to `width` Characters; a longer string keeps all of it and gets one space,
    /// so a column never runs into the next one and nothing is cut off.
    package func padded(toWidth width: Int) -> String {
        count < width ? self + String(repeating: " ", count: width - count) : self + " "
    }

    /// With each `%XX` turned back into its byte (a `%` not followed by two hex digits stays as
    /// it is); bytes that are not UTF-8 become U+FFFD.
    package func percentDecoded() -> String {
        guard contains("%") else { return self }
        func hexValue(_ b: UInt8) -> UInt8? {
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        let bytes = Array(utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let hi = hexValue(bytes[i + 1]),
                let lo = hexValue(bytes[i + 2])
            {
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Percent-encoded for an `application/x-www-form-urlencoded` body or a URL query value: the
    /// UTF-8 bytes of everything but ASCII letters, digits and `-._~` as `%XX` (RFC 3986 §2.3).
    package func percentEncodedUnreserved() -> String {
        let hex = Array("0123456789ABCDEF".unicodeScalars)
        var out = ""
        out.reserveCapacity(utf8.count)
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 0xF)])
            }
        }
        return out
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs. Pure Swift: Foundation's
    /// `trimmingCharacters(in:)` goes through NSString, whose first use costs more than the
    /// whole of reading a config file or a registry slot.
    package func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\u{A0}" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}

/// Lower-case hex of `bytes` (digests and fingerprints).
package func hexString<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}
