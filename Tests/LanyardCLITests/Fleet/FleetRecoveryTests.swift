import Foundation
import Glibc
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardAuth

/// A machine whose own refresh never reached the fleet (found by the fleet soak,
/// scripts/soak/fleet.sh): its tokens must reach the fleet before any other machine spends the
/// token they replaced, and a copy it believes newer must not hide later refreshes.
@Suite(.serialized) struct FleetRecoveryTests {
    /// A refresh killed after writing its recovery file and before its fleet write: the server has
    /// rotated the token and the fleet still holds the spent one. The machine's next command puts
    /// the recovered tokens in place and writes them to the fleet, so the next machine to refresh
    /// adopts them instead of presenting the spent token (`refresh_token_reused`, the sign-in lost).
    @Test func tokensLeftInARecoveryFileReachTheFleet() async throws {
        let h = try await FleetHarness(machines: 2)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let slot = try Slot("work")
        // What the killed worker had done: the refresh at the server, then the recovery file.
        _ = try await m1.refreshLeftInARecoveryFile(slot)

        let token = try m1.run("token", "work")
        #expect(token.status == 0, "\(token.stderr)")
        // m2's first forced refresh adopts m1's tokens; its second refreshes them at the server.
        for _ in 0..<2 {
            let forced = try m2.run("refresh", "work")
            #expect(forced.status == 0, "\(forced.stderr)")
        }
        #expect(try await h.server.stat("refresh_reused") == 0)
        #expect(try await h.server.stat("refreshes_succeeded") == 2)
        let synced = try m1.run("fleet", "sync")
        #expect(synced.status == 0, "\(synced.stderr)")
        let same = try m1.stored("work").tokens.refreshToken == m2.stored("work").tokens.refreshToken
        #expect(same, "m1 did not take m2's refresh")
    }

    /// The same while another process holds the fleet lock (in the fleet soak, a killed holder
    /// whose lease had not run out, while the other machines queued for the lock to refresh the
    /// spent token): the recovered tokens reach the fleet at once, not after the lock is free.
    @Test func tokensLeftInARecoveryFileReachTheFleetWhileTheLockIsHeld() async throws {
        let h = try await FleetHarness(machines: 2)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let slot = try Slot("work")
        let refreshed = try await m1.refreshLeftInARecoveryFile(slot)

        let holder = try m2.holdFleetLock(ttl: 60)
        defer {
            Glibc.kill(holder.processIdentifier, SIGKILL)
            holder.waitUntilExit()
        }

        let token = try m1.run("token", "work")
        #expect(token.status == 0, "\(token.stderr)")
        let synced = try m2.run("fleet", "sync")
        #expect(synced.status == 0, "\(synced.stderr)")
        let same = try m2.stored("work").tokens.refreshToken == refreshed.tokens.refreshToken
        #expect(same, "the fleet does not hold m1's recovered tokens")
        #expect(try await h.server.stat("refresh_reused") == 0)
    }

    /// Tokens left in a recovery file with no command run on that machine afterwards: its agent
    /// writes them to the fleet (before the dead refresh's lock lease would let another machine
    /// spend the token they replaced).
    @Test func theAgentWritesTokensLeftInARecoveryFileToTheFleet() async throws {
        let h = try await FleetHarness(machines: 2)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let slot = try Slot("work")
        let agent = try m1.home.start(["agent"])
        defer {
            agent.0.terminate()
            agent.0.waitUntilExit()
        }
        // The agent follows the fleet once it adopts a refresh made on m2.
        let forced = try m2.run("refresh", "work")
        #expect(forced.status == 0, "\(forced.stderr)")
        let fresh = try m2.stored("work").tokens.refreshToken
        try await eventually("m1's agent adopts m2's refresh") {
            try m1.stored("work").tokens.refreshToken == fresh
        } until: {
            $0
        }
        #expect(try m1.stored("work").tokens.refreshToken == fresh, "m1's agent did not adopt m2's refresh")

        let refreshed = try await m1.refreshLeftInARecoveryFile(slot)

        var syncFailures: [String] = []
        let same = try await eventually("m1's agent writes the recovered tokens to the fleet") {
            let sync = try m2.run("fleet", "sync")
            if sync.status != 0 { syncFailures.append(sync.stderr) }
            return try m2.stored("work").tokens.refreshToken == refreshed.tokens.refreshToken
        } until: {
            $0
        }
        #expect(syncFailures.isEmpty, "fleet sync failed: \(syncFailures)")
        #expect(same, "m1's agent did not write the recovered tokens to the fleet")
        #expect(!RecoveryFile(paths: m1.paths, slot: slot).exists)
        #expect(try await h.server.stat("refresh_reused") == 0)
    }

    /// A machine marked upload-pending although its fleet write landed (the answer was lost):
    /// once another machine refreshed after it, it adopts that refresh rather than spending its
    /// own token, which the other machine already spent.
    @Test func anUploadPendingWhoseWriteLandedFollowsLaterRefreshes() async throws {
        let h = try await FleetHarness(machines: 2)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let slot = try Slot("work")
        let before = try #require(try SharedSlotState.load(slot, paths: m1.paths))
        let first = try m1.run("refresh", "work")
        #expect(first.status == 0, "\(first.stderr)")
        try SharedSlotState(
            fleet: before.fleet,
            revision: before.revision,
            generation: before.generation,
            uploadPending: true
        ).save(slot, paths: m1.paths)

        for _ in 0..<2 {
            let forced = try m2.run("refresh", "work")
            #expect(forced.status == 0, "\(forced.stderr)")
        }
        let again = try m1.run("refresh", "work")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try await h.server.stat("refresh_reused") == 0)
        let same = try m1.stored("work").tokens.refreshToken == m2.stored("work").tokens.refreshToken
        #expect(same, "m1 does not hold m2's refresh")
    }
}

extension FleetMachine {
    /// What a refresh worker killed before its fleet write leaves: the refresh made at the server
    /// and the new tokens in the recovery file, the store and the fleet untouched.
    /// - Returns: the credential the server issued.
    fileprivate func refreshLeftInARecoveryFile(_ slot: Slot) async throws -> Credential {
        let manager = try self.manager()
        let (record, store) = try manager.storeOf(slot)
        let current = try stored(slot.name)
        let refreshed = try await BlockingExecutor.shared.run {
            try manager.exchangeRefreshToken(slot: slot, current: current, record: record, store: store)
        }
        _ = try RecoveryFile(paths: paths, slot: slot, store: store).write(refreshed)
        return refreshed
    }
}
