import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

@Suite struct UsageTests {
    @Test func showsPlanAndWindows() async throws {
        let env = try await EmulatorHome()
        let credential = try await env.signIn("work", email: "w@example.com", plan: "pro")
        let account = try #require(credential.account.accountID)
        let resetAt = Int(Date().timeIntervalSince1970) + 7830
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": account, "plan_type": "pro",
                "primary_window": ["used_percent": 42, "limit_window_seconds": 18000, "reset_at": resetAt],
                "secondary_window": [
                    "used_percent": 10, "limit_window_seconds": 604800, "reset_after_seconds": 86400 * 5,
                ],
            ]
        )
        let report = try await env.manager().usage(slot: try Slot("work"))
        #expect(report.plan?.kind == .pro)
        #expect(
            report.primary?.usedPercent == 42 && report.primary?.windowSeconds == 18000
                && report.primary?.length == .fiveHours
        )
        #expect(report.primary?.resetsAt == Date(timeIntervalSince1970: TimeInterval(resetAt)))
        #expect(report.secondary?.windowSeconds == 7 * 86400 && report.secondary?.length == .weekly)

        // "2 h 10 min" if the command runs within 30 s; on a loaded machine, whatever whole
        // minutes were left while it ran (the time shown is rounded down).
        let minutesLeft = { (t: Date) in (resetAt - Int(t.timeIntervalSince1970)) / 60 }
        let before = Date()
        let human = try env.home.run("usage", "work")
        // Every whole minute the command may have seen, however long a loaded machine took.
        let shown = (minutesLeft(Date())...minutesLeft(before)).map { " 42%  resets in \($0 / 60) h \($0 % 60) min (" }
        #expect(human.status == 0, "\(human.stderr)")
        #expect(human.stdout.contains("work  w@example.com  Pro"))
        #expect(human.stdout.contains("\n  5 h  "), "\(human.stdout)")
        #expect(shown.contains { human.stdout.contains($0) }, "\(human.stdout)")
        #expect(human.stdout.contains("\n  weekly  "))
        let json = try env.home.run("usage", "--all", "--json")
        let slots =
            (try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["slots"]
            as? [[String: Any]]
        let windows = slots?.first?["windows"] as? [[String: Any]]
        #expect(
            windows?.first?["used_percent"] as? Double == 42 && windows?.first?["limit_window_seconds"] as? Int == 18000
        )
        #expect(windows?.first?["window"] as? String == "5h" && windows?.last?["window"] as? String == "weekly")
    }

    @Test func aUsageLimitIsTypedWithPlanAndReset() async throws {
        let env = try await EmulatorHome(extraConfig: "[backoff]\nmax-retries = 0")
        try await env.signIn("work", email: "w@example.com", plan: "plus")
        try await env.server.hook(
            "/_test/usage_limit",
            ["resets_in_seconds": 3600, "message": "You've hit your usage limit"]
        )
        do {
            _ = try await env.manager().usage(slot: try Slot("work"))
            Issue.record("expected usageLimitReached")
        } catch ClientError.usageLimitReached(let limit) {
            #expect(limit.type == "usage_limit_reached")
            #expect(limit.plan?.kind == .plus)
            #expect(limit.resetsInSeconds == 3600)
            #expect(limit.message == "You've hit your usage limit")
            #expect(limit.resetsAt != nil)
        }
        let cli = try env.home.run("usage", "work", "--json")
        #expect(cli.status == 7)
        #expect(cli.stdout.contains("usage_limit_reached"))
    }

    /// A percentage that is not a number from 0 to 100 (-1e300 used to win auto-switching) makes
    /// the answer invalid, naming the field: the slot is never the one with most headroom.
    @Test func aUsagePercentageOutsideZeroToHundredIsAnInvalidResponse() async throws {
        let env = try await EmulatorHome()
        let hostile = try #require(try await env.signIn("hostile", email: "h@example.com").account.accountID)
        let honest = try #require(try await env.signIn("honest", email: "o@example.com").account.accountID)
        try await env.server.hook(
            "/_test/usage",
            ["account_id": honest, "primary_window": ["used_percent": 42, "limit_window_seconds": 18000]]
        )
        let hostileWindows: [(String, Any)] = [
            ("primary_window", -1e300), ("secondary_window", 100.5), ("primary_window", -1),
            ("secondary_window", "lots"),
        ]
        for (window, used) in hostileWindows {
            try await env.server.hook(
                "/_test/usage",
                ["account_id": hostile, window: ["used_percent": used, "limit_window_seconds": 18000]]
            )
            await #expect(
                throws: ClientError.invalidResponse(
                    "usage: .rate_limit.\(window).used_percent is not a percentage from 0 to 100"
                )
            ) {
                _ = try await env.manager().usage(slot: try Slot("hostile"))
            }
        }
        try await env.server.hook("/_test/usage", ["account_id": hostile, "primary_window": ["used_percent": -1e300]])
        let json = try env.home.run("usage", "--all", "--json")
        let slots = try #require(
            (try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["slots"]
                as? [[String: Any]],
            "\(json.stdout) \(json.stderr)"
        )
        let shown = try #require(slots.first { $0["slot"] as? String == "hostile" })
        #expect((shown["error"] as? [String: Any])?["code"] as? String == "invalid_response", "\(shown)")
        #expect(shown["next"] as? Bool != true && shown["windows"] == nil)
        #expect(
            (slots.first { $0["slot"] as? String == "honest" }?["windows"] as? [[String: Any]])?.first?["used_percent"]
                as? Double == 42
        )
        // Percentages at the ends of the range are accepted.
        try await env.server.hook(
            "/_test/usage",
            ["account_id": hostile, "primary_window": ["used_percent": 0], "secondary_window": ["used_percent": 100]]
        )
        let ends = try await env.manager().usage(slot: try Slot("hostile"))
        #expect(ends.primary?.usedPercent == 0 && ends.secondary?.usedPercent == 100)
    }

    @Test func a401RefreshesOnceAndRetries() async throws {
        let env = try await EmulatorHome()
        try await env.signIn("work", email: "w@example.com")
        try await env.server.hook("/_test/expire_access", ["all": true])
        let report = try await env.manager().usage(slot: try Slot("work"))
        #expect(report.plan != nil)
        #expect(try await env.server.stat("refreshes_succeeded") == 1)
    }

    @Test func parsesRateLimitHeaders() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let limit = UsageParser.limit(
            status: 429,
            body: Data(#"{"error":{"type":"usage_limit_reached","plan_type":"team","resets_at":1800003600}}"#.utf8),
            headers: [
                "x-codex-primary-used-percent": "100", "x-codex-primary-window-minutes": "300",
                "x-codex-primary-reset-after-seconds": "60",
            ],
            now: now
        )
        #expect(limit?.plan?.kind == .team)
        #expect(limit?.resetsAt == Date(timeIntervalSince1970: 1_800_003_600))
        #expect(limit?.rateLimit?.primary == UsageWindow(usedPercent: 100, windowSeconds: 18000, resetsAt: now + 60))
        #expect(
            UsageParser.limit(
                status: 429,
                body: Data(#"{"error":{"type":"rate_limited"}}"#.utf8),
                headers: [:],
                now: now
            ) == nil
        )
        #expect(throws: ClientError.self) { try UsageParser.report(Data("nope".utf8), now: now) }
    }
}
