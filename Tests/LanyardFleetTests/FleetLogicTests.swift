import Age
import Foundation
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// The fleet's logic on an in-memory etcd: the signed membership log, sealing and opening shared
/// values, the mutex order and the fenced write. The same paths run against a real etcd cluster in
/// LanyardCLITests' FleetTests, FleetAttackTests and FleetFaultTests.
@Suite struct FleetLogicTests {
    let slot = try! Slot("work")

    func credential(_ access: String, account: String = "acct-1") -> Credential {
        Credential(
            provider: "openai",
            tokens: TokenSet(accessToken: access, refreshToken: "rt-" + access),
            lastRefresh: Date(),
            account: AccountInfo(email: "u@example.com", accountID: account)
        )
    }

    func machine(_ name: String, kv: MemoryEtcd, home: TestHome) -> Fleet {
        var settings = FleetSettings(name: "home", machine: name, endpoints: ["https://127.0.0.1:1"])
        settings.requestTimeout = 1
        return Fleet(
            settings: settings,
            kv: kv,
            paths: Paths(environment: home.environment),
            identityStore: MemoryStore(kind: .file)
        )
    }

    /// Two machines: `a` created the fleet and shared `work`; `b` joined and was approved.
    func fleetOfTwo() throws -> (MemoryEtcd, Fleet, Fleet, [TestHome]) {
        let kv = MemoryEtcd()
        let homes = [TestHome(), TestHome()]
        let a = machine("a", kv: kv, home: homes[0])
        let b = machine("b", kv: kv, home: homes[1])
        let (_, membership) = try a.create()
        _ = try a.share(slot, credential: credential("a1"))
        let (request, _) = try b.requestJoin(fleetFingerprint: membership.fingerprint)
        _ = try a.approve(machine: "b", fingerprint: request.fingerprint)
        return (kv, a, b, homes)
    }

    @Test func aSignedValueOpensOnlyForItsFleetSlotAccountMembersAndRecipients() throws {
        let (_, a, b, homes) = try fleetOfTwo()
        _ = homes
        let (identityA, membershipA) = try a.memberIdentity()
        let (identityB, membershipB) = try b.memberIdentity()
        let raw = try #require(try a.kv.get(a.keys.slot(slot)))
        let opened = try SealedCredential.open(
            raw,
            slot: slot,
            fleet: "home",
            membership: membershipB,
            identity: identityB,
            expected: AccountInfo(accountID: "acct-1")
        )
        #expect(opened.credential?.tokens.accessToken == "a1" && opened.writer == "a")
        #expect(opened.credential?.lastRefreshBoot == nil)
        func refusal(_ body: () throws -> SharedValue) -> String? {
            do {
                _ = try body()
                return nil
            } catch let e as FleetError { return e.code.rawValue } catch { return "other" }
        }
        let stranger = MachineIdentity(identity: X25519Identity.generate())
        #expect(
            refusal {
                try SealedCredential.open(raw, slot: slot, fleet: "home", membership: membershipB, identity: stranger)
            } == "fleet_credential_refused"
        )
        #expect(
            refusal {
                try SealedCredential.open(
                    raw,
                    slot: try Slot("other"),
                    fleet: "home",
                    membership: membershipB,
                    identity: identityB
                )
            }
                == "fleet_credential_refused"
        )
        #expect(
            refusal {
                try SealedCredential.open(raw, slot: slot, fleet: "work", membership: membershipB, identity: identityB)
            } == "fleet_credential_refused"
        )
        #expect(
            refusal {
                try SealedCredential.open(
                    raw,
                    slot: slot,
                    fleet: "home",
                    membership: membershipB,
                    identity: identityB,
                    expected: AccountInfo(accountID: "acct-2")
                )
            } == "fleet_credential_refused"
        )
        var junk = raw
        junk.value = Array("not signed".utf8)
        #expect(
            refusal {
                try SealedCredential.open(junk, slot: slot, fleet: "home", membership: membershipB, identity: identityB)
            } == "fleet_credential_refused"
        )
        // Sealed to every member's recipient by someone who is not a member: refused.
        let forged = try SealedCredential.seal(
            credential("evil"),
            slot: slot,
            fleet: "home",
            generation: 99,
            membership: membershipA,
            writer: stranger,
            machine: "a"
        )
        #expect(
            refusal {
                try SealedCredential.open(
                    EtcdKeyValue(key: raw.key, value: forged),
                    slot: slot,
                    fleet: "home",
                    membership: membershipB,
                    identity: identityB
                )
            } == "fleet_credential_refused"
        )
        // The body changed under a member's signature (its generation raised): refused.
        var envelope = try #require(try JSONSerialization.jsonObject(with: Data(raw.value)) as? [String: Any])
        let body = try #require(envelope["body"] as? String)
        envelope["body"] = body.replacingOccurrences(of: "\"generation\":\"2\"", with: "\"generation\":\"9\"")
        let changed = (envelope["body"] as? String) != body
        #expect(changed)
        var tampered = raw
        tampered.value = Array(try JSONSerialization.data(withJSONObject: envelope))
        #expect(
            refusal {
                try SealedCredential.open(
                    tampered,
                    slot: slot,
                    fleet: "home",
                    membership: membershipB,
                    identity: identityB
                )
            } == "fleet_credential_refused"
        )
        _ = identityA
        // The refusal never quotes what it refused.
        do {
            _ = try SealedCredential.open(
                raw,
                slot: slot,
                fleet: "home",
                membership: membershipB,
                identity: identityB,
                expected: AccountInfo(accountID: "acct-2")
            )
        } catch {
            #expect(!error.userFacingDescription.contains("a1"))
        }
    }

    @Test func anAccountIsComparedByItsStrongestIdentifier() {
        #expect(SealedCredential.sameAccount(AccountInfo(accountID: "a"), AccountInfo(email: "x@y", accountID: "a")))
        #expect(!SealedCredential.sameAccount(AccountInfo(accountID: "a"), AccountInfo(email: "x@y")))
        #expect(!SealedCredential.sameAccount(AccountInfo(email: "x@y"), AccountInfo()))
        #expect(SealedCredential.sameAccount(AccountInfo(email: "X@Y"), AccountInfo(email: "x@y")))
        #expect(SealedCredential.sameAccount(AccountInfo(), AccountInfo(email: "any@where")))
    }

    @Test func membersJoinWithTheRightFingerprintsAndSharedSlotsFollowThem() throws {
        let kv = MemoryEtcd()
        let homeA = TestHome()
        let homeB = TestHome()
        let a = machine("a", kv: kv, home: homeA)
        let b = machine("b", kv: kv, home: homeB)
        let (_, founded) = try a.create()
        #expect(throws: FleetError.alreadyExists(fleet: "home")) { try a.create() }
        _ = try a.share(slot, credential: credential("a1"))
        #expect(throws: FleetError.fleetFingerprintMismatch(fleet: "home", given: "0000-0000-0000-0000-0000")) {
            try b.requestJoin(fleetFingerprint: "0000-0000-0000-0000-0000")
        }
        let (request, _) = try b.requestJoin(fleetFingerprint: founded.fingerprint.lowercased())
        #expect(throws: FleetError.fingerprintMismatch(machine: "b", given: "0000-0000-0000-0000-0000")) {
            try a.approve(machine: "b", fingerprint: "0000-0000-0000-0000-0000")
        }
        #expect(try a.members().map(\.machine) == ["a"])
        let (member, resealed) = try a.approve(machine: "b", fingerprint: request.fingerprint.lowercased())
        #expect(member.machine == "b" && resealed == [slot])
        let (identityB, membershipB) = try b.memberIdentity()
        #expect(membershipB.members.map(\.machine) == ["a", "b"] && membershipB.pin == founded.pin)
        let copy = try #require(try b.newest(slot, identity: identityB, membership: membershipB, provider: "openai"))
        #expect(copy.credential?.tokens.accessToken == "a1" && copy.generation == 2)
        // Removed again: a signed entry; what is written afterwards is sealed without it.
        let (removed, shared) = try a.remove(machine: "b")
        #expect(removed?.machine == "b" && shared == [slot])
        _ = try a.resealAll(identity: try a.memberIdentity().0)
        #expect(throws: FleetError.self) { try b.memberIdentity() }
        #expect(throws: FleetError.self) { try b.newest(slot, identity: identityB, membership: try a.membership().0) }
    }

    /// The log as etcd serves it is only a transport: an entry no member signed, an entry that
    /// does not follow its predecessor, a second member of one name, or a log cut back all change
    /// nothing that a machine verified, and a member's next entry replaces a damaged one.
    @Test func theMembershipLogAcceptsOnlyEntriesMembersSigned() throws {
        let (kv, a, b, homes) = try fleetOfTwo()
        _ = homes
        let (before, _) = try b.membership()
        #expect(before.seq == 2)
        // An outsider's key writes an `add` for itself, signed by itself.
        let outsider = MachineIdentity(identity: X25519Identity.generate())
        let impostor = FleetMember(
            machine: "c",
            recipient: outsider.recipient,
            signingKey: outsider.signingKey,
            addedAt: nil,
            approvedBy: nil
        )
        _ = try kv.put(
            a.keys.log(3),
            value: Membership.entry(
                fleet: "home",
                seq: 3,
                prev: before.head,
                change: .add(impostor),
                signer: "a",
                at: Date(),
                key: outsider.signing
            ),
            lease: 0
        )
        let (after, damaged) = try b.membership()
        #expect(after == before)
        #expect(damaged.map(\.key) == [a.keys.log(3)])
        // A member's next entry goes in its place.
        let (identityA, _) = try a.memberIdentity()
        _ = identityA
        #expect(try a.remove(machine: "b").1 == [slot])
        let (_, cleaned) = try a.membership()
        #expect(cleaned.isEmpty)
        // b learned of its removal; deleting the entry that removed it does not bring it back.
        #expect(throws: FleetError.self) { try b.memberIdentity() }
        _ = try kv.delete(a.keys.log(3), prefix: false)
        #expect(throws: FleetError.self) { try b.memberIdentity() }
        #expect(try b.membership().0.seq == 3)
    }

    @Test func theLockGoesToTheOldestKeyAndFencesWrites() throws {
        let kv = MemoryEtcd()
        let home = TestHome()
        let a = machine("a", kv: kv, home: home)
        _ = try a.create()
        let shared = try a.share(slot, credential: credential("a1"))
        let (identity, _) = try a.memberIdentity()
        let first = try a.lock(slot)
        // A second holder would wait for the first: with the in-memory etcd's instant watch, it
        // times out instead (the real cluster's tests show the waiting).
        #expect(throws: (any Error).self) { try FleetLock.acquire(kv, folder: a.keys.locks(slot), ttl: 5, timeout: 0) }
        let written = try a.write(
            slot,
            credential: credential("a2"),
            replacing: shared,
            identity: identity,
            fence: first.fence
        )
        #expect(written?.generation == 2)
        // The same revision again is stale: the fence refuses it.
        #expect(
            try a.write(slot, credential: credential("a3"), replacing: shared, identity: identity, fence: first.fence)
                == nil
        )
        first.release()
        #expect(try kv.range(a.keys.locks(slot), prefix: true).kvs.isEmpty)
    }

    /// The refresh protocol's etcd steps under faults: the intent a holder writes before calling
    /// the provider blocks every other machine that holds the same token while the holder's write
    /// fails (no quorum), and a write whose answer was lost but that landed is recognised, not
    /// written twice.
    @Test func anIntentOutlivesAFailedWriteAndALostAnswerIsRecognised() throws {
        let (kv, a, b, homes) = try fleetOfTwo()
        _ = homes
        let (identityA, membershipA) = try a.memberIdentity()
        let (_, membershipB) = try b.memberIdentity()
        let current = try #require(try a.newest(slot, identity: identityA, membership: membershipA))
        let token = try #require(current.credential?.tokens.refreshToken)
        let lock = try a.lock(slot)
        #expect(try a.writeIntent(slot, current: current, refreshToken: token, identity: identityA, under: lock))
        // The provider answered; etcd lost quorum before the write.
        kv.failTransactions(100)
        #expect(throws: FleetError.self) {
            try a.writeRefreshed(
                slot,
                credential: credential("a9"),
                replacing: current,
                under: lock,
                identity: identityA,
                membership: membershipA,
                patience: 0
            )
        }
        lock.release()
        kv.clearFaults()
        let intent = try b.intent(slot, membership: membershipB)
        #expect(
            SharedSlotDecision.refreshBlocked(
                slot: slot,
                fleet: "home",
                machine: "b",
                refreshToken: token,
                intent: intent
            )
                == .refreshInFlight(slot: slot, fleet: "home", machine: "a")
        )
        // A forged intent (no member's signature) is no intent.
        _ = try kv.put(a.keys.intent(slot), value: Array("{\"body\":\"{}\",\"signature\":\"\"}".utf8), lease: 0)
        #expect(try b.intent(slot, membership: membershipB) == nil)
    }

    @Test func aWriteWhoseAnswerWasLostIsRecognised() throws {
        let (kv, a, _, homes) = try fleetOfTwo()
        _ = homes
        let (identity, membership) = try a.memberIdentity()
        let current = try #require(try a.newest(slot, identity: identity, membership: membership))
        let lock = try a.lock(slot)
        defer { lock.release() }
        kv.failTransactions(1, answerLost: true)
        let written = try #require(
            try a.writeRefreshed(
                slot,
                credential: credential("a9"),
                replacing: current,
                under: lock,
                identity: identity,
                membership: membership
            )
        )
        #expect(written.generation == current.generation + 1 && written.credential?.tokens.accessToken == "a9")
        #expect(try a.newest(slot, identity: identity, membership: membership)?.generation == current.generation + 1)
        // Its intent went with it.
        #expect(try kv.get(a.keys.intent(slot)) == nil)
    }

    /// The value a refresh replaces put again under it (same bytes, a new revision, by anyone who
    /// can write to etcd): the refreshed tokens still replace it, since it holds the token the
    /// refresh just spent; a value holding any other token is left alone.
    @Test func aRefreshReplacesAValueThatStillHoldsTheTokenItSpent() throws {
        let (kv, a, _, homes) = try fleetOfTwo()
        _ = homes
        let (identity, membership) = try a.memberIdentity()
        let current = try #require(try a.newest(slot, identity: identity, membership: membership))
        let raw = try #require(try kv.get(a.keys.slot(slot)))
        let lock = try a.lock(slot)
        defer { lock.release() }
        _ = try kv.put(raw.key, value: raw.value, lease: 0)  // the same value, put again
        var refreshed = credential("a9")
        refreshed.recordRotation(from: try #require(current.credential))
        let written = try #require(
            try a.writeRefreshed(
                slot,
                credential: refreshed,
                replacing: current,
                under: lock,
                identity: identity,
                membership: membership
            )
        )
        #expect(written.credential?.tokens.accessToken == "a9" && written.generation == current.generation + 1)
        // Another machine's refresh in between (another token) is not overwritten.
        let unrelated = try #require(
            try a.write(slot, credential: credential("b1"), replacing: written, identity: identity, fence: nil)
        )
        var late = credential("a10")
        late.recordRotation(from: refreshed)
        #expect(
            try a.writeRefreshed(
                slot,
                credential: late,
                replacing: written,
                under: lock,
                identity: identity,
                membership: membership
            ) == nil
        )
        #expect(try a.newest(slot, identity: identity, membership: membership)?.generation == unrelated.generation)
    }

    @Test func signaturesAreEd25519AndKeysDeriveFromTheAgeIdentity() throws {
        let identity = MachineIdentity(identity: X25519Identity.generate())
        let again = MachineIdentity(identity: try X25519Identity(identity.identity.secretKeyString))
        #expect(identity.signingKey == again.signingKey)
        let message = Array("lanyard".utf8)
        let signature = identity.signing.sign(message)
        #expect(Ed25519.verify(signature: signature, message: message, publicKey: identity.signing.publicKey))
        #expect(
            !Ed25519.verify(signature: signature, message: Array("lanyarD".utf8), publicKey: identity.signing.publicKey)
        )
        #expect(
            !Ed25519.verify(
                signature: signature,
                message: message,
                publicKey: MachineIdentity(identity: X25519Identity.generate()).signing.publicKey
            )
        )
        // RFC 8032 section 7.1, TEST 1 (an empty message).
        func bytes(_ hex: String) -> [UInt8] { hexBytes(hex) }
        let key = Ed25519.SigningKey(seed: bytes("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
        #expect(key.publicKey == bytes("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"))
        #expect(
            key.sign([])
                == bytes(
                    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555"
                        + "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
                )
        )
    }
}
