import Foundation
import LanyardCore
import Testing

@Suite struct BackoffPolicyTests {
    @Test func defaultsMatchTheSeed() {
        let p = BackoffPolicy.default
        #expect(p.maxRetries == 2 && p.initialDelay == 1 && p.maximumDelay == 30 && p.respectsRetryAfterHeader)
        #expect(BackoffPolicy.disabled.maxRetries == 0)
        #expect(BackoffPolicy.disabled.delay(beforeRetry: 0, unitRandom: 0.5) == nil)
    }

    @Test func delaysGrowExponentiallyWithinJitterBounds() {
        let p = BackoffPolicy.default
        for r in [0.0, 0.3, 0.999] {
            let first = p.delay(beforeRetry: 0, unitRandom: r)!
            let second = p.delay(beforeRetry: 1, unitRandom: r)!
            #expect(first >= 1 && first < 1.25)
            #expect(second >= 2 && second < 2.5)
        }
        #expect(p.delay(beforeRetry: 2, unitRandom: 0) == nil)
    }

    @Test func capsAtTheMaximum() {
        let p = BackoffPolicy(maxRetries: 10, initialDelay: 1, maximumDelay: 15)
        #expect(p.delay(beforeRetry: 9, unitRandom: 0.9) == 15)
        #expect(p.delay(beforeRetry: 0, retryAfter: 120, unitRandom: 0) == 15)
    }

    @Test func honoursRetryAfterUnlessDisabled() {
        #expect(BackoffPolicy.default.delay(beforeRetry: 0, retryAfter: 7, unitRandom: 0) == 7)
        let ignoring = BackoffPolicy(respectsRetryAfterHeader: false)
        #expect(ignoring.delay(beforeRetry: 0, retryAfter: 7, unitRandom: 0) == 1)
    }

    @Test func parsesRetryAfterSecondsAndHTTPDates() {
        let now = Date(timeIntervalSince1970: 1_784_000_000)  // 2026-07-14T03:33:20Z
        #expect(BackoffPolicy.retryAfterSeconds("12", now: now) == 12)
        #expect(BackoffPolicy.retryAfterSeconds("Tue, 14 Jul 2026 03:33:50 GMT", now: now) == 30)
        #expect(BackoffPolicy.retryAfterSeconds("Mon, 13 Jul 2026 00:00:00 GMT", now: now) == 0)
        #expect(BackoffPolicy.retryAfterSeconds("soon", now: now) == nil)
    }
}

@Suite struct AccountResolutionTests {
    let work = try! Slot("work")

    @Test func eachRuleWinsOverTheNext() throws {
        let pin = (path: "/p/.lanyard", name: "pinned")
        #expect(
            try AccountResolution.resolve(flag: "flagged", environment: "env", pinFile: pin, active: work)?.rule
                == .flag
        )
        #expect(
            try AccountResolution.resolve(flag: nil, environment: "env", pinFile: pin, active: work)
                == AccountResolution(slot: try Slot("env"), rule: .environment)
        )
        #expect(
            try AccountResolution.resolve(flag: nil, environment: nil, pinFile: pin, active: work)
                == AccountResolution(slot: try Slot("pinned"), rule: .pinFile(path: "/p/.lanyard"))
        )
        #expect(
            try AccountResolution.resolve(flag: nil, environment: "", pinFile: nil, active: work)
                == AccountResolution(slot: work, rule: .activeSlot)
        )
        #expect(try AccountResolution.resolve(flag: nil, environment: nil, pinFile: nil, active: nil) == nil)
    }

    /// The lazy form looks for a pin file or the active slot only when it must, and agrees with
    /// the eager form on every combination.
    @Test func theLazyFormAsksOnlyForWhatItNeedsAndAgrees() throws {
        let pin = (path: "/p/.lanyard", name: "pinned")
        for flag in [nil, "flagged"] as [String?] {
            for environment in [nil, "", "env"] as [String?] {
                for pinFile in [nil, pin] as [(path: String, name: String)?] {
                    var asked: [String] = []
                    let lazy = try AccountResolution.resolve(
                        flag: flag,
                        environment: environment,
                        pinFile: {
                            asked.append("pin")
                            return pinFile
                        },
                        active: {
                            asked.append("active")
                            return work
                        }
                    )
                    #expect(
                        lazy
                            == (try AccountResolution.resolve(
                                flag: flag,
                                environment: environment,
                                pinFile: pinFile,
                                active: work
                            ))
                    )
                    let named = flag != nil || !(environment ?? "").isEmpty
                    #expect(
                        asked == (named ? [] : pinFile != nil ? ["pin"] : ["pin", "active"]),
                        "\(String(describing: flag)) \(String(describing: environment))"
                    )
                }
            }
        }
    }

    @Test func badNamesAreReportedWithTheirRule() {
        do {
            _ = try AccountResolution.resolve(flag: nil, environment: "Bad", pinFile: nil, active: nil)
            Issue.record("should throw")
        } catch {
            #expect(error.rule == .environment)
            #expect(error.localizedDescription.contains("LANYARD_ACCOUNT"))
        }
    }
}

@Suite struct UsageLimitTests {
    @Test func summaryNamesPlanAndReset() {
        let limit = UsageLimit(
            message: "You hit your limit",
            plan: Plan(rawValue: "plus"),
            resetsAt: Date(timeIntervalSince1970: 1_800_000_000)
        )
        #expect(limit.summary == "You hit your limit (plan: Plus); resets at 2027-01-15T08:00:00Z")
    }
}
