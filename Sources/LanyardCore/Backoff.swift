import FoundationEssentials
import LanyardSupport

/// How requests back off after a `429 Too Many Requests` (the Chappie rate-limit policy).
///
/// Retry `n` (0-based) waits `min(maximumDelay, initialDelay × 2ⁿ)` scaled by a jitter factor in
/// [1, 1 + jitter), capped again at `maximumDelay`; a `Retry-After` from the server replaces that
/// (capped at `maximumDelay`) unless `respectsRetryAfterHeader` is false.
public struct BackoffPolicy: Hashable, Sendable, Codable {
    public var maxRetries: Int
    public var initialDelay: TimeInterval
    public var maximumDelay: TimeInterval
    public var respectsRetryAfterHeader: Bool
    /// The spread added on top of the exponential delay, as a fraction of it.
    public var jitter: Double

    public init(
        maxRetries: Int = 2,
        initialDelay: TimeInterval = 1,
        maximumDelay: TimeInterval = 30,
        respectsRetryAfterHeader: Bool = true,
        jitter: Double = 0.25
    ) {
        self.maxRetries = max(0, maxRetries)
        self.initialDelay = max(0, initialDelay)
        self.maximumDelay = max(0, maximumDelay)
        self.respectsRetryAfterHeader = respectsRetryAfterHeader
        self.jitter = min(max(0, jitter), 1)
    }

    /// 2 retries, 1 s initial, 30 s cap, `Retry-After` honoured.
    public static let `default` = BackoffPolicy()
    /// No retries: the first 429 is surfaced.
    public static let disabled = BackoffPolicy(maxRetries: 0)

    /// The wait before retry `retry` (0-based), or nil when no retry is left.
    /// - Parameters:
    ///   - retryAfter: the server's `Retry-After`, already converted to seconds.
    ///   - unitRandom: a value in [0, 1) (injected so tests are deterministic).
    public func delay(beforeRetry retry: Int, retryAfter: TimeInterval? = nil, unitRandom: Double) -> TimeInterval? {
        guard retry >= 0, retry < maxRetries else { return nil }
        if respectsRetryAfterHeader, let retryAfter {
            return min(max(0, retryAfter), maximumDelay)
        }
        let base = min(maximumDelay, initialDelay * Double(sign: .plus, exponent: min(retry, 1000), significand: 1))
        return min(maximumDelay, base * (1 + jitter * min(max(unitRandom, 0), 1)))
    }

    /// Parses a `Retry-After` header value: delta seconds or an HTTP date.
    public static func retryAfterSeconds(_ header: String, now: Date) -> TimeInterval? {
        let trimmed = header.trimmingSpaces()
        if let seconds = Int(trimmed) { return TimeInterval(max(0, seconds)) }
        return httpDate(trimmed).map { max(0, $0.timeIntervalSince(now)) }
    }

    /// An HTTP date (RFC 9110): the IMF-fixdate form `Sun, 06 Nov 1994 08:49:37 GMT`, plus the
    /// obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`)
    /// forms. Hand-parsed: DateFormatter would link ICU's 34 MB of data into the binary.
    static func httpDate(_ text: String) -> Date? {
        let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        let words = text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        var day: Int?
        var month: Int?
        var year: Int?
        var time: [Int]?
        for word in words {
            if let m = months.firstIndex(of: word.lowercased()) {
                month = m + 1
                continue
            }
            if word.contains(":") {
                let parts = word.split(separator: ":").compactMap { Int($0) }
                if parts.count == 3 { time = parts }
                continue
            }
            if word.contains("-") {  // RFC 850: 06-Nov-94
                let parts = word.split(separator: "-").map(String.init)
                guard parts.count == 3, let d = Int(parts[0]), let m = months.firstIndex(of: parts[1].lowercased()),
                    let y = Int(parts[2])
                else {
                    return nil
                }
                day = d
                month = m + 1
                year = y < 100 ? (y < 70 ? 2000 + y : 1900 + y) : y
                continue
            }
            if let n = Int(word) { if n > 31 { year = n } else { day = n } }
        }
        guard let day, let month, let year, let time, (1...31).contains(day), time[0] < 24, time[1] < 60, time[2] < 61
        else { return nil }
        let seconds =
            RFC3339.days(fromCivil: Int64(year), Int64(month), Int64(day)) * 86_400
            + Int64(time[0] * 3600 + time[1] * 60 + time[2])
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}
