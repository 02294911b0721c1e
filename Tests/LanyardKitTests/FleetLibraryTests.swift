import Foundation
import LanyardTestSupport
import Testing

@testable import LanyardKit

/// A program runs a fleet with `Accounts` alone, against the real etcd cluster of the test run
/// (scripts/with-etcd.sh): create, share, join with the fingerprint, approve, sync, status,
/// remove and unshare, with typed errors.
@Suite struct FleetLibraryTests {
    /// One simulated machine: its own home, pointed at the emulator and the cluster.
    struct Machine {
        let home = TestHome()
        init(_ name: String, fleet: String, cluster: EtcdCluster, server: OAuthTestServer) throws {
            try home.useEmulator(server, extraConfig: cluster.fleetSection(fleet: fleet, machine: name))
        }
        var configuration: Configuration { Configuration(environment: home.environment, workingDirectory: home.root) }
        func session(_ slot: String) throws -> AuthSession {
            var configuration = configuration
            configuration.slot = slot
            return try AuthSession(configuration: configuration)
        }
        func accounts() throws -> Accounts { try Accounts(configuration: configuration) }
    }

    @Test func aProgramSetsUpAndRunsAFleetThroughAccounts() async throws {
        let cluster = try EtcdCluster.fromEnvironment()
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook("/_test/config", ["interval": 0])
        let fleet = "k" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let first = try Machine("k1", fleet: fleet, cluster: cluster, server: server)
        let second = try Machine("k2", fleet: fleet, cluster: cluster, server: server)
        try await server.signIn(first.configuration.makeManager(), slot: "work", email: "kit-fleet@example.com")
        let work = try Slot("work")
        let a1 = try first.accounts()
        let a2 = try second.accounts()

        #expect(try a1.fleetCreate().machine == "k1")
        #expect(throws: FleetError.alreadyExists(fleet: fleet)) { try a2.fleetCreate() }
        try await a1.fleetShare(work)

        // Signing the shared slot in again through AuthSession writes it to the fleet, and the
        // session says so.
        let session = try first.session("work")
        let approver = Task {
            for await state in session.states {
                if case .awaitingDeviceCode(let code, _) = state {
                    _ = try await server.hook("/_test/approve", ["user_code": code, "email": "kit-fleet@example.com"])
                    return
                }
            }
        }
        try await session.startDeviceCodeSignIn()
        try await approver.value
        #expect(session.fleetSignIn == .written(fleet: fleet))
        let asked = try a2.fleetJoin(fleetFingerprint: try #require(a1.fleetFingerprint()))
        #expect(asked.machine == "k2" && asked.approvedBy == nil && !asked.fingerprint.isEmpty)
        #expect(throws: FleetError.self) { try a1.fleetApprove(machine: "k2", fingerprint: "0000-0000-0000-0000") }
        let (member, readable) = try a1.fleetApprove(machine: "k2", fingerprint: asked.fingerprint)
        #expect(member.machine == "k2" && member.approvedBy == "k1" && readable == [work])

        #expect(try await a2.fleetSync() == [FleetSyncResult(slot: work, outcome: .added, message: nil)])
        #expect(try a2.list().slots[work] != nil)
        let status = a2.fleetStatus()
        #expect(status.healthy && status.problem == nil && status.standing == "member", "\(status.problem ?? "")")
        #expect(status.members.map(\.machine) == ["k1", "k2"])
        #expect(status.slots.map(\.slot) == [work] && status.slots.allSatisfy { $0.local && $0.localCurrent })
        #expect(status.endpoints.count == cluster.endpoints.count && status.endpoints.allSatisfy { $0.problem == nil })

        // The removal rotates the shared slot: the removed machine's copy holds a spent token.
        let removal = try await a1.fleetRemove(machine: "k2")
        #expect(
            removal.wasMember && removal.slots.map(\.slot) == [work] && removal.slots.allSatisfy(\.rotated),
            "\(removal.slots)"
        )
        await #expect(throws: FleetError.notMember(fleet: fleet, machine: "k2", pending: false)) {
            try await a2.fleetSync()
        }
        try await a1.fleetUnshare(work)
        #expect(a1.fleetStatus().slots.isEmpty)
    }
}
