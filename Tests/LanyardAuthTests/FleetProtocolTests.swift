import Foundation
import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardNetwork
import LanyardStore
import LanyardTestSupport
import Testing

/// The fleet protocol through the real refresh and sync paths (AccountManager's, as the CLI, the
/// agent and LanyardKit run them), on an in-memory etcd injected through `etcdConnector`, with
/// the ChatGPT emulator as the provider: each row is an adversary's move (or a fault) made
/// between two steps of a refresh, and each asserts at the test server that no refresh token was
/// presented twice and where the fleet's newest tokens ended. About two seconds a row (most of it
/// the emulator starting), beside the real-cluster suites (LanyardCLITests' FleetRemovalTests,
/// FleetAttackTests, FleetFaultTests).
@Suite(.serialized) struct FleetProtocolTests {
    /// Two machines of one fleet on a `MemoryEtcd`: m1 signed `work` in and shared it; m2 joined and synced.
    static func pair(_ server: OAuthTestServer, email: String) async throws -> MemoryFleetPair {
        try await MemoryFleetPair(server: server, email: email) { URLSessionTransport(timeout: 5) }
    }

    /// A transaction that writes the slot's refresh intent: the refresh is about to present its token.
    static func writesIntent(_ ops: [EtcdOperation]) -> Bool {
        ops.contains {
            if case .put(let key, _, _) = $0 { return key.hasSuffix("/intents/work") } else { return false }
        }
    }

    /// Each move between m1's intent and its fenced write: m1's refresh ends with its tokens as
    /// the fleet's newest, m2 adopts them, and no token is presented twice.
    @Test(arguments: [
        "value deleted", "value put back", "value replaced by one no member signed", "the write's answer lost",
        "intent deleted",
    ])
    func aMoveDuringARefreshSpendsNothingTwice(_ move: String) async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook("/_test/config", ["interval": 0])
        let pair = try await Self.pair(server, email: "move@example.com")
        let kv = pair.kv
        let keys = pair.keys
        let value = try #require(try kv.getInTest(keys.slot(pair.slot)))
        kv.whenTransaction { ops in
            guard Self.writesIntent(ops) else { return false }
            // The intent goes in with this transaction; the move is made right after it, before the write.
            kv.whenTransaction { _ in
                switch move {
                case "value deleted": _ = try? kv.delete(keys.slot(pair.slot), prefix: false)
                case "value put back": _ = try? kv.put(keys.slot(pair.slot), value: value.value, lease: 0)
                case "value replaced by one no member signed":
                    _ = try? kv.put(keys.slot(pair.slot), value: Array("junk".utf8), lease: 0)
                case "intent deleted": _ = try? kv.delete(keys.intent(pair.slot), prefix: false)
                default: kv.failTransactions(1, answerLost: true)
                }
                return true
            }
            return true
        }
        let m1 = try pair.manager(0)
        let m2 = try pair.manager(1)
        let refreshed = try await m1.freshCredential(slot: pair.slot, force: true)
        let newest = try #require(try kv.getInTest(keys.slot(pair.slot)))
        #expect(newest.value != value.value, "\(move): the fleet still holds the value the refresh replaced")
        _ = try await m2.fleetSync()
        #expect(
            try pair.stored(1).tokens.refreshToken == refreshed.tokens.refreshToken,
            "\(move): m2 does not hold m1's tokens"
        )
        #expect(
            try await m2.freshCredential(slot: pair.slot, force: true).tokens.refreshToken
                != refreshed.tokens.refreshToken
        )
        #expect(try await server.stat("refresh_reused") == 0, "\(move)")
    }

    /// Each fault that keeps m1's write out after the provider rotated the token (its fleet lock's
    /// lease ended, as one does when etcd is slow to renew it; no quorum, every write failing): m1 keeps
    /// the tokens (upload pending); m2 finds m1's intent for the token it holds and never spends
    /// it; m1's next sync writes them and m2 adopts.
    @Test(arguments: ["lock lost", "quorum lost"])
    func aFaultBeforeTheWriteKeepsTheTokensAndSpendsNothingTwice(_ fault: String) async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook("/_test/config", ["interval": 0])
        let pair = try await Self.pair(server, email: "fault@example.com")
        let kv = pair.kv
        let keys = pair.keys
        kv.whenTransaction { ops in
            guard Self.writesIntent(ops) else { return false }
            kv.whenTransaction { _ in
                switch fault {
                case "lock lost":
                    var options = EtcdRangeOptions()
                    options.prefix = true
                    for held in (try? kv.range(keys.locks(pair.slot), options))?.kvs ?? [] {
                        try? kv.revoke(held.lease)
                    }
                default:
                    kv.failTransactions(40)
                }
                return true
            }
            return true
        }
        let m1 = try pair.manager(0)
        let m2 = try pair.manager(1)
        let before = try #require(try kv.getInTest(keys.slot(pair.slot)))
        let refreshed = try await m1.freshCredential(slot: pair.slot, force: true)
        kv.clearFaults()
        #expect(try kv.getInTest(keys.slot(pair.slot))?.value == before.value, "\(fault): the write landed after all")
        await #expect(throws: FleetError.refreshInFlight(slot: pair.slot, fleet: "mem", machine: "m1")) {
            _ = try await m2.freshCredential(slot: pair.slot, force: true)
        }
        #expect(try await m1.fleetSync().map(\.1) == [.uploaded], "\(fault)")
        _ = try await m2.fleetSync()
        #expect(try pair.stored(1).tokens.refreshToken == refreshed.tokens.refreshToken, "\(fault)")
        #expect(try await server.stat("refresh_reused") == 0, "\(fault)")
    }

    /// After m1's refresh landed and m2 adopted it, the old value put back with the intent
    /// deleted: m2 refuses the rollback and presents nothing.
    @Test func theOldValuePutBackAfterARefreshIsRefused() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook("/_test/config", ["interval": 0])
        let pair = try await Self.pair(server, email: "rollback@example.com")
        let kv = pair.kv
        let keys = pair.keys
        let old = try #require(try kv.getInTest(keys.slot(pair.slot)))
        let m1 = try pair.manager(0)
        let m2 = try pair.manager(1)
        _ = try await m1.freshCredential(slot: pair.slot, force: true)
        _ = try await m2.fleetSync()
        try kv.deleteInTest(keys.intent(pair.slot))
        try kv.putInTest(keys.slot(pair.slot), value: old.value)
        await #expect(throws: FleetError.self) { _ = try await m2.freshCredential(slot: pair.slot, force: true) }
        #expect(try await m2.fleetSync().map(\.1) == [.refused])
        #expect(try await server.stat("refresh_reused") == 0)
    }
}
