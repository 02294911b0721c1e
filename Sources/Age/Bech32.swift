/// Bech32 (BIP 173) without the 90-character limit, as the age spec requires.
///
/// Strings are all-lowercase or all-uppercase; the checksum is always computed
/// over the lowercase form.
enum Bech32 {
    /// A decoding failure, mapped by callers to `AgeError.KeyProblem`.
    struct Failure: Error {
        let problem: AgeError.KeyProblem
    }

    private static let charset = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)

    /// Reverse lookup from ASCII to 5-bit value (-1 = not in the charset).
    private static let reverse: [Int8] = {
        var table = [Int8](repeating: -1, count: 128)
        for (i, c) in charset.enumerated() { table[Int(c)] = Int8(i) }
        return table
    }()

    private static func polymod(_ values: [UInt8]) -> UInt32 {
        let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]
        var chk: UInt32 = 1
        for v in values {
            let top = chk >> 25
            chk = (chk & 0x1ff_ffff) << 5 ^ UInt32(v)
            for i in 0..<5 where (top >> UInt32(i)) & 1 == 1 { chk ^= generator[i] }
        }
        return chk
    }

    private static func hrpExpand(_ hrp: [UInt8]) -> [UInt8] {
        hrp.map { $0 >> 5 } + [0] + hrp.map { $0 & 31 }
    }

    /// Encodes `data` under `hrp`; the result is uppercase if `hrp` is.
    static func encode(hrp: String, data: [UInt8]) -> String {
        let upper = hrp.contains { $0.isUppercase }
        let lowHRP = Array(hrp.lowercased().utf8)
        let values = convertBits(data, from: 8, to: 5, pad: true) ?? []
        let mod = polymod(hrpExpand(lowHRP) + values + [0, 0, 0, 0, 0, 0]) ^ 1
        var out = lowHRP + [UInt8(ascii: "1")]
        out += values.map { charset[Int($0)] }
        out += (0..<6).map { charset[Int((mod >> UInt32(5 * (5 - $0))) & 31)] }
        let s = String(decoding: out, as: UTF8.self)
        return upper ? s.uppercased() : s
    }

    /// Decodes a Bech32 string into its prefix (original case) and 8-bit data.
    static func decode(_ s: String) throws(Failure) -> (hrp: String, data: [UInt8]) {
        let bytes = Array(s.utf8)
        var hasLower = false
        var hasUpper = false
        for c in bytes {
            guard c >= 33, c <= 126 else { throw Failure(problem: .malformedBech32) }
            if c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z") { hasLower = true }
            if c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") { hasUpper = true }
        }
        if hasLower && hasUpper { throw Failure(problem: .mixedCase) }
        let lower = bytes.map { ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) ? $0 + 32 : $0 }
        guard let sep = lower.lastIndex(of: UInt8(ascii: "1")), sep >= 1, lower.count - sep - 1 >= 6 else {
            throw Failure(problem: .malformedBech32)
        }
        let hrp = Array(lower[..<sep])
        var values: [UInt8] = []
        values.reserveCapacity(lower.count - sep - 1)
        for c in lower[(sep + 1)...] {
            let v = Int(c) < 128 ? reverse[Int(c)] : -1
            guard v >= 0 else { throw Failure(problem: .malformedBech32) }
            values.append(UInt8(v))
        }
        guard polymod(hrpExpand(hrp) + values) == 1 else { throw Failure(problem: .invalidChecksum) }
        guard let data = convertBits(Array(values.dropLast(6)), from: 5, to: 8, pad: false) else {
            throw Failure(problem: .malformedBech32)
        }
        return (String(decoding: bytes[..<sep], as: UTF8.self), data)
    }

    /// Regroups bits; without padding, leftover bits must be fewer than `from` and zero.
    private static func convertBits(_ data: [UInt8], from: Int, to: Int, pad: Bool) -> [UInt8]? {
        var acc = 0
        var bits = 0
        let maxv = (1 << to) - 1
        var out: [UInt8] = []
        out.reserveCapacity(data.count * from / to + 1)
        for v in data {
            guard Int(v) >> from == 0 else { return nil }
            acc = (acc << from) | Int(v)
            bits += from
            while bits >= to {
                bits -= to
                out.append(UInt8((acc >> bits) & maxv))
            }
            acc &= (1 << bits) - 1
        }
        if pad {
            if bits > 0 { out.append(UInt8((acc << (to - bits)) & maxv)) }
        } else if bits >= from || (acc << (to - bits)) & maxv != 0 {
            return nil
        }
        return out
    }
}
