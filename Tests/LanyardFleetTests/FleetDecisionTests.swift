import Foundation
import Testing
@testable import LanyardCore
@testable import LanyardFleet
@testable import LanyardStore

/// ``SharedSlotDecision``: one row per branch of the shared-slot protocol. Local copy, local
/// state, what etcd gave, the intent → the step. The same decisions run end to end against the
/// real etcd cluster in LanyardCLITests (FleetTests, FleetAttackTests, FleetRecoveryTests).
@Suite struct FleetDecisionTests {
    let slot = try! Slot("work")

    func credential(_ refresh: String, spent: [String] = []) -> Credential {
        var c = Credential(provider: "openai", tokens: TokenSet(accessToken: "at-" + refresh, refreshToken: refresh), lastRefresh: nil,
                           account: AccountInfo(accountID: "acct"))
        c.spentRefreshTokens = spent.map { TokenFingerprint.of($0) }
        return c
    }

    func value(_ credential: Credential?, generation: Int64, writer: String = "b") -> SharedSlotDecision.Read {
        .value(SharedValue(content: credential.map { .credential($0) } ?? .tombstone, generation: generation, writer: writer, modRevision: 100 + generation))
    }

    func state(generation: Int64, uploadPending: Bool = false, signInPending: Bool = false, handedOverTo: String? = nil) -> SharedSlotState {
        SharedSlotState(fleet: "home", revision: 100 + generation, generation: generation, uploadPending: uploadPending,
                        signInPending: signInPending, handedOverTo: handedOverTo)
    }

    func step(_ local: Credential?, _ state: SharedSlotState?, _ read: SharedSlotDecision.Read) -> SharedSlotDecision.Step {
        SharedSlotDecision.step(slot: slot, fleet: "home", machine: "a", local: local, state: state, read: read)
    }

    @Test func eachBranchOfTheProtocol() {
        let r1 = credential("r1"), r2 = credential("r2", spent: ["r1"]), other = credential("x9")
        // The fleet's value is the local copy: nothing to do.
        #expect(step(r1, state(generation: 3), value(r1, generation: 3)) == .current)
        #expect(step(r1, state(generation: 3), value(r1, generation: 4)) == .current)  // re-sealed: same tokens
        // Another machine refreshed: adopt its newer generation.
        #expect(step(r1, state(generation: 3), value(other, generation: 4)) == .adopt)
        // Not on this machine yet: adopt (sync adds it).
        #expect(step(nil, nil, value(r1, generation: 1)) == .adopt)
        // This machine's tokens replaced the fleet's (spent) token: upload at once.
        #expect(step(r2, state(generation: 3), value(r1, generation: 3)) == .upload)
        // A refresh or a sign-in made here waits to be written.
        #expect(step(other, state(generation: 3, uploadPending: true), value(r1, generation: 3)) == .uploadPending)
        #expect(step(other, state(generation: 3, signInPending: true), value(r1, generation: 5)) == .uploadPending)
        // A different credential at the generation already seen, nothing pending: keep ours.
        #expect(step(other, state(generation: 3), value(r1, generation: 3)) == .current)
    }

    @Test func nothingOlderNothingMissingNothingUnverifiedIsUsed() {
        let r1 = credential("r1"), old = credential("r0")
        // Rollback: a value older than the newest seen here (by 1, by 10).
        for back: Int64 in [1, 10] {
            guard case .refuse(.refusedCredential(_, _, let reason)) = step(r1, state(generation: 12), value(old, generation: 12 - back)) else {
                Issue.record("a value \(back) generation(s) old was not refused"); continue
            }
            #expect(reason.contains("older"))
        }
        // A deleted value never makes the slot local.
        #expect(step(r1, state(generation: 3), .missing) == .refuse(.valueMissing(slot: slot, fleet: "home")))
        // A refused or unreadable value, or an untrusted fleet, is passed on as the reason.
        let refused = FleetError.refusedCredential(slot: slot, fleet: "home", reason: "it is not signed by a member")
        #expect(step(r1, state(generation: 3), .failed(refused)) == .refuse(refused))
        let untrusted = FleetError.untrustedFleet(fleet: "home", detail: "x")
        #expect(step(r1, state(generation: 3), .failed(untrusted)) == .refuse(untrusted))
    }

    @Test func aTombstoneHandsTheSlotOverOrBackHere() {
        let r1 = credential("r1")
        #expect(step(r1, state(generation: 3), value(nil, generation: 4, writer: "b")) == .handedOver(machine: "b"))
        #expect(step(r1, state(generation: 3), value(nil, generation: 4, writer: "a")) == .keptHere)
        // A handed-over copy stays handed over until the slot is shared again (a newer generation).
        #expect(step(r1, state(generation: 4, handedOverTo: "b"), value(nil, generation: 4)) == .handedOver(machine: "b"))
        #expect(step(r1, state(generation: 4, handedOverTo: "b"), value(credential("r5"), generation: 5)) == .adopt)
        // An old tombstone put back is a rollback like any other.
        if case .refuse = step(r1, state(generation: 6), value(nil, generation: 4)) {} else { Issue.record("an old tombstone was used") }
    }

    @Test func aTokenAnotherMachineIsPresentingIsNeverSpent() {
        let intent = RefreshIntent(machine: "b", token: TokenFingerprint.of("r1"), generation: 3, at: nil)
        #expect(SharedSlotDecision.refreshBlocked(slot: slot, fleet: "home", machine: "a", refreshToken: "r1", intent: intent)
                == .refreshInFlight(slot: slot, fleet: "home", machine: "b"))
        // Another token, no intent, or this machine's own intent (its own recovery file holds the
        // successor, or the request never left): not blocked.
        #expect(SharedSlotDecision.refreshBlocked(slot: slot, fleet: "home", machine: "a", refreshToken: "r2", intent: intent) == nil)
        #expect(SharedSlotDecision.refreshBlocked(slot: slot, fleet: "home", machine: "a", refreshToken: "r1", intent: nil) == nil)
        #expect(SharedSlotDecision.refreshBlocked(slot: slot, fleet: "home", machine: "b", refreshToken: "r1", intent: intent) == nil)
    }
}
