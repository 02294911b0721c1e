import Foundation
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

@Suite struct RegistryConcurrencyTests {
    /// Two real processes each switch 200 times while this process keeps reading: every read parses
    /// and the final file is whole.
    @Test func twoProcessesSwitchingAtOnceNeverTearTheFile() throws {
        let h = CLIHarness()
        for i in 0..<4 { try h.addSlot("s\(i)") }
        let binary = lanyardBinary()
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build lanyard first (\(binary))")
        let script =
            "for i in $(seq 1 100); do \"$0\" switch $1 >/dev/null || exit 1; "
            + "\"$0\" switch $2 >/dev/null || exit 1; done"
        func spawn(_ a: String, _ b: String) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/sh")
            p.arguments = ["-c", script, binary, a, b]
            p.environment = h.environment
            try p.run()
            return p
        }
        let first = try spawn("s0", "s1")
        let second = try spawn("s2", "s3")
        var reads = 0
        while first.isRunning || second.isRunning {
            let doc = try h.registry.load()  // throws if it ever sees a torn file
            #expect(doc.slots.count == 4)
            reads += 1
        }
        first.waitUntilExit()
        second.waitUntilExit()
        #expect(first.terminationStatus == 0 && second.terminationStatus == 0)
        let final = try h.registry.load()
        #expect(["s1", "s3"].contains(final.active?.name ?? ""))
        #expect(final.slots.count == 4)
        #expect(reads > 0)
    }
}

/// Operations that move or delete a slot's credential wait for a refresh of that slot that is
/// under way (they take its refresh lock), so they never copy a refresh token the server is
/// rotating, nor have the refresh write back what they removed. Found by scripts/soak/concurrency.sh.
@Suite struct RefreshRaceTests {
    /// Starts `lanyard refresh SLOT` with the server holding its answer, and returns once the
    /// server has the request (its counter moved): the refresh is then in flight.
    func refreshInFlight(_ env: IntegrationHome, _ slot: String) async throws -> (Process, Pipe, Pipe) {
        let before = try await env.server.stat("requests.oauth_token")
        try await env.server.hook("/_test/fault", ["endpoint": "oauth_token", "type": "delay", "seconds": 1.5])
        let running = try env.home.start(["refresh", slot])
        // A bound, not a margin: a debug binary started beside hundreds of parallel tests took
        // more than 10 s to send its request once.
        try await eventually("the refresh reaches the server", seconds: 120) {
            try await env.server.stat("requests.oauth_token")
        } until: {
            $0 != before
        }
        return running
    }

    @Test func aRenameDuringARefreshMovesTheRotatedTokens() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("r1", email: "race@example.com")
        let (refresh, _, _) = try await refreshInFlight(env, "r1")
        let rename = try env.run("rename", "r1", "r2")
        refresh.waitUntilExit()
        #expect(rename.status == 0, "\(rename.stderr)")
        #expect(refresh.terminationStatus == 0)
        // r2 holds the rotated tokens: refreshing it again works and nothing was reused.
        #expect(try env.run("refresh", "r2").status == 0)
        #expect(try await env.server.stat("refresh_reused") == 0)
        #expect(try await env.server.stat("refreshes_succeeded") == 2)
        #expect(try env.run("doctor").status == 0)
    }

    @Test func aLogoutDuringARefreshStaysSignedOut() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("r1", email: "race@example.com")
        let (refresh, _, _) = try await refreshInFlight(env, "r1")
        let logout = try env.run("logout", "r1")
        refresh.waitUntilExit()
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(try env.run("status", "r1").status == 3)
        #expect(throws: StoreError.self) { _ = try env.stored("r1") }
        #expect(try env.run("doctor").status == 0)
    }
}
