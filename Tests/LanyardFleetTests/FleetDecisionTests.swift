import Foundation
import LanyardCore
import LanyardStore
import Testing

@testable import LanyardFleet

/// ``SharedSlotDecision``: one row per branch of the shared-slot protocol. Local copy, local
/// state, what etcd gave, the intent → the step. The same decisions run end to end against the
/// real etcd cluster in LanyardCLITests (FleetTests, FleetAttackTests, FleetRecoveryTests).
@Suite struct FleetDecisionTests {
    let slot = try! Slot("work")

    func credential(_ refresh: String, spent: [String] = []) -> Credential {
        var c = Credential(
            provider: "openai",
            tokens: TokenSet(accessToken: "at-" + refresh, refreshToken: refresh),
            lastRefresh: nil,
            account: AccountInfo(accountID: "acct")
        )
        c.spentRefreshTokens = spent.map { TokenFingerprint.of($0) }
        return c
    }

    func value(_ credential: Credential?, generation: Int64, writer: String = "b") -> SharedSlotDecision.Read {
        .value(
            SharedValue(
                content: credential.map { .credential($0) } ?? .tombstone,
                generation: generation,
                writer: writer,
                modRevision: 100 + generation
            )
        )
    }

    func state(
        generation: Int64,
        uploadPending: Bool = false,
        signInPending: Bool = false,
        handedOverTo: String? = nil
    ) -> SharedSlotState {
        SharedSlotState(
            fleet: "home",
            revision: 100 + generation,
            generation: generation,
            uploadPending: uploadPending,
            signInPending: signInPending,
            handedOverTo: handedOverTo
        )
    }

    func step(
        _ local: Credential?,
        _ state: SharedSlotState?,
        _ read: SharedSlotDecision.Read
    ) -> SharedSlotDecision.Step {
        SharedSlotDecision.step(slot: slot, fleet: "home", machine: "a", local: local, state: state, read: read)
    }

    @Test func eachBranchOfTheProtocol() {
        let r1 = credential("r1")
        let r2 = credential("r2", spent: ["r1"])
        let other = credential("x9")
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
        let r1 = credential("r1")
        let old = credential("r0")
        // Rollback: a value older than the newest seen here (by 1, by 10).
        for back: Int64 in [1, 10] {
            guard
                case .refuse(.refusedCredential(_, _, let reason)) = step(
                    r1,
                    state(generation: 12),
                    value(old, generation: 12 - back)
                )
            else {
                Issue.record("a value \(back) generation(s) old was not refused")
                continue
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
        #expect(
            step(r1, state(generation: 4, handedOverTo: "b"), value(nil, generation: 4)) == .handedOver(machine: "b")
        )
        #expect(step(r1, state(generation: 4, handedOverTo: "b"), value(credential("r5"), generation: 5)) == .adopt)
        // An old tombstone put back is a rollback like any other.
        if case .refuse = step(r1, state(generation: 6), value(nil, generation: 4)) {
        } else {
            Issue.record("an old tombstone was used")
        }
    }

    @Test func aTokenAnotherMachineIsPresentingIsNeverSpent() {
        let intent = RefreshIntent(machine: "b", token: TokenFingerprint.of("r1"), generation: 3, at: nil)
        #expect(
            SharedSlotDecision.refreshBlocked(
                slot: slot,
                fleet: "home",
                machine: "a",
                refreshToken: "r1",
                intent: intent
            )
                == .refreshInFlight(slot: slot, fleet: "home", machine: "b")
        )
        // Another token, no intent, or this machine's own intent (its own recovery file holds the
        // successor, or the request never left): not blocked.
        #expect(
            SharedSlotDecision.refreshBlocked(
                slot: slot,
                fleet: "home",
                machine: "a",
                refreshToken: "r2",
                intent: intent
            ) == nil
        )
        #expect(
            SharedSlotDecision.refreshBlocked(slot: slot, fleet: "home", machine: "a", refreshToken: "r1", intent: nil)
                == nil
        )
        #expect(
            SharedSlotDecision.refreshBlocked(
                slot: slot,
                fleet: "home",
                machine: "b",
                refreshToken: "r1",
                intent: intent
            ) == nil
        )
    }

    /// The adversarial table: the lock holder presented `r1` (generation 3 in the fleet) and got
    /// `r2`; its fenced write failed because the value changed under the lock. For each thing an
    /// etcd writer can do meanwhile, what it does with `r2`. A value that still holds the spent
    /// `r1` (or an older one) is never left as the fleet's newest: the next machine would present
    /// it, and the provider would revoke the sign-in for everyone.
    @Test func aFailedWriteUnderTheLockNeverLeavesASpentTokenNewest() {
        let r0 = credential("r0")
        let r1 = credential("r1", spent: ["r0"])
        let r2 = credential("r2", spent: ["r0", "r1"])
        let replaced = SharedValue(content: .credential(r1), generation: 3, writer: "b", modRevision: 103)
        func after(
            _ now: SharedSlotDecision.Read,
            seen: Int64 = 3,
            lockHeld: Bool = true
        ) -> SharedSlotDecision.AfterFailedWrite {
            SharedSlotDecision.afterFailedWrite(
                refreshed: r2,
                machine: "a",
                replaced: replaced,
                seen: seen,
                now: now,
                lockHeld: lockHeld
            )
        }
        let unsigned = FleetError.refusedCredential(slot: slot, fleet: "home", reason: "it is not signed by a member")
        let rows: [(String, SharedSlotDecision.Read, Int64, Bool, SharedSlotDecision.AfterFailedWrite)] = [
            ("value deleted", .missing, 3, true, .overwrite(generation: 4)),
            ("value deleted, a higher generation seen here", .missing, 7, true, .overwrite(generation: 8)),
            ("the same value put back (new revision)", value(r1, generation: 3), 3, true, .overwrite(generation: 4)),
            ("an older value put back", value(r0, generation: 2), 3, true, .overwrite(generation: 4)),
            ("replaced by a value no member signed", .failed(unsigned), 3, true, .overwrite(generation: 4)),
            (
                "the spent token put back under a forged higher generation", value(r1, generation: 9), 3, true,
                .overwrite(generation: 10)
            ),
            ("an older tombstone put back", value(nil, generation: 2), 3, true, .overwrite(generation: 4)),
            ("a newer value another member wrote", value(credential("x1"), generation: 5), 3, true, .keepHere),
            (
                "etcd unavailable", .failed(.unavailable(fleet: "home", endpoints: [], detail: "no quorum")), 3, true,
                .keepHere
            ),
            (
                "a membership this machine cannot verify named",
                .failed(.membershipBehind(fleet: "home", seq: 9, digest: "d", signer: "b", source: "s")), 3, true,
                .keepHere
            ),
            (
                "a forked log",
                .failed(.forked(fleet: "home", seq: 4, digest: "d", ours: "e", signer: "c", source: "s")), 3, true,
                .keepHere
            ),
            ("the lock lost (value deleted)", .missing, 3, false, .keepHere),
            ("the lock lost (value put back)", value(r1, generation: 3), 3, false, .keepHere),
        ]
        for (what, now, seen, held, expected) in rows {
            #expect(after(now, seen: seen, lockHeld: held) == expected, "\(what)")
        }
        // An earlier attempt of ours that landed (its answer lost) is recognised, not written twice.
        let landed = SharedValue(content: .credential(r2), generation: 4, writer: "a", modRevision: 104)
        #expect(after(.value(landed)) == .landed(landed))
        // The intent deleted meanwhile changes nothing here: the write compares the lock and the value only.
    }

    /// Every step of the protocol × each adversary move on the value: the step a machine takes
    /// never uses a value older than one it saw, never turns a shared slot local, and passes the
    /// membership alarms on as refusals (no write follows a refusal).
    @Test func everyStepUnderEveryMoveOnTheValue() {
        let r1 = credential("r1")
        let r2 = credential("r2", spent: ["r1"])
        let other = credential("x9")
        let locals: [(String, Credential, SharedSlotState)] = [
            ("current", r1, state(generation: 3)),
            ("refreshed here, not uploaded", r2, state(generation: 3, uploadPending: true)),
            ("signed in here", other, state(generation: 3, signInPending: true)),
        ]
        let behind = FleetError.membershipBehind(fleet: "home", seq: 9, digest: "d", signer: "b", source: "s")
        let forked = FleetError.forked(fleet: "home", seq: 4, digest: "d", ours: "e", signer: "c", source: "s")
        let moves: [(String, SharedSlotDecision.Read)] = [
            ("deleted", .missing),
            ("put back, one generation older", value(credential("r0"), generation: 2)),
            (
                "replaced by one no member signed",
                .failed(.refusedCredential(slot: slot, fleet: "home", reason: "unsigned"))
            ),
            ("naming a membership not verified here", .failed(behind)),
            ("naming another entry than verified here", .failed(forked)),
        ]
        for (name, local, known) in locals {
            for (move, read) in moves {
                let decided = step(local, known, read)
                if known.signInPending, case .failed(let e) = read, !SharedSlotDecision.stopsWrites(e) {
                    // A sign-in made here replaces a value no member signed, like a missing one.
                    #expect(decided == .uploadPending, "\(name) × \(move): \(decided)")
                } else if known.signInPending, !(read.failedWithStop) {
                    #expect(decided == .uploadPending, "\(name) × \(move): \(decided)")
                } else {
                    guard case .refuse = decided else {
                        Issue.record("\(name) × \(move): \(decided), not a refusal")
                        continue
                    }
                }
            }
        }
        // A value a member signed for a membership this machine could not verify was seen (its
        // generation kept as evidence): the older value put back afterwards is refused.
        var evidenced = state(generation: 3)
        evidenced.evidence = 5
        if case .refuse = step(r1, evidenced, value(credential("r0"), generation: 4)) {
        } else {
            Issue.record("a value older than the evidence was used")
        }
        #expect(step(r1, evidenced, value(credential("r7"), generation: 5)) == .adopt)
        if case .refuse(let e) = step(r1, state(generation: 3), .failed(behind)) {
            #expect(e.code == .fleetMembershipBehind)
        }
        if case .refuse(let e) = step(r1, state(generation: 3), .failed(forked)) { #expect(e.code == .fleetForked) }
    }
}

extension SharedSlotDecision.Read {
    /// A read that failed with an error that stops every write.
    var failedWithStop: Bool {
        if case .failed(let e) = self { return SharedSlotDecision.stopsWrites(e) }
        return false
    }
}
