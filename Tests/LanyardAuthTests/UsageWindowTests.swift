import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// Usage windows classified by their length (`limit_window_seconds`), never by their place in the
/// answer: the shapes ChatGPT accounts have (5 h + weekly, weekly only, monthly only, daily, odd
/// lengths), credits and banked resets, against the ChatGPT emulator over HTTP.
/// The elements of a JSON array (nil for anything else).
private func items(_ value: JSONValue?) -> [JSONValue]? {
    if case .array(let a)? = value { return a }
    return nil
}

@Suite struct UsageWindowTests {
    static let hour = 3600, day = 86400, month = 2_628_000

    /// A window of `seconds` at `used` percent, resetting in `resetIn` seconds.
    static func window(_ seconds: Int, _ used: Double, resetIn: Int = 7200) -> [String: Any] {
        ["seconds": seconds, "used_percent": used, "reset_after_seconds": resetIn]
    }

    /// The slots of every shape, signed in; each slot's account scripted with its windows.
    nonisolated(unsafe) static let shapes: [(slot: String, windows: [[String: Any]])] = [
        ("both", [window(5 * hour, 42), window(7 * day, 10, resetIn: 5 * day)]),
        ("weekly", [window(7 * day, 30, resetIn: 3 * day)]),
        ("monthly", [window(month, 6, resetIn: 20 * day + hour)]),
        ("daily", [window(day, 55)]),
        ("odd", [window(3 * hour, 12), window(12 * day, 64, resetIn: 9 * day)]),
    ]

    private func signInShapes(_ env: EmulatorHome) async throws -> [String: String] {
        var accounts: [String: String] = [:]
        for (slot, windows) in Self.shapes {
            let account = try #require(
                try await env.signIn(slot, email: "\(slot)@example.com", plan: "pro").account.accountID
            )
            accounts[slot] = account
            try await env.server.hook("/_test/usage", ["account_id": account, "windows": windows])
        }
        return accounts
    }

    /// The rows under a slot's title line in `usage` (name column first).
    private func rows(_ stdout: String) -> [String] {
        stdout.split(separator: "\n").dropFirst().map { $0.trimmingCharacters(in: .whitespaces) }
    }

    @Test func lengthsAreClassified() {
        #expect(
            UsageWindowLength(seconds: 18000) == .fiveHours && UsageWindowLength(seconds: 18000 + 299) == .fiveHours
        )
        #expect(UsageWindowLength(seconds: 86400) == .daily && UsageWindowLength(seconds: 604_800) == .weekly)
        #expect(UsageWindowLength(seconds: 2_628_000) == .monthly, "ChatGPT's monthly window: 30.4 days")
        #expect(
            UsageWindowLength(seconds: 28 * 86400) == .monthly && UsageWindowLength(seconds: 31 * 86400) == .monthly
        )
        #expect(UsageWindowLength(seconds: 32 * 86400) == .other(seconds: 32 * 86400))
        let names = [
            10800: "3 hours", 1_036_800: "12 days", 5400: "90 minutes", 3600: "1 hour", 9000: "2.5 hours",
            45: "45 seconds", 32 * 86400: "32 days", 14 * 86400: "14 days",
        ]
        for (seconds, name) in names { #expect(UsageWindowLength(seconds: seconds).name == name, "\(seconds) s") }
        #expect(
            UsageWindowLength(seconds: 18000).name == "5 h" && UsageWindowLength(seconds: 2_628_000).name == "monthly"
        )
        // The busiest window: the highest percentage whatever its place; of equal ones the longer.
        let five = UsageWindow(usedPercent: 40, windowSeconds: 18000)
        let week = UsageWindow(usedPercent: 40, windowSeconds: 604_800)
        #expect(UsageWindow.busiest([five, week]) == week)
        #expect(UsageWindow.busiest([UsageWindow(usedPercent: 90, windowSeconds: 18000), week])?.usedPercent == 90)
        #expect(UsageWindow.busiest([]) == nil)
    }

    /// Each shape shows exactly its windows, named by length with their resets: a weekly-only or
    /// monthly-only account has one row and no made-up 5 h row. `--json` keeps every window's
    /// `limit_window_seconds` and class.
    @Test func everyShapeShowsExactlyItsWindows() async throws {
        let env = try await EmulatorHome()
        _ = try await signInShapes(env)
        let expected: [String: [String]] = [
            "both": ["5 h ", "weekly "], "weekly": ["weekly "], "monthly": ["monthly "], "daily": ["daily "],
            "odd": ["3 hours ", "12 days "],
        ]
        for (slot, names) in expected {
            let out = try env.home.run("usage", slot)
            #expect(out.status == 0, "\(out.stderr)")
            let windowRows = rows(out.stdout).filter { !$0.hasPrefix("credits") }
            #expect(windowRows.count == names.count, "\(slot): \(out.stdout)")
            for (row, name) in zip(windowRows, names) {
                #expect(row.hasPrefix(name) && row.contains("resets in "), "\(slot): \(row)")
            }
            #expect(!out.stdout.contains("5 h") || slot == "both", "\(slot): no 5 h row: \(out.stdout)")
        }
        let monthly = try env.home.run("usage", "monthly")
        #expect(monthly.stdout.contains("   6%  resets in 20 d ("), "\(monthly.stdout)")

        let json = try env.home.run("usage", "--all", "--json")
        #expect(json.status == 0, "\(json.stderr)")
        let slots = try #require(items((try JSONValue.parse(Data(json.stdout.utf8)))["slots"]))
        func windows(_ slot: String) -> [JSONValue] {
            items(slots.first { $0["slot"]?.string == slot }?["windows"]) ?? []
        }
        #expect(windows("both").map { $0["window"]?.string } == ["5h", "weekly"])
        #expect(windows("both").map { $0["limit_window_seconds"]?.number } == [18000, 604_800])
        #expect(windows("weekly").count == 1 && windows("weekly").first?["window"]?.string == "weekly")
        #expect(
            windows("weekly").first?["field"]?.string == "primary_window",
            "a weekly-only account's weekly window is its primary"
        )
        #expect(
            windows("monthly").first?["window"]?.string == "monthly"
                && windows("monthly").first?["limit_window_seconds"]?.number == 2_628_000
        )
        #expect(
            windows("daily").first?["window"]?.string == "daily"
                && windows("daily").first?["used_percent"]?.number == 55
        )
        #expect(windows("odd").map { $0["window"]?.string } == ["other", "other"])
        #expect(windows("odd").map { $0["name"]?.string } == ["3 hours", "12 days"])
        #expect(windows("odd").allSatisfy { $0["resets_at"]?.string != nil && $0["at_limit"] == .bool(false) })
        #expect(slots.allSatisfy { $0["next"] == nil }, "no auto-switch mark while auto-switching is off")
    }

    /// Credits (balance, has_credits, unlimited) and banked resets are shown when sent, and
    /// outside text in them is escaped or refused.
    @Test func creditsAndBankedResetsAreShownWhenSent() async throws {
        let env = try await EmulatorHome()
        let account = try #require(try await env.signIn("work", email: "w@example.com").account.accountID)
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": account, "windows": [Self.window(7 * Self.day, 20)],
                "credits": ["has_credits": true, "unlimited": false, "balance": "12.50"],
                "rate_limit_reset_credits": ["available_count": 2],
            ]
        )
        let out = try env.home.run("usage", "work")
        #expect(out.status == 0, "\(out.stderr)")
        #expect(rows(out.stdout).contains("credits        balance 12.50"), "\(out.stdout)")
        #expect(rows(out.stdout).contains("banked resets  2"), "\(out.stdout)")
        let json = try JSONValue.parse(Data(try env.home.run("usage", "work", "--json").stdout.utf8))
        let slot = try #require(items(json["slots"])?.first)
        #expect(
            slot["credits"]
                == .object(["has_credits": .bool(true), "unlimited": .bool(false), "balance": .string("12.50")])
        )
        #expect(slot["reset_credits"]?.number == 2)

        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": account, "windows": [Self.window(7 * Self.day, 20)],
                "credits": ["has_credits": true, "unlimited": true],
            ]
        )
        #expect(rows(try env.home.run("usage", "work").stdout).contains("credits        unlimited"))
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": account, "windows": [Self.window(7 * Self.day, 20)],
                "credits": ["has_credits": false, "unlimited": false, "balance": "0"],
            ]
        )
        #expect(rows(try env.home.run("usage", "work").stdout).contains("credits        balance 0 (no credits)"))
        try await env.server.hook(
            "/_test/usage",
            ["account_id": account, "windows": [Self.window(7 * Self.day, 20)], "credits": NSNull()]
        )
        #expect(!(try env.home.run("usage", "work").stdout.contains("credits")), "no credits row when none are sent")
    }

    /// A metered feature's own limit (`additional_rate_limits`, one model's windows) is shown under
    /// its name, but not weighed: the account is not at its limit because one model is.
    @Test func aFeaturesOwnLimitIsShownButNotWeighed() async throws {
        let env = try await EmulatorHome()
        let account = try #require(try await env.signIn("work", email: "w@example.com").account.accountID)
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": account, "windows": [Self.window(7 * Self.day, 20)],
                "additional_rate_limits": [
                    [
                        "limit_name": "GPT-5.3-Codex-Spark", "metered_feature": "codex_spark",
                        "rate_limit": [
                            "allowed": false, "limit_reached": true,
                            "primary_window": [
                                "used_percent": 100, "limit_window_seconds": 18000,
                                "reset_after_seconds": 600,
                            ],
                        ],
                    ]
                ],
            ]
        )
        let report = try await env.manager().usage(slot: try Slot("work"))
        #expect(!report.isAtLimit && report.highestUsedPercent == 20 && report.windows.count == 1)
        #expect(
            report.additionalLimits.first?.isAtLimit == true
                && report.additionalLimits.first?.primary?.length == .fiveHours
        )
        let out = try env.home.run("usage", "work")
        #expect(out.status == 0, "\(out.stderr)")
        #expect(rows(out.stdout).contains("GPT-5.3-Codex-Spark only  at limit:"), "\(out.stdout)")
        #expect(rows(out.stdout).contains { $0.hasPrefix("5 h ") && $0.contains("100%") }, "\(out.stdout)")
        #expect(
            !out.stdout.split(separator: "\n").first!.contains("at limit"),
            "the account itself is not at its limit"
        )
        let json = try JSONValue.parse(Data(try env.home.run("usage", "work", "--json").stdout.utf8))
        let slot = try #require(items(json["slots"])?.first)
        let extra = try #require(items(slot["additional_limits"])?.first)
        #expect(extra["metered_feature"]?.string == "codex_spark" && extra["limit_reached"] == .bool(true))
        #expect(items(extra["windows"])?.first?["window"]?.string == "5h" && slot["limit_reached"] == .bool(false))
    }

    /// A payload of the wrong shape is an invalid answer naming the field's path (exit 6, code
    /// `invalid_response`), never a crash, and nothing from it reaches the terminal unescaped.
    @Test func aMalformedPayloadIsATypedErrorNamingTheField() async throws {
        let env = try await EmulatorHome()
        let account = try #require(try await env.signIn("work", email: "w@example.com").account.accountID)
        let cases: [(raw: Any, path: String)] = [
            (["rate_limit": "full"], ".rate_limit is not an object"),
            (["rate_limit": ["primary_window": [1, 2]]], ".rate_limit.primary_window is not an object"),
            (
                ["rate_limit": ["primary_window": ["used_percent": 5, "limit_window_seconds": "5h"]]],
                ".rate_limit.primary_window.limit_window_seconds is not a number"
            ),
            (
                ["rate_limit": ["secondary_window": ["used_percent": 5, "reset_at": "soon"]]],
                ".rate_limit.secondary_window.reset_at is not a number"
            ),
            (["rate_limit": ["limit_reached": "yes"]], ".rate_limit.limit_reached is not true or false"),
            (["credits": ["has_credits": "yes"]], ".credits.has_credits is not true or false"),
            (["credits": ["balance": "1\u{1B}]52;c;aGk=\u{07}"]], ".credits.balance"),
            (["credits": 7], ".credits is not an object"),
            (
                ["rate_limit_reset_credits": ["available_count": -1]],
                ".rate_limit_reset_credits.available_count is not a count"
            ),
            (
                ["rate_limit_reset_credits": ["available_count": 1.5]],
                ".rate_limit_reset_credits.available_count is not a whole number"
            ),
            (["plan_type": 3], ".plan_type is not a string"),
            (
                [
                    "additional_rate_limits": [
                        ["limit_name": "x", "rate_limit": ["primary_window": ["used_percent": 300]]]
                    ]
                ],
                ".additional_rate_limits[0].rate_limit.primary_window.used_percent is not a percentage from 0 to 100"
            ),
            (["additional_rate_limits": ["limit_name": "x"]], ".additional_rate_limits is not a list"),
            (
                ["additional_rate_limits": [["limit_name": "Spark\u{1B}[2J"]]],
                ".additional_rate_limits[0].limit_name has a control character"
            ),
        ]
        for (raw, path) in cases {
            try await env.server.hook("/_test/usage", ["account_id": account, "raw": raw])
            do {
                _ = try await env.manager().usage(slot: try Slot("work"))
                Issue.record("expected an invalid response for \(path)")
            } catch ClientError.invalidResponse(let message) {
                #expect(message.hasPrefix("usage: \(path)"), "\(message)")
            }
            let out = try env.home.run("usage", "work")
            #expect(out.status == 6, "\(path): \(out.stdout) \(out.stderr)")
            #expect(out.stderr.contains(path), "\(out.stderr)")
            #expect(
                !out.stderr.contains("\u{1B}]52") && !out.stdout.contains("\u{1B}]52"),
                "outside text never reaches the terminal raw"
            )
        }
    }

    /// `switch --best` weighs each slot's busiest window whatever its length: a 5 h window at
    /// 80 %, a weekly-only 50 %, a monthly 60 %, and a 12-day window at 100 % (at its limit,
    /// though the server's `limit_reached` is false) → the weekly-only slot. The switch is logged
    /// with why, and `events` says it. `exec --best` runs as the same slot.
    @Test func switchBestWeighsTheBusiestWindowAcrossShapes() async throws {
        let env = try await EmulatorHome(extraConfig: "[backoff]\nmax-retries = 0")
        var accounts: [String: String] = [:]
        for slot in ["fiveh", "weekly", "monthly", "odd"] {
            accounts[slot] = try await env.signIn(slot, email: "\(slot)@example.com").account.accountID
        }
        let scripts: [String: [[String: Any]]] = [
            "fiveh": [Self.window(5 * Self.hour, 80), Self.window(7 * Self.day, 30)],
            "weekly": [Self.window(7 * Self.day, 50)],
            "monthly": [Self.window(Self.month, 60)],
            "odd": [Self.window(3 * Self.hour, 0), Self.window(12 * Self.day, 100, resetIn: 3 * Self.day + Self.hour)],
        ]
        for (slot, windows) in scripts {
            try await env.server.hook("/_test/usage", ["account_id": accounts[slot]!, "windows": windows])
        }
        #expect(try env.home.run("switch", "odd").status == 0)
        // `exec --best` weighs the same way, without switching.
        let exec = try env.home.run("exec", "--best", "--", "sh", "-c", "echo $LANYARD_ACCOUNT")
        #expect(exec.status == 0 && exec.stdout == "weekly\n", "\(exec.stdout) \(exec.stderr)")
        #expect(try Registry(paths: env.paths).loadInTest().active?.name == "odd")
        let result = try env.home.run("switch", "--best")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout.contains("fiveh           80% used in its busiest window (5 h window)"),
            "\(result.stdout)"
        )
        #expect(result.stdout.contains("weekly          50% used in its busiest window (weekly window)"))
        #expect(result.stdout.contains("monthly         60% used in its busiest window (monthly window)"))
        #expect(
            result.stdout.contains("odd             at its usage limit (12 days window), resets in 3 d"),
            "\(result.stdout)"
        )
        #expect(result.stdout.contains("Choosing weekly"))
        #expect(try Registry(paths: env.paths).loadInTest().active?.name == "weekly")

        let switches = LanyardStore.EventLog(paths: env.paths).read().filter { $0["event"]?.string == "switch" }
        #expect(switches.map { $0["reason"]?.string } == ["user", "best"])
        #expect(
            switches.last?["from"]?.string == "odd" && switches.last?["to"]?.string == "weekly"
                && switches.last?["to_used_percent"]?.number == 50
        )
        let events = try env.home.run("events")
        #expect(events.stdout.contains("-> odd (switch by the user)"), "\(events.stdout)")
        #expect(
            events.stdout.contains("odd -> weekly (switch --best: the most headroom, 50 % used)"),
            "\(events.stdout)"
        )

        // --json names each candidate's busiest window by class and length.
        #expect(try env.home.run("switch", "odd").status == 0)
        let json = try JSONValue.parse(Data(try env.home.run("switch", "--best", "--json").stdout.utf8))
        let odd = items(json["candidates"])?.first { $0["slot"]?.string == "odd" }
        #expect(odd?["window"]?.string == "other" && odd?["limit_window_seconds"]?.number == Double(12 * Self.day))
        #expect(json["active"]?.string == "weekly")
    }

    /// `usage --all` marks where auto-switching goes next only while it is on.
    @Test func theNextMarkNeedsAutoSwitchingOn() async throws {
        for auto in [false, true] {
            let env = try await EmulatorHome(extraConfig: auto ? "[switch]\nauto = usage" : "")
            for slot in ["a", "b"] {
                let account = try #require(try await env.signIn(slot, email: "\(slot)@example.com").account.accountID)
                try await env.server.hook(
                    "/_test/usage",
                    ["account_id": account, "windows": [Self.window(7 * Self.day, slot == "a" ? 97 : 10)]]
                )
            }
            #expect(try env.home.run("switch", "a").status == 0)
            let human = try env.home.run("usage", "--all")
            #expect(human.stdout.contains("(next: auto-switch goes here)") == auto, "auto = \(auto): \(human.stdout)")
            let json = try JSONValue.parse(Data(try env.home.run("usage", "--all", "--json").stdout.utf8))
            let b = items(json["slots"])?.first { $0["slot"]?.string == "b" }
            #expect(b?["next"] == (auto ? .bool(true) : nil), "auto = \(auto)")
        }
    }
}
