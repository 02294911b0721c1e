import LanyardSupport

/// A subscription plan, as a provider names it, with a display name for people.
///
/// Parsing is case-insensitive; a value Lanyard does not know keeps its raw string (and shows it).
public struct Plan: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The plans Lanyard knows by name.
    public enum Kind: String, Sendable, CaseIterable {
        case free, go, plus, pro, proLite, team, selfServeBusinessUsageBased, business
        case enterpriseCBPUsageBased, enterprise, edu
    }

    /// The value exactly as the provider sent it.
    public let rawValue: String
    /// The known plan, or nil for a value Lanyard does not know.
    public let kind: Kind?

    public init(rawValue: String) {
        self.rawValue = rawValue
        self.kind = Plan.aliases[rawValue.lowercased().trimmingSpaces()]
    }

    /// The name to show a person: "Pro Lite", "Enterprise", or the raw value when unknown.
    public var displayName: String {
        guard let kind else { return rawValue }
        switch kind {
        case .free: return "Free"
        case .go: return "Go"
        case .plus: return "Plus"
        case .pro: return "Pro"
        case .proLite: return "Pro Lite"
        case .team: return "Team"
        case .selfServeBusinessUsageBased: return "Business (usage-based)"
        case .business: return "Business"
        case .enterpriseCBPUsageBased: return "Enterprise (usage-based)"
        case .enterprise: return "Enterprise"
        case .edu: return "Edu"
        }
    }

    public var description: String { displayName }

    private static let aliases: [String: Kind] = [
        "free": .free, "go": .go, "plus": .plus, "pro": .pro, "prolite": .proLite, "team": .team,
        "self_serve_business_usage_based": .selfServeBusinessUsageBased, "business": .business,
        "enterprise_cbp_usage_based": .enterpriseCBPUsageBased, "enterprise": .enterprise, "hc": .enterprise,
        "edu": .edu, "education": .edu,
    ]

    public init(from decoder: Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}
