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

    public init(type: String = "usage_limit_reached", message: String? = nil, plan: Plan? = nil, resetsAt: Date? = nil,
                resetsInSeconds: TimeInterval? = nil, rateLimit: UsageSnapshot? = nil) {
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

/// The primary and secondary usage windows of an account.
public struct UsageSnapshot: Hashable, Sendable, Codable {
    public var primary: UsageWindow?
    public var secondary: UsageWindow?

    public init(primary: UsageWindow? = nil, secondary: UsageWindow? = nil) {
        self.primary = primary
        self.secondary = secondary
    }
}

/// One rate-limit window: how much is used and when it resets.
public struct UsageWindow: Hashable, Sendable, Codable {
    public var usedPercent: Double
    public var windowMinutes: Int?
    public var resetsAt: Date?

    public init(usedPercent: Double, windowMinutes: Int? = nil, resetsAt: Date? = nil) {
        self.usedPercent = usedPercent
        self.windowMinutes = windowMinutes
        self.resetsAt = resetsAt
    }
}
