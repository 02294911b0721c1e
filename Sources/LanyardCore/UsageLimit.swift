import FoundationEssentials
import LanyardSupport

/// A usage cap the provider reported (the Chappie `UsageLimit`): from a 429 `usage_limit_reached`
/// body or the usage endpoint.
public struct UsageLimit: Hashable, Sendable, Codable {
    /// The error type string, typically `usage_limit_reached`.
    public var type: String
    /// Text safe to show a person, when the server gave one.
    public var message: String?
    public var plan: Plan?
    public var resetsAt: Date?
    /// Seconds until reset as reported at response time (not a live countdown).
    public var resetsInSeconds: TimeInterval?
    public var rateLimit: UsageSnapshot?

    public init(
        type: String = "usage_limit_reached",
        message: String? = nil,
        plan: Plan? = nil,
        resetsAt: Date? = nil,
        resetsInSeconds: TimeInterval? = nil,
        rateLimit: UsageSnapshot? = nil
    ) {
        self.type = type
        self.message = message
        self.plan = plan
        self.resetsAt = resetsAt
        self.resetsInSeconds = resetsInSeconds
        self.rateLimit = rateLimit
    }

    /// One line for people and logs.
    public var summary: String {
        var s = message ?? "usage limit reached"
        if let plan { s += " (plan: \(plan.displayName))" }
        if let resetsAt { s += "; resets at \(RFC3339.string(from: resetsAt))" }
        return s
    }
}

/// The primary and secondary usage windows of an account, as a 429's rate-limit headers give them.
/// Which is which says nothing about their lengths (a weekly-only account's primary window is its
/// weekly one): read ``UsageWindow/length``.
public struct UsageSnapshot: Hashable, Sendable, Codable {
    public var primary: UsageWindow?
    public var secondary: UsageWindow?

    public init(primary: UsageWindow? = nil, secondary: UsageWindow? = nil) {
        self.primary = primary
        self.secondary = secondary
    }

    /// The windows sent, primary first.
    public var windows: [UsageWindow] { [primary, secondary].compactMap { $0 } }
}

/// One rate-limit window: how much is used, how long the window is and when it resets.
public struct UsageWindow: Hashable, Sendable, Codable {
    public var usedPercent: Double
    /// The window's length (`limit_window_seconds`), when the server said.
    public var windowSeconds: Int?
    public var resetsAt: Date?

    public init(usedPercent: Double, windowSeconds: Int? = nil, resetsAt: Date? = nil) {
        self.usedPercent = usedPercent
        self.windowSeconds = windowSeconds
        self.resetsAt = resetsAt
    }

    /// The window's class by its length; nil when the server did not say how long it is.
    public var length: UsageWindowLength? { windowSeconds.map(UsageWindowLength.init(seconds:)) }

    /// All of it used: requests are refused until it resets.
    public var isAtLimit: Bool { usedPercent >= 100 }

    /// The busiest of `windows`: the highest used percentage; of equal ones the longer window
    /// (it keeps the account out longer), then the one listed first. Nil when there is none.
    public static func busiest(_ windows: [UsageWindow]) -> UsageWindow? {
        var best: UsageWindow?
        for window in windows {
            guard let current = best else {
                best = window
                continue
            }
            if window.usedPercent > current.usedPercent
                || (window.usedPercent == current.usedPercent
                    && (window.windowSeconds ?? 0) > (current.windowSeconds ?? 0))
            {
                best = window
            }
        }
        return best
    }
}

/// A usage window classified by its length (`limit_window_seconds`), never by its position in
/// the answer: ChatGPT accounts have a 5-hour and a weekly window, a weekly one only, or a
/// monthly one, and may get others.
public enum UsageWindowLength: Hashable, Sendable {
    /// 5 hours (give or take 5 minutes).
    case fiveHours
    /// 24 hours (give or take 1 hour).
    case daily
    /// 7 days (give or take 1 day).
    case weekly
    /// 28 to 31 days (ChatGPT's monthly window is 2,628,000 s: 30.4 days).
    case monthly
    /// Any other length, in seconds.
    case other(seconds: Int)

    public init(seconds: Int) {
        let hour = 3600
        let day = 24 * hour
        switch seconds {
        case 5 * hour - 300...5 * hour + 300: self = .fiveHours
        case day - hour...day + hour: self = .daily
        case 6 * day...8 * day: self = .weekly
        case 28 * day...31 * day: self = .monthly
        default: self = .other(seconds: seconds)
        }
    }

    /// The class for machines: `5h`, `daily`, `weekly`, `monthly` or `other`.
    public var className: String {
        switch self {
        case .fiveHours: "5h"
        case .daily: "daily"
        case .weekly: "weekly"
        case .monthly: "monthly"
        case .other: "other"
        }
    }

    /// The name for people: "5 h", "daily", "weekly", "monthly", else the length in words
    /// ("3 hours", "12 days", "90 minutes").
    public var name: String {
        switch self {
        case .fiveHours: return "5 h"
        case .daily, .weekly, .monthly: return className
        case .other(let seconds): return Self.words(seconds)
        }
    }

    /// A length in the largest unit that keeps it readable: days from 2 days, hours from 2
    /// hours, minutes from 2 minutes, else seconds; one decimal when it is not a whole number.
    static func words(_ seconds: Int) -> String {
        let units: [(size: Int, name: String)] = [(86400, "day"), (3600, "hour"), (60, "minute")]
        for unit in units where seconds >= 2 * unit.size || (seconds == unit.size) {
            let value = Double(seconds) / Double(unit.size)
            let tenths = (value * 10).rounded()
            let number = tenths.truncatingRemainder(dividingBy: 10) == 0 ? "\(Int(tenths / 10))" : "\(tenths / 10)"
            return "\(number) \(unit.name)\(number == "1" ? "" : "s")"
        }
        return "\(seconds) second\(seconds == 1 ? "" : "s")"
    }
}
