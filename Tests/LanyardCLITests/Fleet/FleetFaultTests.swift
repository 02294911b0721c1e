import Foundation
import Glibc
import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// The fleet when things fail: no quorum, a lock holder killed, and the agent's watch. The
/// tests that stop etcd members use a private cluster, so other test processes keep theirs.
@Suite(.serialized) struct FleetFaultTests {
    /// Two of three members stopped: a token still valid is served, an expired one is exit 5
    /// naming the fleet and the endpoints; once etcd is back, one refresh serves both machines.
    @Test func withoutQuorumValidTokensAreServedExpiredOnesFailAndTheFleetCatchesUp() async throws {
        try await EtcdCluster.withPrivateCluster { cluster in
            // Sign-in tokens live 90 s (setting up a private cluster and two machines took over 40 s
            // with the whole suite running in parallel on 2 cores) and are due at once (the lead
            // covers the whole lifetime).
            let h = try await FleetHarness(
                machines: 2,
                refresh: "[refresh]\nlead = 300\nlead-share = 1",
                lifetime: 90,
                cluster: cluster
            )
            let m1 = h.machines[0]
            let m2 = h.machines[1]
            let before = try m2.stored("work")
            try await cluster.kill(member: cluster.memberNames[1])
            try await cluster.kill(member: cluster.memberNames[2])
            let served = try m2.run("token", "work")
            #expect(served.status == 0, "\(served.stderr)")
            let servedStored =
                served.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == before.tokens.accessToken
            #expect(servedStored, "the stored token was not served")

            // Once the token has expired, nothing is refreshed blind: exit 5, naming fleet and endpoints.
            let expiry = try #require(before.tokens.expiresAt)
            while Date() <= expiry.addingTimeInterval(0.5) { try await Task.sleep(for: .milliseconds(100)) }
            let failed = try m2.run("token", "work", "--json")
            #expect(failed.status == 5, "\(failed.stdout) \(failed.stderr)")
            #expect(
                failed.stdout.contains("fleet_unavailable") && failed.stdout.contains(h.fleet)
                    && failed.stdout.contains("127.0.0.1"),
                "\(failed.stdout)"
            )
            #expect(try await h.server.stat("refreshes_succeeded") == 0)

            try await cluster.restart(member: cluster.memberNames[1])
            try await cluster.restart(member: cluster.memberNames[2])
            try await cluster.waitHealthy()
            try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
            let recovered = Date()
            let first = try m2.run("token", "work")
            let second = try m1.run("token", "work")
            #expect(first.status == 0 && second.status == 0, "\(first.stderr) \(second.stderr)")
            let converged = first.stdout == second.stdout && first.stdout != served.stdout
            #expect(converged, "the machines hold different tokens, or the old one")
            // Typically well under a second (docs/fleet.md); the bound only catches a machine that
            // does not catch up at all, with room for a loaded 2-core machine.
            #expect(
                Date().timeIntervalSince(recovered) < 60,
                "the machines took \(Date().timeIntervalSince(recovered)) s to converge"
            )
            #expect(try await h.server.stat("refreshes_succeeded") == 1)
            #expect(try await h.server.stat("refresh_reused") == 0)
        }
    }

    /// A sign-in made while the fleet has no quorum is kept on its machine (nothing lost, the
    /// person told) and reaches the fleet with the next sync once etcd is back; the other machine,
    /// whose session had died, then hands out the new sign-in.
    @Test func aSignInWithoutQuorumIsKeptAndReachesTheFleetLater() async throws {
        try await EtcdCluster.withPrivateCluster { cluster in
            let h = try await FleetHarness(machines: 2, cluster: cluster)
            let m1 = h.machines[0]
            let m2 = h.machines[1]
            _ = try await h.server.hook(
                "/_test/revoke_family",
                ["refresh_token": try #require(m1.stored("work").tokens.refreshToken)]
            )
            try await h.server.hook("/_test/config", ["access_token_lifetime": 1])
            #expect(try m2.run("refresh", "work").status == 4)  // the dead session, seen on m2
            try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
            try await cluster.kill(member: cluster.memberNames[1])
            try await cluster.kill(member: cluster.memberNames[2])
            let events = Locked<[SignInEvent]>([])
            let signedIn = try await h.server.signIn(m1.manager(), slot: "work", email: "fleet@example.com") { event in
                if case .shared = event { events.withLock { $0.append(event) } }
            }
            let pending = events.withLock { $0 }.contains {
                if case .shared(.pending(h.fleet, _)) = $0 { true } else { false }
            }
            #expect(pending, "\(events.withLock { $0 })")
            let kept = try m1.stored("work").tokens.accessToken == signedIn.tokens.accessToken
            #expect(kept, "the sign-in was not kept on m1")
            #expect(try m2.run("token", "work").status == 4)

            try await cluster.restart(member: cluster.memberNames[1])
            try await cluster.restart(member: cluster.memberNames[2])
            try await cluster.waitHealthy()
            let synced = try m1.run("fleet", "sync", "--json")
            #expect(synced.status == 0 && synced.stdout.contains("uploaded"), "\(synced.stdout) \(synced.stderr)")
            let served = try m2.run("token", "work")
            #expect(served.status == 0, "\(served.stderr)")
            let same = served.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == signedIn.tokens.accessToken
            #expect(same, "m2 does not hand out m1's new sign-in")
            #expect(try await h.server.stat("refresh_reused") == 0)
        }
    }

    /// A process killed -9 while it holds a slot's fleet lock: its lease is no longer kept alive,
    /// the lock frees itself after the lease's TTL, and the next machine refreshes once.
    @Test func aProcessKilledHoldingTheFleetLockDelaysButBurnsNothing() async throws {
        let h = try await FleetHarness(machines: 2, refresh: "[refresh]\nlead = 300\nlead-share = 1", lifetime: 100)
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let holder = try h.machines[0].holdFleetLock(ttl: 5)
        Glibc.kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
        let started = Date()
        let token = try h.machines[1].run("token", "work")
        let waited = Date().timeIntervalSince(started)
        #expect(token.status == 0, "\(token.stderr)")
        #expect(waited < 60, "waited \(waited) s for a 5-second lease")
        #expect(try await h.server.stat("refreshes_succeeded") == 1)
        #expect(try await h.server.stat("refresh_reused") == 0)
        let same = try h.machines[0].run("token", "work").stdout == token.stdout
        #expect(same, "m1 did not adopt m2's refresh")
    }

    /// A holder killed with the lock keeps it until its lease runs out (60 s here). A machine
    /// whose token is due but still valid waits only as long as a live refresh could take
    /// (`[http] timeout` + 5 s, 7 s here), then serves that token instead of waiting out the lease.
    @Test func aValidTokenIsServedWhileAKilledHolderKeepsTheLock() async throws {
        let h = try await FleetHarness(
            machines: 2,
            refresh: "[http]\ntimeout = 2\n[refresh]\nlead = 300\nlead-share = 1",
            lifetime: 100
        )
        let m2 = h.machines[1]
        let before = try m2.stored("work")
        let holder = try h.machines[0].holdFleetLock(ttl: 60)
        Glibc.kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
        let started = Date()
        let token = try m2.run("token", "work")
        let waited = Date().timeIntervalSince(started)
        #expect(token.status == 0, "\(token.stderr)")
        let servedStored = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == before.tokens.accessToken
        #expect(servedStored, "the valid stored token was not served")
        // Waiting out the lease would take 60 s: well above this bound even on a loaded machine.
        #expect(waited < 45, "waited \(waited) s: the whole lease, not the refresh's limit")
        #expect(try await h.server.stat("refreshes_succeeded") == 0)
    }

    /// Agents elect one leader, and an agent adopts a refresh made on another machine through its
    /// watch, without any command run on its machine.
    @Test func theAgentFollowsRefreshesElsewhereAndOneAgentLeads() async throws {
        let h = try await FleetHarness(machines: 2)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let agent = try m2.home.start(["agent"])
        defer {
            agent.0.terminate()
            agent.0.waitUntilExit()
        }
        // It stands for leader once running: wait for the election key.
        let leader = try await eventually("a leader in `fleet status`") {
            let status = try m1.run("fleet", "status", "--json")
            let leader =
                (try? JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])?["leader"]
                as? String
            return (leader: leader, said: status.stdout + status.stderr)
        } until: {
            $0.leader != nil
        }.leader
        #expect(leader == "m2")
        let refreshed = try m1.run("refresh", "work")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        let fresh = try m1.stored("work").tokens.accessToken
        let changed = Date()
        try await eventually("m2's agent adopts the refresh") {
            try m2.stored("work").tokens.accessToken == fresh
        } until: {
            $0
        }
        let adopted = try m2.stored("work").tokens.accessToken == fresh
        #expect(adopted, "m2's agent did not adopt the refresh")
        #expect(Date().timeIntervalSince(changed) < 60)
    }

    /// etcd's leader killed while a refresh is at the server: the fenced write waits for the new
    /// leader and lands, and the other machines adopt it (nothing refreshed twice, nothing lost).
    @Test func theEtcdLeaderKilledDuringARefreshLosesNothing() async throws {
        try await EtcdCluster.withPrivateCluster { cluster in
            let h = try await FleetHarness(machines: 3, cluster: cluster)
            let before = try await h.server.stat("requests.oauth_token")
            try await h.server.hook("/_test/fault", ["endpoint": "oauth_token", "type": "delay", "seconds": 1.5])
            let (refresh, _, err) = try h.machines[0].home.start(["refresh", "work"])
            try await eventually("the refresh reaches the server") {
                try await h.server.stat("requests.oauth_token")
            } until: {
                $0 != before
            }
            try await cluster.kill(member: try await cluster.leaderName())
            refresh.waitUntilExit()
            let problem = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(refresh.terminationStatus == 0, "\(problem)")
            let fresh = try h.machines[0].stored("work").tokens.accessToken
            // The others' copies are still valid (hour-long tokens); a sync brings the new ones.
            for m in h.machines.dropFirst() {
                let synced = try m.run("fleet", "sync", "--json")
                #expect(synced.status == 0 && synced.stdout.contains("adopted"), "\(synced.stdout)")
                let same = try m.stored("work").tokens.accessToken == fresh
                #expect(same, "\(m.name) did not get the refreshed token")
            }
            #expect(try await h.server.stat("refreshes_succeeded") == 1)
            #expect(try await h.server.stat("refresh_reused") == 0)
        }
    }

    /// Machines whose clocks are off by ten minutes either way (libfaketime): the fast one finds
    /// the token due early and refreshes it once under the lock; the slow one never sees it due;
    /// nothing is refreshed twice and every machine converges.
    @Test func clocksOffByMinutesBurnNothing() async throws {
        // 15-minute tokens, due 5 minutes before expiry: the fast machine (+10 min) sees the
        // token as due at once, the others do not.
        let h = try await FleetHarness(machines: 3, lifetime: 900)
        let fast = ["/usr/bin/faketime", "-f", "+10m"]
        let slow = ["/usr/bin/faketime", "-f", "-10m"]
        let before = try await h.server.stat("refreshes_succeeded")
        var outputs: [String] = []
        for (machine, launcher) in zip(h.machines, [[], fast, slow]) {
            for _ in 0..<3 {
                let (p, out, err) = try machine.home.start(["token", "work"], launcher: launcher)
                let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                let problem = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                p.waitUntilExit()
                #expect(p.terminationStatus == 0, "\(machine.name): \(problem)")
                outputs.append(text)
            }
        }
        #expect(try await h.server.stat("refreshes_succeeded") - before == 1)
        #expect(try await h.server.stat("refresh_reused") == 0)
        for (machine, launcher) in zip(h.machines, [[], fast, slow]) {
            let (p, _, err) = try machine.home.start(["fleet", "sync"], launcher: launcher)
            p.waitUntilExit()
            #expect(
                p.terminationStatus == 0,
                "\(String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))"
            )
        }
        let tokens = try Set(h.machines.map { try $0.stored("work").tokens.accessToken })
        #expect(tokens.count == 1, "the machines hold \(tokens.count) different tokens after a sync")
    }
}
