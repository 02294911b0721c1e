import Foundation
import Testing
@testable import Age
@testable import LanyardCore
@testable import LanyardFleet
@testable import LanyardStore
@testable import LanyardSupport
import LanyardTestSupport

/// The fleet's logic on an in-memory etcd: sealing and opening shared credentials, membership,
/// the mutex order and the fenced write. The same paths run against a real etcd cluster in
/// LanyardCLITests' FleetTests and FleetFaultTests.
@Suite struct FleetLogicTests {
    let slot = try! Slot("work")

    func credential(_ access: String, account: String = "acct-1") -> Credential {
        Credential(provider: "openai", tokens: TokenSet(accessToken: access, refreshToken: "rt-" + access), lastRefresh: Date(),
                   account: AccountInfo(email: "u@example.com", accountID: account))
    }

    func machine(_ name: String, kv: MemoryEtcd, home: TestHome) -> Fleet {
        var settings = FleetSettings(name: "home", machine: name, endpoints: ["https://127.0.0.1:1"])
        settings.requestTimeout = 1
        return Fleet(settings: settings, kv: kv, paths: Paths(environment: home.environment), identityStore: MemoryStore(kind: .file))
    }

    @Test func aSealedCredentialOpensOnlyForItsSlotAccountAndRecipients() throws {
        let me = MachineIdentity(identity: X25519Identity.generate())
        let stranger = MachineIdentity(identity: X25519Identity.generate())
        let sealed = try SealedCredential.seal(credential("a1"), slot: slot, to: [me.recipient])
        let opened = try SealedCredential.open(sealed, slot: slot, fleet: "home", identity: me, expected: AccountInfo(accountID: "acct-1"))
        #expect(opened.tokens.accessToken == "a1")
        #expect(opened.lastRefreshBoot == nil)
        func refusal(_ body: () throws -> Credential) -> String? {
            do { _ = try body(); return nil } catch let e as FleetError { return e.code } catch { return "other" }
        }
        #expect(refusal { try SealedCredential.open(sealed, slot: slot, fleet: "home", identity: stranger) } == "fleet_credential_refused")
        #expect(refusal { try SealedCredential.open(sealed, slot: try Slot("other"), fleet: "home", identity: me) } == "fleet_credential_refused")
        #expect(refusal { try SealedCredential.open(sealed, slot: slot, fleet: "home", identity: me, expected: AccountInfo(accountID: "acct-2")) }
                == "fleet_credential_refused")
        #expect(refusal { try SealedCredential.open(Array("not age".utf8), slot: slot, fleet: "home", identity: me) } == "fleet_credential_refused")
        // The refusal never quotes what it refused.
        do { _ = try SealedCredential.open(sealed, slot: slot, fleet: "home", identity: me, expected: AccountInfo(accountID: "acct-2")) } catch {
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

    @Test func membersJoinWithTheRightFingerprintAndSharedSlotsFollowThem() throws {
        let kv = MemoryEtcd()
        let homeA = TestHome(), homeB = TestHome()
        let a = machine("a", kv: kv, home: homeA), b = machine("b", kv: kv, home: homeB)
        _ = try a.create()
        #expect(throws: FleetError.alreadyExists(fleet: "home")) { try a.create() }
        _ = try a.share(slot, credential: credential("a1"))
        let request = try b.requestJoin()
        #expect(throws: FleetError.self) { try a.approve(machine: "b", fingerprint: "0000-0000-0000-0000") }
        #expect(try a.members().map(\.machine) == ["a"])
        let (member, resealed) = try a.approve(machine: "b", fingerprint: request.fingerprint.lowercased())
        #expect(member.machine == "b" && resealed == [slot])
        let identityB = try #require(try b.identity())
        let (copy, _) = try #require(try b.newest(slot, identity: identityB, account: nil, provider: "openai"))
        #expect(copy.tokens.accessToken == "a1")
        // Removed again: what is written afterwards is sealed without it.
        #expect(try a.remove(machine: "b") == [slot])
        #expect(throws: FleetError.self) { try b.newest(slot, identity: identityB, account: nil, provider: nil) }
    }

    @Test func theLockGoesToTheOldestKeyAndFencesWrites() throws {
        let kv = MemoryEtcd()
        let home = TestHome()
        let a = machine("a", kv: kv, home: home)
        _ = try a.create()
        let revision = try a.share(slot, credential: credential("a1"))
        let first = try a.lock(slot)
        // A second holder would wait for the first: with the in-memory etcd's instant watch, it
        // times out instead (the real cluster's tests show the waiting).
        #expect(throws: (any Error).self) { try FleetLock.acquire(kv, folder: a.keys.locks(slot), ttl: 5, timeout: 0) }
        let written = try a.write(slot, credential: credential("a2"), replacing: revision, under: first)
        #expect(written != nil)
        // The same revision again is stale: the fence refuses it.
        #expect(try a.write(slot, credential: credential("a3"), replacing: revision, under: first) == nil)
        first.release()
        #expect(try kv.range(a.keys.locks(slot), prefix: true).kvs.isEmpty)
    }
}
