import FoundationEssentials
import LanyardCore
import LanyardSupport

/// An account's usage as the ChatGPT backend reports it (`/backend-api/wham/usage`, read as Codex's
/// backend client reads it: `plan_type`, `rate_limit` with `primary_window` and `secondary_window`,
/// `credits`, `rate_limit_reset_credits`).
public struct UsageReport: Sendable, Hashable {
    public var plan: Plan?
    /// `rate_limit.primary_window` as sent: any length (5 hours on most plans, 7 days on a
    /// weekly-only account, a month on some workspaces). Read ``UsageWindow/length``.
    public var primary: UsageWindow?
    /// `rate_limit.secondary_window` as sent (a weekly window beside a 5-hour one, or none).
    public var secondary: UsageWindow?
    /// True when the server says the account is at a limit now.
    public var limitReached: Bool
    /// The credits object, when sent.
    public var credits: UsageCredits?
    /// Banked rate-limit resets the account holds (`rate_limit_reset_credits.available_count`),
    /// when the server said.
    public var resetCredits: Int?
    /// Limits of single metered features (`additional_rate_limits`: one model's own windows).
    /// Shown, but not part of ``windows``: they stop that feature only, not the account.
    public var additionalLimits: [AdditionalUsageLimit] = []

    public init(
        plan: Plan? = nil,
        primary: UsageWindow? = nil,
        secondary: UsageWindow? = nil,
        limitReached: Bool = false,
        credits: UsageCredits? = nil,
        resetCredits: Int? = nil
    ) {
        self.plan = plan
        self.primary = primary
        self.secondary = secondary
        self.limitReached = limitReached
        self.credits = credits
        self.resetCredits = resetCredits
    }

    /// The windows the server sent, primary first: exactly these are shown, whatever their lengths.
    public var windows: [UsageWindow] { [primary, secondary].compactMap { $0 } }

    /// The busiest window, whichever it is (see ``UsageWindow/busiest(_:)``).
    public var busiest: UsageWindow? { UsageWindow.busiest(windows) }

    /// The busiest window's percentage (for choosing the account with most headroom).
    public var highestUsedPercent: Double { busiest?.usedPercent ?? 0 }

    /// At a limit: the server says so, or a window is all used.
    public var isAtLimit: Bool { limitReached || windows.contains(where: \.isAtLimit) }

    /// When the account can be used again: the latest reset of the windows at their limit (all
    /// of them must reset), else the busiest window's reset.
    public var limitResetsAt: Date? {
        let full = windows.filter(\.isAtLimit).compactMap(\.resetsAt)
        return full.max() ?? busiest?.resetsAt
    }
}

/// One entry of `additional_rate_limits`: a metered feature (a model such as
/// GPT-5.3-Codex-Spark) with windows of its own, as Codex reads it.
public struct AdditionalUsageLimit: Sendable, Hashable {
    /// `limit_name`, the name shown for it.
    public var name: String
    /// `metered_feature`, when sent.
    public var feature: String?
    public var primary: UsageWindow?
    public var secondary: UsageWindow?
    public var limitReached: Bool

    public init(
        name: String,
        feature: String? = nil,
        primary: UsageWindow? = nil,
        secondary: UsageWindow? = nil,
        limitReached: Bool = false
    ) {
        self.name = name
        self.feature = feature
        self.primary = primary
        self.secondary = secondary
        self.limitReached = limitReached
    }

    public var windows: [UsageWindow] { [primary, secondary].compactMap { $0 } }

    /// That feature is at its limit: the server says so, or one of its windows is all used.
    public var isAtLimit: Bool { limitReached || windows.contains(where: \.isAtLimit) }
}

/// The `credits` object of a usage answer, as Codex reads it (`CreditStatusDetails`).
public struct UsageCredits: Sendable, Hashable {
    public var hasCredits: Bool?
    public var unlimited: Bool?
    /// The balance as the server wrote it (a decimal string, e.g. "12.50").
    public var balance: String?

    public init(hasCredits: Bool? = nil, unlimited: Bool? = nil, balance: String? = nil) {
        self.hasCredits = hasCredits
        self.unlimited = unlimited
        self.balance = balance
    }
}

/// Parses the ChatGPT usage endpoint's answers and 429 `usage_limit_reached` bodies. A field of
/// the wrong type is an invalid answer naming the field's path; a missing or null field is
/// absent; a number that makes no sense (a reset centuries away) is left out.
package enum UsageParser {
    /// A usage endpoint's 200 body.
    package static func report(_ body: Data, now: Date) throws(ClientError) -> UsageReport {
        guard let value = try? JSONValue.parse(body), value.object != nil else {
            throw .invalidResponse("usage: the body is not a JSON object")
        }
        do throws(JSONShapeError) {
            let root = try JSONFields(value)
            let planType = try root.optionalString("plan_type")
            if let planType, let problem = TerminalText.lineProblem(planType, limit: 128) {
                throw JSONShapeError(path: ".plan_type", problem: problem)
            }
            let rate = try root.optionalObject("rate_limit")
            var report = UsageReport(
                plan: planType.map(Plan.init(rawValue:)),
                primary: try window(rate, "primary_window", now: now),
                secondary: try window(rate, "secondary_window", now: now),
                limitReached: try limitReached(rate),
                credits: try credits(root.optionalObject("credits")),
                resetCredits: try resetCredits(root.optionalObject("rate_limit_reset_credits"))
            )
            report.additionalLimits = try additionalLimits(root, now: now)
            return report
        } catch {
            throw .invalidResponse("usage: \(error.path) \(error.problem)")
        }
    }

    /// A plan name from a usage answer, or nil when it is not one short line of text.
    static func plan(_ raw: String) -> Plan? {
        TerminalText.lineProblem(raw, limit: 128) == nil ? Plan(rawValue: raw) : nil
    }

    /// One window of `rate_limit`: nil when the server sent none (or one without `used_percent`).
    /// Its percentage decides which account auto-switching picks, so one that is not a number
    /// from 0 to 100 (-1e300 would win every comparison) makes the whole answer invalid. Reset
    /// times and lengths that make no sense (centuries away, or not positive) are left out.
    static func window(_ rate: JSONFields?, _ name: String, now: Date) throws(JSONShapeError) -> UsageWindow? {
        guard let o = try rate?.optionalObject(name) else { return nil }
        let used: Double
        switch o.object["used_percent"] {
        case nil, .null?: return nil
        case .number(let n)? where n.isFinite && (0...100).contains(n): used = n
        default: throw o.fail("used_percent", "is not a percentage from 0 to 100")
        }
        let resetAt = try o.optionalNumber("reset_at")?.plausibleUnixTime.map { Date(timeIntervalSince1970: $0) }
        let resetAfter = try o.optionalNumber("reset_after_seconds")?.plausibleSeconds.map { now + $0 }
        let resetsAt = resetAt ?? resetAfter
        let seconds = try o.optionalNumber("limit_window_seconds")?.plausibleSeconds.flatMap {
            $0 > 0 ? Int($0.rounded()) : nil
        }
        return UsageWindow(usedPercent: used, windowSeconds: seconds, resetsAt: resetsAt)
    }

    /// A `rate_limit` object's `limit_reached` (else `allowed` false).
    static func limitReached(_ rate: JSONFields?) throws(JSONShapeError) -> Bool {
        let allowed = try rate?.optionalBool("allowed")
        return try rate?.optionalBool("limit_reached") ?? (allowed == false)
    }

    /// `additional_rate_limits`: at most 32 entries of `limit_name`, `metered_feature` and a
    /// `rate_limit` of their own.
    static func additionalLimits(_ root: JSONFields, now: Date) throws(JSONShapeError) -> [AdditionalUsageLimit] {
        let items: [JSONValue]
        switch root.object["additional_rate_limits"] {
        case nil, .null?: return []
        case .array(let list)?: items = list
        default: throw root.fail("additional_rate_limits", "is not a list")
        }
        guard items.count <= 32 else { throw root.fail("additional_rate_limits", "has more than 32 entries") }
        var limits: [AdditionalUsageLimit] = []
        for (index, item) in items.enumerated() {
            let o = try JSONFields(item, path: ".additional_rate_limits[\(index)]")
            let feature = try o.optionalLine("metered_feature")
            let rate = try o.optionalObject("rate_limit")
            limits.append(
                AdditionalUsageLimit(
                    name: try o.optionalLine("limit_name") ?? feature ?? "limit \(index + 1)",
                    feature: feature,
                    primary: try window(rate, "primary_window", now: now),
                    secondary: try window(rate, "secondary_window", now: now),
                    limitReached: try limitReached(rate)
                )
            )
        }
        return limits
    }

    /// `credits`: `has_credits`, `unlimited` and `balance` (a decimal string, as Codex reads it;
    /// a number is taken as its text).
    static func credits(_ o: JSONFields?) throws(JSONShapeError) -> UsageCredits? {
        guard let o else { return nil }
        let balance: String?
        if case .number(let n)? = o.object["balance"] {
            guard n.isFinite, abs(n) < 1e15 else { throw o.fail("balance", "is not an amount") }
            balance = n == n.rounded() ? String(Int64(n)) : String(n)
        } else {
            balance = try o.optionalLine("balance")
        }
        return UsageCredits(
            hasCredits: try o.optionalBool("has_credits"),
            unlimited: try o.optionalBool("unlimited"),
            balance: balance
        )
    }

    /// `rate_limit_reset_credits.available_count`: banked resets, a whole number from 0.
    static func resetCredits(_ o: JSONFields?) throws(JSONShapeError) -> Int? {
        guard let o, o.object["available_count"] != nil, o.object["available_count"] != .null else { return nil }
        let count = try o.int("available_count")
        guard (0...1_000_000).contains(count) else { throw o.fail("available_count", "is not a count") }
        return count
    }

    /// A 429 body of type `usage_limit_reached` (nil for any other 429), with the rate-limit
    /// headers (`x-codex-primary-used-percent`, `…-window-minutes`, `…-reset-after-seconds`, and the
    /// same for `secondary`) when the server sent them.
    package static func limit(
        status: Int,
        body: Data,
        headers: [String: String],
        now: Date,
        redacting secrets: [String] = []
    ) -> UsageLimit? {
        guard status == 429, let error = (try? JSONValue.parse(body))?["error"]?.object,
            error["type"]?.string == "usage_limit_reached"
        else { return nil }
        let resetsIn = error["resets_in_seconds"]?.number?.plausibleSeconds
        let resetsAt =
            error["resets_at"]?.number?.plausibleUnixTime.map { Date(timeIntervalSince1970: $0) }
            ?? resetsIn.map { now + $0 }
        func headerWindow(_ name: String) -> UsageWindow? {
            // The 429 stands whatever its headers say: a window without a percentage from 0 to
            // 100 is left out.
            guard let used = headers["x-codex-\(name)-used-percent"].flatMap(Double.init), used.isFinite,
                (0...100).contains(used)
            else { return nil }
            let minutes = headers["x-codex-\(name)-window-minutes"].flatMap(Int.init).flatMap {
                $0 > 0 && $0 < 60_000_000 ? $0 : nil
            }
            return UsageWindow(
                usedPercent: used,
                windowSeconds: minutes.map { $0 * 60 },
                resetsAt: headers["x-codex-\(name)-reset-after-seconds"].flatMap(Double.init)?.plausibleSeconds.map {
                    now + $0
                }
            )
        }
        let primary = headerWindow("primary")
        let secondary = headerWindow("secondary")
        return UsageLimit(
            type: "usage_limit_reached",
            message: error["message"]?.string.map { TokenText.redacted($0, removing: secrets) },
            plan: error["plan_type"]?.string.flatMap(Self.plan),
            resetsAt: resetsAt,
            resetsInSeconds: resetsIn,
            rateLimit: primary == nil && secondary == nil ? nil : UsageSnapshot(primary: primary, secondary: secondary)
        )
    }
}
