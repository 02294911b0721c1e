import FoundationEssentials

/// RFC 3339 timestamps, with or without fractional seconds and with `Z` or a numeric offset on
/// input; whole seconds in UTC on output. Hand-written because Foundation's ISO 8601 styles cost
/// tens of microseconds a date, which dominates reading a registry of a thousand slots.
package enum RFC3339 {
    /// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the ends of what four-digit years spell.
    package static let earliestUnixTime: Double = -62_135_596_800
    package static let latestUnixTime: Double = 253_402_300_799

    /// The date in whole seconds; a date outside years 0001–9999 (or not finite) is written as
    /// the nearest end of that range, so the text always parses back.
    package static func string(from date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        let clamped = seconds.isNaN ? 0 : min(max(seconds, earliestUnixTime), latestUnixTime)
        let total = Int64(clamped.rounded(.down))
        var days = total / 86_400
        var rem = total % 86_400
        if rem < 0 {
            rem += 86_400
            days -= 1
        }
        let (y, m, d) = civil(fromDays: days)
        guard (0...9999).contains(y) else {
            func pad(_ v: Int64, _ width: Int) -> String {
                let s = String(v)
                return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
            }
            return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))"
                + "T\(pad(rem / 3600, 2)):\(pad(rem % 3600 / 60, 2)):\(pad(rem % 60, 2))Z"
        }
        // Fixed width: written byte by byte (string interpolation cost most of a registry write).
        var bytes = [UInt8](repeating: 0, count: 20)
        func put(_ v: Int64, at i: Int, width: Int) {
            var v = v
            for k in stride(from: i + width - 1, through: i, by: -1) {
                bytes[k] = 0x30 + UInt8(v % 10)
                v /= 10
            }
        }
        put(y, at: 0, width: 4)
        bytes[4] = 0x2d
        put(m, at: 5, width: 2)
        bytes[7] = 0x2d
        put(d, at: 8, width: 2)
        bytes[10] = 0x54
        put(rem / 3600, at: 11, width: 2)
        bytes[13] = 0x3a
        put(rem % 3600 / 60, at: 14, width: 2)
        bytes[16] = 0x3a
        put(rem % 60, at: 17, width: 2)
        bytes[19] = 0x5a
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The date to the nearest millisecond ("2026-12-05T01:20:07.612Z"): for a time compared
    /// with another program's to tell which is newer, where whole seconds would tie.
    package static func stringWithMilliseconds(from date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        guard seconds.isFinite, seconds >= earliestUnixTime, seconds < latestUnixTime else { return string(from: date) }
        let total = Int64((seconds * 1000).rounded())
        var whole = total / 1000
        var millis = total % 1000
        if millis < 0 {
            millis += 1000
            whole -= 1
        }
        let digits = String(millis)
        return String(string(from: Date(timeIntervalSince1970: Double(whole))).dropLast()) + "."
            + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    package static func date(from string: String) -> Date? {
        // In place for native strings: every stored date is parsed on every registry read.
        string.utf8.withContiguousStorageIfAvailable(date(bytes:)) ?? date(bytes: Array(string.utf8))
    }

    private static func date<Bytes: RandomAccessCollection>(bytes b: Bytes) -> Date?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        guard b.count >= 20 else { return nil }
        func num(_ from: Int, _ count: Int) -> Int64? {
            var v: Int64 = 0
            for i in from..<(from + count) {
                guard i < b.count, b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                v = v * 10 + Int64(b[i] - 0x30)
            }
            return v
        }
        guard let y = num(0, 4), b[4] == 0x2d, let mo = num(5, 2), b[7] == 0x2d, let d = num(8, 2),
            b[10] == 0x54 || b[10] == 0x74 || b[10] == 0x20, let h = num(11, 2), b[13] == 0x3a, let mi = num(14, 2),
            b[16] == 0x3a, let s = num(17, 2),
            (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61
        else { return nil }
        var i = 19
        var fraction = 0.0
        if i < b.count, b[i] == 0x2e {
            i += 1
            var scale = 0.1
            let start = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                fraction += Double(b[i] - 0x30) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        guard i < b.count else { return nil }
        var offset: Int64 = 0
        switch b[i] {
        case 0x5a, 0x7a: i += 1
        case 0x2b, 0x2d:
            guard let oh = num(i + 1, 2), i + 3 < b.count, b[i + 3] == 0x3a, let om = num(i + 4, 2), oh < 24, om < 60
            else { return nil }
            offset = (oh * 60 + om) * 60 * (b[i] == 0x2d ? -1 : 1)
            i += 6
        default: return nil
        }
        guard i == b.count else { return nil }
        let seconds = days(fromCivil: y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    // Howard Hinnant's civil-calendar algorithms (proleptic Gregorian).
    /// Days from 1970-01-01 to the given date (proleptic Gregorian; HTTP dates use it too).
    package static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? yoe + era * 400 + 1 : yoe + era * 400, m, d)
    }
}

/// A document that did not decode: which document, and what in it is wrong.
public struct DecodeError: Error, Equatable, Sendable, LocalizedError {
    /// Where the document came from (a path, "keyring item work", "token response", …).
    public var source: String
    /// What is wrong and where, without quoting values.
    public var detail: String

    public init(source: String, detail: String) {
        self.source = source
        self.detail = detail
    }

    public var errorDescription: String? { "\(source): \(detail)" }
}
