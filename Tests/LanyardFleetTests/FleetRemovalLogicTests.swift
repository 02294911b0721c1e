import Age
import Foundation
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// The removal's guarantees on an in-memory etcd, in milliseconds: a removal entry etcd lost is
/// put back by any member that verified it; a value naming a membership entry a machine cannot
/// verify stops its writes until it can; a different entry that verifies at a known number is a
/// fork that stops every write until a person resolves it, either way. The same attacks run
/// against the real 3-member cluster, with an attacker outside Lanyard's code, in
/// LanyardCLITests' FleetRemovalTests.
@Suite struct FleetRemovalLogicTests {
    let slot = try! Slot("work")

    func credential(_ access: String) -> Credential {
        Credential(
            provider: "openai",
            tokens: TokenSet(accessToken: access, refreshToken: "rt-" + access),
            lastRefresh: Date(),
            account: AccountInfo(email: "u@example.com", accountID: "acct-1")
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

    /// `a` created the fleet and shared `work`; `b` and `d` joined and were approved (log 1–3).
    func fleetOfThree() throws -> (MemoryEtcd, Fleet, Fleet, Fleet, [TestHome]) {
        let kv = MemoryEtcd()
        let homes = [TestHome(), TestHome(), TestHome()]
        let a = machine("a", kv: kv, home: homes[0])
        let b = machine("b", kv: kv, home: homes[1])
        let d = machine("d", kv: kv, home: homes[2])
        let (_, founded) = try a.create()
        _ = try a.share(slot, credential: credential("a1"))
        for other in [b, d] {
            let (request, _) = try other.requestJoin(fleetFingerprint: founded.fingerprint)
            _ = try a.approve(machine: other.machine, fingerprint: request.fingerprint)
        }
        #expect(try b.membership().0.seq == 3)
        return (kv, a, b, d, homes)
    }

    /// `b` removes `d` and writes the next generation (what the removal's rotation does); etcd
    /// loses the removal entry before `a` read it. `a` learns of the entry from `b`'s value and
    /// stops writing; `b`'s next read puts the entry back; `a` then verifies it and writes again,
    /// sealed without `d`.
    @Test func aHiddenRemovalStopsWritesUntilTheLogShowsIt() throws {
        let (kv, a, b, d, homes) = try fleetOfThree()
        _ = homes
        let (identityB, _) = try b.memberIdentity()
        let (removed, shared) = try b.remove(machine: "d")
        #expect(removed?.machine == "d" && shared == [slot])
        let current = try #require(try b.newest(slot, identity: identityB, membership: try b.membership().0))
        let rotated = try #require(
            try b.write(slot, credential: credential("b2"), replacing: current, identity: identityB, fence: nil)
        )
        let removal = try #require(try kv.get(a.keys.log(4)))
        _ = try kv.delete(a.keys.log(4), prefix: false)

        let (identityA, membershipA) = try a.memberIdentity()
        #expect(membershipA.seq == 3 && membershipA.member("d") != nil)
        let removalDigest = try SignedDocument(removal.value, key: "", kind: Membership.entryType).digest
        #expect(
            throws: FleetError.membershipBehind(
                fleet: "home",
                seq: 4,
                digest: removalDigest,
                signer: "b",
                source: a.keys.slot(slot)
            )
        ) {
            try a.newest(slot, identity: identityA, membership: membershipA)
        }
        // The evidence is kept: the old value put back, a's writes still stop (no seal to d).
        let alarm = try #require(a.alarm())
        #expect(alarm.kind == .behind && alarm.seq == 4)
        #expect(throws: FleetError.self) { try a.sealingMembership() }
        #expect(throws: FleetError.self) {
            try a.write(slot, credential: credential("a9"), replacing: rotated, identity: identityA, fence: nil)
        }
        #expect(throws: FleetError.self) { try a.newest(slot, identity: identityA, membership: membershipA) }

        // b reads the log: the entry it verified is put back; a verifies it and may write again.
        _ = try b.membership()
        #expect(try kv.get(a.keys.log(4))?.value == removal.value)
        let (caughtUp, _) = try a.membership()
        #expect(caughtUp.seq == 4 && caughtUp.member("d") == nil && a.alarm() == nil)
        let written = try #require(
            try a.write(slot, credential: credential("a3"), replacing: rotated, identity: identityA, fence: nil)
        )
        let (identityD, _) = (try MachineIdentity.load(from: d.identityStore)!, 0)
        #expect(throws: FleetError.self) {
            try SealedCredential.open(
                try #require(try kv.get(a.keys.slot(slot))),
                slot: slot,
                fleet: "home",
                membership: caughtUp,
                identity: identityD
            )
        }
        #expect(written.generation == rotated.generation + 1)
    }

    /// The removed machine signs its own entry at the removal's number ("add evil", linked to
    /// entry 3) with the key derived from the identity it kept. `a`, which had not read entry 4,
    /// takes the forged one (it cannot know), then finds `b`'s value naming the real one: a fork,
    /// and it writes nothing until a person resolves it. `b`, which verified the real entry, sees
    /// an entry signed by a machine that entry removed: damage, not a fork; it puts its own back
    /// and goes on writing (a removed machine cannot stop the members that saw its removal).
    @Test func aForkedLogStopsEveryWriteUntilAPersonResolvesIt() throws {
        let (kv, a, b, d, homes) = try fleetOfThree()
        _ = homes
        let (identityB, _) = try b.memberIdentity()
        _ = try b.remove(machine: "d")
        let current = try #require(try b.newest(slot, identity: identityB, membership: try b.membership().0))
        let rotated = try #require(
            try b.write(slot, credential: credential("b2"), replacing: current, identity: identityB, fence: nil)
        )
        let real = try #require(try kv.get(a.keys.log(4)))
        // d forges entry 4 with its own key (it was a member at entry 3).
        let identityD = try #require(try MachineIdentity.load(from: d.identityStore))
        let evil = MachineIdentity(identity: X25519Identity.generate())
        let entry3 = try #require(try kv.get(a.keys.log(3)))
        let forged = try Membership.forgedAddition(
            fleet: "home",
            seq: 4,
            after: entry3,
            signer: "d",
            key: identityD.signing,
            adding: evil
        )
        _ = try kv.put(a.keys.log(4), value: forged, lease: 0)

        // a: took the forged entry, then b's value names the real one.
        let (forkedA, _) = try a.membership()
        #expect(forkedA.member("evil") != nil)
        let (identityA, _) = try a.memberIdentity()
        #expect(throws: FleetError.self) { try a.newest(slot, identity: identityA, membership: forkedA) }
        #expect(a.alarm()?.kind == .forked)
        #expect(throws: FleetError.self) {
            try a.write(slot, credential: credential("a9"), replacing: rotated, identity: identityA, fence: nil)
        }
        // b: d's entry is damage (b verified d's removal at that number); the real one goes back.
        let (_, damaged) = try b.membership()
        #expect(damaged.contains { $0.problem.contains("removed") } && b.alarm() == nil)
        #expect(try kv.get(a.keys.log(4))?.value == real.value)
        #expect(try b.sealingMembership().member("d") == nil)
        // Nothing was sealed to evil or d after the removal.
        let raw = try #require(try kv.get(a.keys.slot(slot)))
        for reader in [identityD, evil] {
            #expect(throws: FleetError.self) {
                try SealedCredential.open(
                    raw,
                    slot: slot,
                    fleet: "home",
                    membership: try b.membership().0,
                    identity: reader
                )
            }
        }

        // A person resolves a's fork with the real entry's fingerprint: its membership is rebuilt
        // without evil and d, and it writes again.
        let realFingerprint = MachineIdentity.grouped(
            hex: hexBytes(try SignedDocument(real.value, key: real.key, kind: Membership.entryType).digest)
        )
        #expect(throws: FleetError.noFork(fleet: "home", given: "0000")) { try a.resolveFork(keep: "0000") }
        #expect(throws: FleetError.noFork(fleet: "home", given: nil)) { try b.resolveFork(keep: realFingerprint) }
        let resolvedA = try a.resolveFork(keep: realFingerprint)
        #expect(resolvedA.members.map(\.machine) == ["a", "b"] && a.alarm() == nil)
        #expect(
            try a.write(slot, credential: credential("a3"), replacing: rotated, identity: identityA, fence: nil) != nil
        )
    }

    /// A cache written before entries were kept learns them again from etcd (verified from the
    /// pin up to the head it had), so forks are caught from then on.
    @Test func anOlderCacheRelearnsItsEntries() throws {
        let (_, a, b, _, homes) = try fleetOfThree()
        _ = a
        var cached = try #require(try MembershipCache.load(b.paths))
        cached.log = []
        try MembershipCache.replace(with: cached, paths: b.paths)
        #expect(try MembershipCache.load(b.paths)?.log.isEmpty == true)
        let (relearned, damaged) = try b.membership()
        #expect(damaged.isEmpty && relearned.log.count == 3 && relearned.digest(at: 2) != nil)
        _ = homes
    }

    /// An agent's candidacy put without a lease (never expiring) never leads: the oldest key with
    /// a live lease does, and status lists the other as ignored.
    @Test func onlyALeasedCandidacyLeads() throws {
        let (kv, a, _, _, homes) = try fleetOfThree()
        _ = homes
        _ = try kv.put(a.keys.leader + "0", value: Array("b".utf8), lease: 0)
        let campaign = FleetCampaign(kv: kv, keys: a.keys, machine: "a", ttl: 10)
        defer { campaign.resign() }
        #expect(campaign.leads())
        let (leader, ignored) = try a.leaderName(membership: try a.membership().0)
        #expect(leader == "a" && ignored.map(\.key) == [a.keys.leader + "0"])
    }

    /// Approving a member again with a fingerprint that is not its own is refused.
    @Test func approvingAMemberWithAnotherFingerprintIsRefused() throws {
        let (_, a, b, _, homes) = try fleetOfThree()
        _ = homes
        #expect(throws: FleetError.alreadyMember(machine: "b", given: "0000-0000-0000-0000-0000")) {
            try a.approve(machine: "b", fingerprint: "0000-0000-0000-0000-0000")
        }
        let real = try #require(try a.membership().0.member("b")).fingerprint
        #expect(try a.approve(machine: "b", fingerprint: real).0.machine == "b")
        _ = b
    }
}
