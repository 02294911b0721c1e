// Minimal zlib (RFC 1950) / DEFLATE (RFC 1951) decoder, enough to read the
// CCTV vectors marked `compressed: zlib`. Tests may only use Foundation, and
// Foundation on Linux has no public inflate.

struct InflateError: Error, CustomStringConvertible {
    let description: String
}

enum Zlib {
    static func decompress(_ input: [UInt8]) throws -> [UInt8] {
        guard input.count >= 6 else { throw InflateError(description: "zlib stream too short") }
        let cmf = input[0]
        let flg = input[1]
        guard cmf & 0x0F == 8, (UInt16(cmf) << 8 | UInt16(flg)) % 31 == 0, flg & 0x20 == 0 else {
            throw InflateError(description: "bad zlib header")
        }
        var inflater = Inflater(input: input, position: 2)
        try inflater.run()
        let end = inflater.bytePosition
        guard end + 4 <= input.count else { throw InflateError(description: "missing adler32") }
        let expected = input[end..<(end + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard adler32(inflater.output) == expected else { throw InflateError(description: "adler32 mismatch") }
        return inflater.output
    }

    static func adler32(_ data: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        var i = 0
        while i < data.count {
            let end = min(data.count, i + 5552)  // largest run without overflow
            while i < end {
                a += UInt32(data[i])
                b += a
                i += 1
            }
            a %= 65521
            b %= 65521
        }
        return b << 16 | a
    }
}

/// Canonical Huffman table in the style of zlib's "puff": counts per length and
/// symbols ordered by code.
private struct Huffman {
    var counts = [Int](repeating: 0, count: 16)
    var symbols: [Int]

    init(lengths: [Int]) throws {
        symbols = [Int](repeating: 0, count: lengths.count)
        for l in lengths { counts[l] += 1 }
        var left = 1
        for len in 1..<16 {
            left = left * 2 - counts[len]
            if left < 0 { throw InflateError(description: "over-subscribed code") }
        }
        var offsets = [Int](repeating: 0, count: 16)
        for len in 1..<15 { offsets[len + 1] = offsets[len] + counts[len] }
        for (symbol, l) in lengths.enumerated() where l != 0 {
            symbols[offsets[l]] = symbol
            offsets[l] += 1
        }
    }
}

private struct Inflater {
    let input: [UInt8]
    var position: Int
    var bitBuffer = 0
    var bitCount = 0
    var output: [UInt8] = []

    init(input: [UInt8], position: Int) {
        self.input = input
        self.position = position
    }

    /// Position of the first byte after the deflate stream (partial byte dropped).
    var bytePosition: Int { position }

    mutating func bits(_ n: Int) throws -> Int {
        while bitCount < n {
            guard position < input.count else { throw InflateError(description: "unexpected end of stream") }
            bitBuffer |= Int(input[position]) << bitCount
            position += 1
            bitCount += 8
        }
        let v = bitBuffer & ((1 << n) - 1)
        bitBuffer >>= n
        bitCount -= n
        return v
    }

    mutating func decode(_ h: Huffman) throws -> Int {
        var code = 0
        var first = 0
        var index = 0
        for len in 1..<16 {
            code |= try bits(1)
            let count = h.counts[len]
            if code - count < first { return h.symbols[index + (code - first)] }
            index += count
            first += count
            first <<= 1
            code <<= 1
        }
        throw InflateError(description: "bad Huffman code")
    }

    static let lengthBase = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ]
    static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    static let distBase = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ]
    static let distExtra = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
    ]

    mutating func run() throws {
        var last = 0
        repeat {
            last = try bits(1)
            switch try bits(2) {
            case 0: try stored()
            case 1:
                try codes(
                    try Huffman(lengths: Self.fixedLitLengths),
                    try Huffman(lengths: [Int](repeating: 5, count: 30))
                )
            case 2: try dynamic()
            default: throw InflateError(description: "invalid block type")
            }
        } while last == 0
        // Discard the partial byte so `position` points at the adler32.
        bitBuffer = 0
        bitCount = 0
    }

    mutating func stored() throws {
        bitBuffer = 0
        bitCount = 0
        guard position + 4 <= input.count else { throw InflateError(description: "truncated stored block") }
        let len = Int(input[position]) | Int(input[position + 1]) << 8
        let nlen = Int(input[position + 2]) | Int(input[position + 3]) << 8
        guard len == (~nlen & 0xFFFF) else { throw InflateError(description: "stored length mismatch") }
        position += 4
        guard position + len <= input.count else { throw InflateError(description: "truncated stored block") }
        output += input[position..<(position + len)]
        position += len
    }

    static let fixedLitLengths: [Int] = (0..<288).map { i in
        switch i {
        case 144..<256: return 9
        case 256..<280: return 7
        default: return 8
        }
    }

    mutating func dynamic() throws {
        let nlen = try bits(5) + 257
        let ndist = try bits(5) + 1
        let ncode = try bits(4) + 4
        let order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
        var lengths = [Int](repeating: 0, count: 19)
        for i in 0..<ncode { lengths[order[i]] = try bits(3) }
        let lencode = try Huffman(lengths: lengths)
        var all: [Int] = []
        while all.count < nlen + ndist {
            let sym = try decode(lencode)
            switch sym {
            case 0..<16: all.append(sym)
            case 16:
                guard let prev = all.last else { throw InflateError(description: "repeat with no previous length") }
                all += [Int](repeating: prev, count: 3 + (try bits(2)))
            case 17: all += [Int](repeating: 0, count: 3 + (try bits(3)))
            default: all += [Int](repeating: 0, count: 11 + (try bits(7)))
            }
        }
        guard all.count == nlen + ndist else { throw InflateError(description: "too many lengths") }
        try codes(try Huffman(lengths: Array(all[..<nlen])), try Huffman(lengths: Array(all[nlen...])))
    }

    mutating func codes(_ lit: Huffman, _ dist: Huffman) throws {
        while true {
            let sym = try decode(lit)
            if sym < 256 {
                output.append(UInt8(sym))
            } else if sym == 256 {
                return
            } else {
                let s = sym - 257
                guard s < 29 else { throw InflateError(description: "bad length symbol") }
                let len = Self.lengthBase[s] + (try bits(Self.lengthExtra[s]))
                let ds = try decode(dist)
                guard ds < 30 else { throw InflateError(description: "bad distance symbol") }
                let d = Self.distBase[ds] + (try bits(Self.distExtra[ds]))
                guard d <= output.count else { throw InflateError(description: "distance too far back") }
                let start = output.count - d
                if d >= len {
                    output.append(contentsOf: output[start..<(start + len)])
                } else {
                    for i in 0..<len { output.append(output[start + i]) }
                }
            }
        }
    }
}
