import FoundationEssentials
import LanyardCore
import LanyardSupport

/// An account's usage as the ChatGPT backend reports it (`/backend-api/wham/usage`).
public struct UsageReport: Sendable, Hashable {
    public var plan: Plan?
    public var primary: UsageWindow?
    public var secondary: UsageWindow?
    /// True when the server says the account is at a limit now.
    public var limitReached: Bool
    /// The credits object, as sent.
    public var credits: JSONValue?

    /// The most used window's percentage (for choosing the account with most headroom).
    public var highestUsedPercent: Double { max(primary?.usedPercent ?? 0, secondary?.usedPercent ?? 0) }
}

/// Parses the ChatGPT usage endpoint's answers (`plan_type`, `rate_limit.primary_window` and
/// `secondary_window`, `credits`) and 429 `usage_limit_reached` bodies.
package enum UsageParser {
    /// A usage endpoint's 200 body.
    package static func report(_ body: Data, now: Date) throws(ClientError) -> UsageReport {
        guard let value = try? JSONValue.parse(body), let object = value.object else {
            throw .invalidResponse("usage: the body is not a JSON object")
        }
        let rate = object["rate_limit"]?.object
        let planType = object["plan_type"]?.string
        if let planType, let problem = TerminalText.lineProblem(planType, limit: 128) {
            throw .invalidResponse("usage: .plan_type \(problem)")
        }
        return UsageReport(
            plan: planType.map(Plan.init(rawValue:)),
            primary: try window(rate?["primary_window"], name: "primary_window", now: now),
            secondary: try window(rate?["secondary_window"], name: "secondary_window", now: now),
            limitReached: rate?["limit_reached"]?.bool ?? (rate?["allowed"]?.bool == false),
            credits: object["credits"])
    }

    /// A plan name from a usage answer, or nil when it is not one short line of text.
    static func plan(_ raw: String) -> Plan? {
        TerminalText.lineProblem(raw, limit: 128) == nil ? Plan(rawValue: raw) : nil
    }

    /// One window of `rate_limit`: nil when the server sent none (or one without `used_percent`).
    /// Its percentage decides which account auto-switching picks, so one that is not a number
    /// from 0 to 100 (-1e300 would win every comparison) makes the whole answer invalid. Reset
    /// times and lengths that make no sense (centuries away) are left out.
    static func window(_ value: JSONValue?, name: String, now: Date) throws(ClientError) -> UsageWindow? {
        guard let o = value?.object else { return nil }
        let used: Double
        switch o["used_percent"] {
        case nil, .null?: return nil
        case .number(let n)? where n.isFinite && (0...100).contains(n): used = n
        default: throw .invalidResponse("usage: .rate_limit.\(name).used_percent is not a percentage from 0 to 100")
        }
        let resetsAt = o["reset_at"]?.number?.plausibleUnixTime.map { Date(timeIntervalSince1970: $0) }
            ?? o["reset_after_seconds"]?.number?.plausibleSeconds.map { now + $0 }
        let minutes = o["limit_window_seconds"]?.number?.plausibleSeconds.map { Int($0 / 60) }
        return UsageWindow(usedPercent: used, windowMinutes: minutes, resetsAt: resetsAt)
    }

    /// A 429 body of type `usage_limit_reached` (nil for any other 429), with the rate-limit
    /// headers (`x-codex-primary-used-percent`, `…-window-minutes`, `…-reset-after-seconds`, and the
    /// same for `secondary`) when the server sent them.
    package static func limit(status: Int, body: Data, headers: [String: String], now: Date, redacting secrets: [String] = []) -> UsageLimit? {
        guard status == 429, let error = (try? JSONValue.parse(body))?["error"]?.object,
              error["type"]?.string == "usage_limit_reached" else { return nil }
        let resetsIn = error["resets_in_seconds"]?.number?.plausibleSeconds
        let resetsAt = error["resets_at"]?.number?.plausibleUnixTime.map { Date(timeIntervalSince1970: $0) } ?? resetsIn.map { now + $0 }
        func headerWindow(_ name: String) -> UsageWindow? {
            // The 429 stands whatever its headers say: a window without a percentage from 0 to
            // 100 is left out.
            guard let used = headers["x-codex-\(name)-used-percent"].flatMap(Double.init), used.isFinite, (0...100).contains(used) else { return nil }
            return UsageWindow(usedPercent: used, windowMinutes: headers["x-codex-\(name)-window-minutes"].flatMap(Int.init),
                               resetsAt: headers["x-codex-\(name)-reset-after-seconds"].flatMap(Double.init)?.plausibleSeconds.map { now + $0 })
        }
        let primary = headerWindow("primary"), secondary = headerWindow("secondary")
        return UsageLimit(type: "usage_limit_reached", message: error["message"]?.string.map { TokenText.redacted($0, removing: secrets) },
                          plan: error["plan_type"]?.string.flatMap(Self.plan), resetsAt: resetsAt, resetsInSeconds: resetsIn,
                          rateLimit: primary == nil && secondary == nil ? nil : UsageSnapshot(primary: primary, secondary: secondary))
    }
}
