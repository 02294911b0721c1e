import Foundation

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

    public init(maxRetries: Int = 2, initialDelay: TimeInterval = 1, maximumDelay: TimeInterval = 30,
                respectsRetryAfterHeader: Bool = true, jitter: Double = 0.25) {
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
        let base = min(maximumDelay, initialDelay * pow(2, Double(retry)))
        return min(maximumDelay, base * (1 + jitter * min(max(unitRandom, 0), 1)))
    }

    /// Parses a `Retry-After` header value: delta seconds or an HTTP date.
    public static func retryAfterSeconds(_ header: String, now: Date) -> TimeInterval? {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed) { return TimeInterval(max(0, seconds)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: trimmed) { return max(0, date.timeIntervalSince(now)) }
        }
        return nil
    }
}
