import Foundation
import LanyardAuth
import LanyardCore
import LanyardSupport
import Testing

/// Numbers from servers and tokens that JSON allows but no date or Int holds (1e300; Lanyard's
/// JSON reader refuses 1e400, which would be infinity, and headers can say "inf"). Each used to
/// trap (crash) the process somewhere between the response and the stored credential or the
/// printed line.
@Suite struct HostileNumberTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func datesOutsideFourDigitYearsAreWrittenAtTheNearestEnd() throws {
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 1e300)) == "9999-12-31T23:59:59Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: .infinity)) == "9999-12-31T23:59:59Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: -1e300)) == "0001-01-01T00:00:00Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: .nan)) == "1970-01-01T00:00:00Z")
        for text in ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z"] {
            let date = try #require(RFC3339.date(from: text))
            #expect(RFC3339.string(from: date) == text)
        }
    }

    @Test func saturatingIntAndPlausibility() {
        #expect(
            1e300.saturatingInt == .max && (-Double.infinity).saturatingInt == .min && Double.nan.saturatingInt == 0
        )
        #expect(42.9.saturatingInt == 42)
        #expect(
            3600.0.plausibleSeconds == 3600 && 1e300.plausibleSeconds == nil && Double.infinity.plausibleSeconds == nil
        )
        #expect(1_800_000_000.0.plausibleUnixTime != nil && 1e12.plausibleUnixTime == nil)
    }

    @Test func tokenResponsesWithImpossibleLifetimesAreInvalid() throws {
        func parse(_ json: String) throws(AuthError) -> TokenResponse {
            try TokenResponse.parse(Data(json.utf8), step: "refresh")
        }
        for bad in ["1e300", "-1e300", "-5"] {
            #expect(throws: AuthError.invalidResponse("refresh: .expires_in is not a number of seconds")) {
                _ = try parse(#"{"access_token":"a","expires_in":\#(bad)}"#)
            }
        }
        let good = try parse(#"{"access_token":"a","expires_in":3600}"#)
        #expect(good.expiresAt(now: now) == now + 3600)
    }

    @Test func anAccessTokenWhoseExpiryNoDateHoldsHasNone() throws {
        let payload = Base64URL.encode(Data(#"{"exp":1e300,"iat":-1e300}"#.utf8))
        let claims = try JWTClaims(token: "e30.\(payload).sig")
        #expect(claims.expiresAt == nil && claims.issuedAt == nil)
        let tokens = TokenResponse(accessToken: "e30.\(payload).sig")
        #expect(tokens.expiresAt(now: now) == nil)
    }

    @Test func usageWindowsWithImpossibleNumbersAreLeftOutOrTrimmed() throws {
        let body = #"""
            {"plan_type":"pro","rate_limit":{
              "primary_window":{"used_percent":null,"limit_window_seconds":18000},
              "secondary_window":{"used_percent":12,"limit_window_seconds":1e300,"reset_at":1e300,\#
            "reset_after_seconds":1e300}}}
            """#
        let report = try UsageParser.report(Data(body.utf8), now: now)
        #expect(report.primary == nil)
        #expect(
            report.secondary?.usedPercent == 12 && report.secondary?.windowSeconds == nil
                && report.secondary?.resetsAt == nil
        )

        let limit = #"{"error":{"type":"usage_limit_reached","resets_in_seconds":1e300,"resets_at":-1e300}}"#
        let parsed = try #require(
            UsageParser.limit(
                status: 429,
                body: Data(limit.utf8),
                headers: [
                    "x-codex-primary-used-percent": "inf", "x-codex-secondary-used-percent": "7",
                    "x-codex-secondary-reset-after-seconds": "1e300",
                ],
                now: now
            )
        )
        #expect(parsed.resetsAt == nil && parsed.resetsInSeconds == nil)
        #expect(
            parsed.rateLimit?.primary == nil && parsed.rateLimit?.secondary?.usedPercent == 7
                && parsed.rateLimit?.secondary?.resetsAt == nil
        )
        let outOfRange = UsageParser.limit(
            status: 429,
            body: Data(limit.utf8),
            headers: ["x-codex-primary-used-percent": "-1e300", "x-codex-secondary-used-percent": "100.5"],
            now: now
        )
        #expect(outOfRange?.rateLimit == nil)
    }

    /// A usage percentage decides which slot auto-switching picks: one that is not a number from
    /// 0 to 100 makes the answer invalid, naming the field (-1e300 used to win every comparison).
    @Test(arguments: ["-1e300", "1e300", "-1", "100.5", "-0.001", #""lots""#, "true", "[]"])
    func usagePercentagesOutsideZeroToHundredAreInvalid(_ used: String) {
        for window in ["primary_window", "secondary_window"] {
            let body = #"{"plan_type":"pro","rate_limit":{"\#(window)":{"used_percent":\#(used)}}}"#
            #expect(
                throws: ClientError.invalidResponse(
                    "usage: .rate_limit.\(window).used_percent is not a percentage from 0 to 100"
                )
            ) {
                _ = try UsageParser.report(Data(body.utf8), now: now)
            }
        }
        for used in ["0", "100", "42.5"] {
            #expect(
                (try? UsageParser.report(
                    Data(#"{"rate_limit":{"primary_window":{"used_percent":\#(used)}}}"#.utf8),
                    now: now
                ))?.primary != nil
            )
        }
    }
}
