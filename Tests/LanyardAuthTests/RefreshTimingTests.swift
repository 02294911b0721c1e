import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

/// When tokens are refreshed, against the emulator with a clock the test moves: the lead scales
/// with the token's lifetime, and a wall clock set forward or back neither makes `token` refresh
/// on every call nor hand out a token that has expired.
@Suite struct RefreshTimingTests {
    /// A clock at a whole second near now (the emulator's tokens carry real times in their claims).
    static func clock() -> ManualClock {
        ManualClock(Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)))
    }

    /// Ten simulated minutes of a call every 5 s under the default lead (300 s): how many refreshes.
    @Test(arguments: [(60, 20), (300, 4), (3600, 0)])
    func refreshesPerTenMinutesScaleWithTheLifetime(_ lifetime: Int, _ expected: Int) async throws {
        let env = try await EmulatorHome()
        try await env.server.hook("/_test/config", ["access_token_lifetime": lifetime])
        let clock = Self.clock()
        let manager = try env.manager(clock: clock)
        try await env.server.signIn(manager, slot: "work", email: "w@example.com")
        var tokens: Set<String> = []
        var handedOutExpired = 0
        for _ in 0..<120 {
            clock.advance(by: 5)
            let credential = try await manager.freshCredential(slot: try Slot("work"))
            tokens.insert(credential.tokens.accessToken)
            if let expiry = credential.tokens.expiresAt, expiry <= clock.now() { handedOutExpired += 1 }
        }
        let refreshes = try await env.server.stat("refreshes_succeeded")
        #expect(refreshes == expected, "\(lifetime) s tokens: \(refreshes) refreshes in 10 minutes")
        #expect(tokens.count == expected + 1)
        #expect(handedOutExpired == 0)
    }

    @Test func aWallClockSetForwardADayRefreshesNothing() async throws {
        let env = try await EmulatorHome()
        let clock = Self.clock()
        let manager = try env.manager(clock: clock)
        let signedIn = try await env.server.signIn(manager, slot: "work", email: "w@example.com")
        clock.jump(by: 86_400)
        for _ in 0..<10 {
            clock.advance(by: 1)
            #expect(
                try await manager.freshCredential(slot: try Slot("work")).tokens.accessToken
                    == signedIn.tokens.accessToken
            )
        }
        #expect(try await env.server.stat("refreshes_succeeded") == 0)
        // The token's hour runs out on the boot clock: one refresh, then none again.
        clock.advance(by: 3_400)
        let refreshed = try await manager.freshCredential(slot: try Slot("work"))
        #expect(refreshed.tokens.accessToken != signedIn.tokens.accessToken)
        for _ in 0..<10 {
            clock.advance(by: 1)
            _ = try await manager.freshCredential(slot: try Slot("work"))
        }
        #expect(try await env.server.stat("refreshes_succeeded") == 1)
    }

    @Test func aWallClockSetBackAnHourHandsOutNoExpiredToken() async throws {
        let env = try await EmulatorHome()
        try await env.server.hook("/_test/config", ["access_token_lifetime": 600])
        let clock = Self.clock()
        let manager = try env.manager(clock: clock)
        let signedIn = try await env.server.signIn(manager, slot: "work", email: "w@example.com")
        clock.advance(by: 200)
        clock.jump(by: -3_600)
        // 200 s old by the boot clock, 400 left: more than the lead (300, halved to 300 for a
        // 600 s token), so no refresh yet, although the wall clock says it is younger still.
        #expect(
            try await manager.freshCredential(slot: try Slot("work")).tokens.accessToken == signedIn.tokens.accessToken
        )
        // 700 s old: expired, although by the wall clock it has 3,500 s left.
        clock.advance(by: 500)
        let handed = try await manager.freshCredential(slot: try Slot("work"))
        #expect(handed.tokens.accessToken != signedIn.tokens.accessToken)
        #expect(try await env.server.stat("refreshes_succeeded") == 1)
        #expect(!manager.refreshRule.needsRefresh(handed, now: clock.now(), boot: clock.bootInstant()))
    }

    /// Tokens from another boot (or written before boot readings were kept) fall back to the wall clock.
    @Test func anotherBootsReadingFallsBackToTheWallClock() {
        let rule = RefreshRule(lead: 300, maxAge: 86_400)
        let obtained = Date(timeIntervalSince1970: 1_800_000_000)
        let credential = Credential(
            provider: "openai",
            tokens: TokenSet(accessToken: "a", refreshToken: "r", expiresAt: obtained + 3_600),
            lastRefresh: obtained,
            lastRefreshBoot: BootInstant(bootID: "aaaa", seconds: 50),
            account: AccountInfo()
        )
        let sameBoot = BootInstant(bootID: "aaaa", seconds: 50 + 3_400)
        let otherBoot = BootInstant(bootID: "bbbb", seconds: 10)
        // The wall clock says 100 s passed; the boot clock, 3,400 s.
        #expect(rule.needsRefresh(credential, now: obtained + 100, boot: sameBoot))
        #expect(!rule.needsRefresh(credential, now: obtained + 100, boot: otherBoot))
        #expect(!rule.needsRefresh(credential, now: obtained + 100, boot: nil))
        #expect(rule.needsRefresh(credential, now: obtained + 3_300, boot: otherBoot))
        // A boot clock reading earlier than the stored one is not this boot's clock after all.
        #expect(!rule.needsRefresh(credential, now: obtained + 100, boot: BootInstant(bootID: "aaaa", seconds: 10)))
    }

    @Test func theLeadIsAtMostHalfTheLifetime() {
        let rule = RefreshRule(lead: 300, maxAge: 86_400)
        #expect(rule.lead(forLifetime: 60) == 30)
        #expect(rule.lead(forLifetime: 300) == 150)
        #expect(rule.lead(forLifetime: 3_600) == 300)
        #expect(rule.lead(forLifetime: nil) == 300)
    }

    @Test func bootReadingsSurviveTheStoreAndRejectGarbage() throws {
        let instant = BootInstant(bootID: "3f2b9c1e-8d4a-4c7e-9b1f-2a6d5e8c7b40", seconds: 12_345.678)
        #expect(BootInstant(text: instant.text) == instant)
        for bad in ["", "x 1", "abc", "abc -1", "abc nan", "abc inf", "abc 1 2", "ABC 1", "\u{1b}[31m 1"] {
            #expect(BootInstant(text: bad) == nil, "\(bad.debugDescription)")
        }
        let current = try #require(BootInstant.current())
        #expect(BootInstant(text: current.text)?.bootID == current.bootID)
    }
}
