import Foundation
import LanyardAgent
import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// The agent's fleet follower on an in-memory etcd: m2's agent runs as `lanyard agent` runs it
/// (`RefreshAgent.run()` on a thread of its own), and the follower's watch, catch-up and log
/// checks act on what happens in the fleet meanwhile, with no command run on m2. A few seconds a
/// test (most of it the emulator starting), beside the real-cluster tests of the same paths
/// (LanyardCLITests' FleetFaultTests and FleetRecoveryTests).
@Suite(.serialized) struct FleetFollowerTests {
    static func pair(_ email: String) async throws -> MemoryFleetPair {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook("/_test/config", ["interval": 0])
        return try await MemoryFleetPair(server: server, email: email) { URLSessionTransport(timeout: 5) }
    }

    /// m1's refresh reaches m2's store through m2's watch.
    @Test func aRefreshElsewhereReachesThisMachineThroughItsWatch() async throws {
        let pair = try await Self.pair("follow@example.com")
        try await FollowingAgent.run(pair, machine: 1) { agent in
            #expect(await pair.kv.watching(1), "m2's follower never watched the fleet")
            let refreshed = try await pair.manager(0).freshCredential(slot: pair.slot, force: true)
            #expect(await agent.said { $0.contains { $0.hasSuffix("work: adopted") } }, "\(agent.lines)")
            #expect(try pair.stored(1).tokens.refreshToken == refreshed.tokens.refreshToken)
        }
        #expect(try await pair.server.stat("refresh_reused") == 0)
    }

    /// m2's watch stream breaks and cannot be opened again for a while; a refresh made on m1
    /// meanwhile reaches m2 once it can watch again (its catch-up reads the fleet first), and the
    /// watch it opens again carries the next refresh.
    @Test func aBrokenWatchIsOpenedAgainAndCatchesUpWithWhatItMissed() async throws {
        let pair = try await Self.pair("broken@example.com")
        let m1 = try pair.manager(0)
        try await FollowingAgent.run(pair, machine: 1) { agent in
            #expect(await pair.kv.watching(1), "m2's follower never watched the fleet")
            pair.kv.failWatches()
            #expect(await agent.said { $0.contains { $0.hasSuffix("watching again in a moment") } }, "\(agent.lines)")
            let missed = try await m1.freshCredential(slot: pair.slot, force: true)
            pair.kv.clearFaults()
            #expect(await agent.said { $0.contains { $0.hasSuffix("work: adopted") } }, "\(agent.lines)")
            #expect(try pair.stored(1).tokens.refreshToken == missed.tokens.refreshToken, "the missed refresh")
            #expect(await pair.kv.watching(1), "m2's follower did not watch again")
            let next = try await m1.freshCredential(slot: pair.slot, force: true)
            #expect(
                await agent.said { $0.filter { $0.hasSuffix("work: adopted") }.count >= 2 },
                "\(agent.lines)"
            )
            #expect(try pair.stored(1).tokens.refreshToken == next.tokens.refreshToken, "the refresh after")
        }
        #expect(try await pair.server.stat("refresh_reused") == 0)
    }

    /// m1's refresh whose fleet write failed after the provider rotated the token (no quorum):
    /// m1 keeps the tokens, upload pending. Once etcd is back, m1's agent writes them to the fleet
    /// with no command run on m1 and no change in etcd to wake its watch (its recovery check does
    /// it, every 5 s: without that check nothing writes them), and m2 adopts them; no token is
    /// presented twice.
    @Test func theAgentWritesARefreshTheFleetMissedOnceEtcdIsBack() async throws {
        let pair = try await Self.pair("pending@example.com")
        let kv = pair.kv
        let key = pair.keys.slot(pair.slot)
        // Every transaction fails from the one after the refresh's intent on, as without quorum.
        kv.whenTransaction { ops in
            let intent = ops.contains {
                if case .put(let key, _, _) = $0 { return key.hasSuffix("/intents/work") } else { return false }
            }
            guard intent else { return false }
            kv.whenTransaction { _ in
                kv.failTransactions(1_000)
                return true
            }
            return true
        }
        var refreshed: Credential?
        try await FollowingAgent.run(pair, machine: 0) { agent in
            #expect(await kv.watching(1), "m1's follower never watched the fleet")
            let before = try #require(try kv.getInTest(key))
            refreshed = try await pair.manager(0).freshCredential(slot: pair.slot, force: true)
            #expect(try kv.getInTest(key)?.value == before.value, "the write landed after all")
            #expect(try SharedSlotState.load(pair.slot, paths: pair.paths(0))?.uploadPending == true)
            kv.clearFaults()
            let written = try await kv.change(under: key, after: before.modRevision) { $0.kind == .put }
            #expect(written != nil, "m1's agent did not write its refresh; it said \(agent.lines)")
        }
        _ = try await pair.manager(1).fleetSync()
        #expect(try pair.stored(1).tokens.refreshToken == refreshed?.tokens.refreshToken)
        #expect(try await pair.server.stat("refresh_reused") == 0)
    }

    /// A membership entry m2 verified, deleted or overwritten while m2 follows: m2's watch sees
    /// the log change and puts the verified entry back at once, not at its next command.
    @Test(arguments: ["deleted", "overwritten"])
    func aMembershipEntryDamagedWhileFollowingIsPutBackAtOnce(_ damage: String) async throws {
        let pair = try await Self.pair("log-\(damage)@example.com")
        let key = pair.keys.log(2)
        try await FollowingAgent.run(pair, machine: 1) { agent in
            #expect(await pair.kv.watching(1), "m2's follower never watched the fleet")
            let verified = try #require(try pair.kv.getInTest(key))
            let before = try pair.kv.rangeInTest(key).revision
            if damage == "deleted" {
                try pair.kv.deleteInTest(key)
            } else {
                try pair.kv.putInTest(key, value: Array("{\"body\": \"not an entry".utf8))
            }
            let restored = try await pair.kv.change(under: key, after: before) {
                $0.kind == .put && $0.kv.value == verified.value
            }
            #expect(restored != nil, "\(damage): entry 2 was not put back; m2 said \(agent.lines)")
            #expect(try FleetAlarm.load(pair.paths(1), fleet: "mem") == nil)
        }
    }

    /// Another entry that verifies at a number m2 verified (m1's key signing a second entry 2):
    /// m2's follower raises the fork alarm as the entry arrives, and its agent reports it.
    @Test func aForkedLogIsRaisedAsItArrives() async throws {
        let pair = try await Self.pair("fork@example.com")
        let identity = try #require(try MachineIdentity.load(from: EncryptedFileStore(paths: pair.paths(0))))
        let genesis = try #require(try pair.kv.getInTest(pair.keys.log(1)))
        let forged = try Membership.forgedAddition(
            fleet: "mem",
            seq: 2,
            after: genesis,
            signer: "m1",
            key: identity.signing
        )
        try await FollowingAgent.run(pair, machine: 1) { agent in
            #expect(await pair.kv.watching(1), "m2's follower never watched the fleet")
            try pair.kv.putInTest(pair.keys.log(2), value: forged)
            #expect(await agent.said { $0.contains { $0.contains("membership log is forked") } }, "\(agent.lines)")
            #expect(try FleetAlarm.load(pair.paths(1), fleet: "mem")?.kind == .forked)
        }
        // Read once the agent has stopped: it logs the alarm right after saying it.
        let logged = EventLog(paths: pair.paths(1)).read().filter { $0["event"]?.string == "error" }
        #expect(logged.contains { $0["code"]?.string == ErrorCode.fleetForked.rawValue }, "\(logged)")
    }

    /// Stopping the agent ends its follower: the watch returns (rather than being left behind
    /// when the stop gives up waiting for it) and the candidacy for leader is withdrawn.
    @Test func stoppingTheAgentEndsItsWatchAndItsCandidacy() async throws {
        let pair = try await Self.pair("stop@example.com")
        try await FollowingAgent.run(pair, machine: 1) { _ in
            #expect(await pair.kv.watching(1), "m2's follower never watched the fleet")
            let stood = try await pair.kv.change(under: pair.keys.leader, after: 0) { $0.kind == .put }
            #expect(stood != nil, "m2 never stood for leader")
        }
        #expect(pair.kv.activeWatches == 0)
        #expect(try pair.kv.rangeInTest(pair.keys.leader, prefix: true).kvs.isEmpty, "m2 still stands for leader")
    }
}

/// One machine's agent, run as `lanyard agent` runs it, and what it said on its diagnostics
/// channel, which a test waits on.
private final class FollowingAgent: @unchecked Sendable {
    private let condition = NSCondition()
    private var heard: [String] = []

    /// Everything said so far.
    var lines: [String] { condition.withLock { heard } }

    private func append(_ line: String) {
        condition.withLock {
            heard.append(line)
            condition.broadcast()
        }
    }

    /// Waits (on a thread of its own) until what was said meets `condition`, at most `seconds`.
    func said(within seconds: TimeInterval = 90, _ holds: @escaping @Sendable ([String]) -> Bool) async -> Bool {
        await BlockingExecutor.shared.run(.ownThread) {
            let deadline = Date() + seconds
            return self.condition.withLock {
                while !holds(self.heard) {
                    if !self.condition.wait(until: deadline) { return holds(self.heard) }
                }
                return true
            }
        }
    }

    /// Runs machine `machine`'s agent on a thread of its own for `body`, then stops it and waits
    /// for its `run()` to return (also when `body` throws).
    static func run(
        _ pair: MemoryFleetPair,
        machine: Int,
        _ body: (FollowingAgent) async throws -> Void
    ) async throws {
        let agent = FollowingAgent()
        let refreshAgent = RefreshAgent(
            manager: try pair.manager(machine),
            options: RefreshAgent.Options(jitter: 0, notify: false, hook: nil),
            diagnostics: { agent.append($0) }
        )
        let stopper = refreshAgent.stopper
        // Handed over whole: from here on only the agent's thread touches it.
        struct Handover: @unchecked Sendable { let agent: RefreshAgent }
        let handover = Handover(agent: refreshAgent)
        let running = WorkOnItsOwnThread { try handover.agent.run() }
        do {
            try await body(agent)
        } catch {
            stopper.stop()
            _ = try? await running.value
            throw error
        }
        stopper.stop()
        try await running.value
    }
}
