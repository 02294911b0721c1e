import Age
import Foundation
import Glibc
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// The removal attacks, on the real 3-member TLS cluster, by the realistic attacker: a machine
/// removed from the fleet that kept its store (its age key) and its etcd access. It uses only
/// `etcdctl`, stock `age` and a signer outside Lanyard's code (Tests/Fixtures/fleet/forge.py).
/// Each test asserts at the test server that no refresh token was presented twice, and that
/// nothing written after the removal opens with the removed machine's key (or a forged member's).
@Suite(.serialized) struct FleetRemovalTests {
    /// Tokens live 100 s and the lead covers all of it: every command finds them due (so it reads
    /// the fleet) but still valid (so they can be served when the fleet cannot be trusted).
    static let due = FleetAttackTests.due

    /// `fleet remove` rotates every shared slot at once: the removed machine's copy holds a spent
    /// refresh token, the value is sealed to the members left, the others adopt it.
    @Test func aRemovalRotatesEverySharedSlot() async throws {
        let h = try await FleetHarness(machines: 3)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let m3 = h.machines[2]
        let copy = try m3.stored("work")
        let removed = try m1.run("fleet", "remove", "m3", "--json")
        #expect(removed.status == 0, "\(removed.stderr)")
        let report = try jsonObject(removed.stdout)
        let slots = report["slots"] as? [[String: Any]] ?? []
        #expect(
            slots.count == 1 && slots.first?["slot"] as? String == "work"
                && slots.first?["result"] as? String == "rotated",
            "\(removed.stdout)"
        )
        #expect(
            try await h.refreshTokenState(try #require(copy.tokens.refreshToken)) == "rotated",
            "the removed copy's refresh token is still live"
        )
        let attacker = try EtcdAttacker(h, identity: try m3.identity())
        #expect(
            try attacker.decrypts(try attacker.sealed("slots/work")) == false,
            "the removed machine reads the rotated value"
        )
        // m2 asked to refresh finds the rotation and takes it, and says so.
        let adopted = try m2.run("refresh", "work")
        #expect(
            adopted.status == 0 && adopted.stdout.contains("work: adopted the tokens m1 refreshed"),
            "\(adopted.stdout) \(adopted.stderr)"
        )
        let a = try m1.run("token", "work")
        let b = try m2.run("token", "work")
        #expect(a.status == 0 && b.status == 0 && a.stdout == b.stdout, "\(a.stderr) \(b.stderr)")
        #expect(try m3.run("fleet", "sync").status != 0)
        try await h.expectNoReuse()
    }

    /// m2 removes m3 (and rotates); the attacker deletes the removal entry before m1 has read it.
    /// m1 learns of the entry from the rotated value and stops writing (`fleet_membership_behind`);
    /// the attacker puts back the value m1 last saw: m1 refuses it (it saw a newer generation) and
    /// never refreshes with its spent token. Once m2 runs, the entry is back and m1 carries on.
    @Test func aHiddenRemovalThenARefreshSealsNothingToTheRemovedMachine() async throws {
        let h = try await FleetHarness(machines: 3, refresh: Self.due, lifetime: 100)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let m3 = h.machines[2]
        let attacker = try EtcdAttacker(h, identity: try m3.identity())
        let lastSeen = try attacker.get(attacker.key("slots/work"))
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        #expect(try m2.run("fleet", "remove", "m3").status == 0)
        let removal = try attacker.get(attacker.key("log/0000000004"))
        try attacker.delete("log/0000000004")

        let behind = try m1.run("refresh", "work", "--json")
        #expect(
            behind.status == 1 && behind.stdout.contains("fleet_membership_behind"),
            "\(behind.stdout) \(behind.stderr)"
        )
        try attacker.put("slots/work", lastSeen)
        let again = try m1.run("refresh", "work", "--json")
        #expect(again.status != 0, "m1 refreshed over a hidden removal: \(again.stdout)")
        #expect(try m1.run("token", "work").status == 0)  // its valid copy is served
        let status = try jsonObject(try m1.run("fleet", "status", "--json").stdout)
        #expect((status["alarm"] as? [String: Any])?["kind"] as? String == "membership_behind", "\(status)")
        #expect(
            try attacker.decrypts(try attacker.sealed("slots/work")) == true,
            "the test's put-back value is not the old one"
        )
        #expect(try attacker.exists("intents/work") == false, "m1 wrote an intent while behind")

        // m2 reads the log: it puts its verified entry back; m1 verifies it and its alarm clears.
        #expect(try m2.run("fleet", "status").status == 0)
        #expect(try attacker.get(attacker.key("log/0000000004")) == removal)
        let caughtUp = try jsonObject(try m1.run("fleet", "status", "--json").stdout)
        #expect(
            caughtUp["alarm"] == nil
                && (caughtUp["members"] as? [[String: Any]])?.compactMap { $0["machine"] as? String } == ["m1", "m2"]
        )
        try await h.expectNoReuse()
    }

    /// m1 removes m3 (and rotates) while m2 runs nothing; the attacker puts back the value from
    /// before the removal, which m2 last saw. m2 cannot tell it from the newest by its generation,
    /// but it was sealed before a removal m2 verifies, and a removal rotates every shared slot: m2
    /// never presents its (spent) token, and serves its valid copy meanwhile.
    @Test func aMemberThatMissedTheRotationNeverRefreshesAValueSealedBeforeTheRemoval() async throws {
        let h = try await FleetHarness(machines: 3, refresh: Self.due, lifetime: 100)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let m3 = h.machines[2]
        let attacker = try EtcdAttacker(h, identity: try m3.identity())
        let lastSeen = try attacker.get(attacker.key("slots/work"))
        #expect(try m1.run("fleet", "remove", "m3").status == 0)
        try attacker.put("slots/work", lastSeen)
        let refused = try m2.run("refresh", "work", "--json")
        #expect(
            refused.status == 1 && refused.stdout.contains("fleet_credential_refused")
                && refused.stdout.contains("removed m3"),
            "\(refused.stdout) \(refused.stderr)"
        )
        #expect(try m2.run("token", "work").status == 0)  // its copy is still valid: served
        try await h.expectNoReuse()
    }

    /// As above, then m1 signs the slot in again (the cure docs/fleet.md gave after a removal)
    /// while the entry is still hidden: the new sign-in stays on m1, sealed to no one, until the
    /// log shows the removal; then it reaches the fleet sealed to m1 and m2 only.
    @Test func aHiddenRemovalThenASignInSealsNothingToTheRemovedMachine() async throws {
        let h = try await FleetHarness(machines: 3, refresh: Self.due, lifetime: 100)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let m3 = h.machines[2]
        let attacker = try EtcdAttacker(h, identity: try m3.identity())
        let lastSeen = try attacker.get(attacker.key("slots/work"))
        #expect(try m2.run("fleet", "remove", "m3").status == 0)
        try attacker.delete("log/0000000004")
        #expect(try m1.run("fleet", "sync").status != 0)  // sees the rotated value: behind
        try attacker.put("slots/work", lastSeen)

        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        try await h.server.signIn(m1.manager(), slot: "work", email: "fleet@example.com")
        #expect(try attacker.get(attacker.key("slots/work")) == lastSeen, "a sign-in was written while m1 is behind")
        #expect(try m2.run("fleet", "status").status == 0)  // puts the removal entry back
        let synced = try m1.run("fleet", "sync")
        #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
        #expect(
            try attacker.decrypts(try attacker.sealed("slots/work")) == false,
            "the new sign-in opens with the removed machine's key"
        )
        let a = try m1.run("token", "work")
        let b = try m2.run("token", "work")
        #expect(a.status == 0 && b.status == 0 && a.stdout == b.stdout, "\(a.stderr) \(b.stderr)")
        try await h.expectNoReuse()
    }

    /// A machine waiting for approval is told so, with the command to run on a member (its own
    /// fingerprint in it, to compare with this screen).
    @Test func aMachineWaitingForApprovalIsToldTheCommand() async throws {
        let h = try await FleetHarness(machines: 1)
        let m2 = try FleetMachine("m2", fleet: h.fleet, cluster: h.cluster, server: h.server)
        let joined = try m2.run("fleet", "join", "--fleet-fingerprint", try h.machines[0].fleetFingerprint(), "--json")
        let fingerprint = try #require(try jsonObject(joined.stdout)["fingerprint"] as? String)
        let status = try m2.run("fleet", "status")
        #expect(
            status.stdout.contains("(waiting for approval)")
                && status.stdout.contains("lanyard fleet approve m2 --fingerprint \(fingerprint)"),
            "\(status.stdout)"
        )
        // Approving it again once it is a member, with another fingerprint, is refused.
        #expect(try h.machines[0].run("fleet", "approve", "m2", "--fingerprint", fingerprint).status == 0)
        let wrong = try h.machines[0].run("fleet", "approve", "m2", "--fingerprint", "0000-0000-0000-0000-0000")
        #expect(wrong.status == 1 && wrong.stderr.contains("already a member, and that fingerprint"), "\(wrong.stderr)")
    }

    /// The removed machine signs its own entry at the removal's number ("add evil", linked to the
    /// entry before) with the key derived from the age identity it kept. m1, which had not read
    /// the log since, takes it, then reads m2's rotated value naming the real entry: a fork; it
    /// stops writing (`fleet_forked`), lists both entries, and seals nothing to m3 or evil until
    /// `fleet resolve` with the real entry's fingerprint. m2, which verified the removal, treats
    /// an entry signed by the machine it removed as damage: it puts the real one back and goes on.
    @Test func aForkedLogStopsEveryWrite() async throws {
        let h = try await FleetHarness(machines: 3, refresh: Self.due, lifetime: 100)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let m3 = h.machines[2]
        let m3Key = m3.home.root + "/m3.key"
        let identity = try m3.identity()
        try (identity.identity.secretKeyString + "\n").write(toFile: m3Key, atomically: true, encoding: .utf8)
        let attacker = try EtcdAttacker(h, identity: identity)
        let evil = try EtcdAttacker(h)
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        #expect(try m2.run("fleet", "remove", "m3").status == 0)
        let real = try attacker.get(attacker.key("log/0000000004"))
        let entry3 = try attacker.get(attacker.key("log/0000000003"))
        let body: [String: Any] = [
            "type": "lanyard-fleet-membership", "fleet": h.fleet, "seq": "4", "prev": try Forge.digest(entry3),
            "signer": "m3",
            "at": "2026-12-04T12:00:00Z", "op": "add", "machine": "evil", "recipient": evil.recipient,
            "signing_key": try Forge.publicKey(m3Key),
        ]
        try attacker.put("log/0000000004", try Forge.sign(try attacker.json(body), identity: m3Key))

        let refused = try m1.run("refresh", "work", "--json")
        #expect(refused.status == 1 && refused.stdout.contains("fleet_forked"), "\(refused.stdout) \(refused.stderr)")
        let status = try jsonObject(try m1.run("fleet", "status", "--json").stdout)
        let alarm = try #require(status["alarm"] as? [String: Any], "\(status)")
        #expect(alarm["kind"] as? String == "forked" && (alarm["entries"] as? [[String: Any]])?.count == 2)
        #expect(try attacker.decrypts(try attacker.sealed("slots/work")) == false)
        #expect(try evil.decrypts(try attacker.sealed("slots/work")) == false)

        // m2 saw the removal: the forged entry is damage to it, put right, and m2 goes on.
        let onM2 = try m2.run("refresh", "work", "--json")
        #expect(onM2.status == 0, "\(onM2.stdout) \(onM2.stderr)")
        #expect(try attacker.get(attacker.key("log/0000000004")) == real)
        #expect(try attacker.decrypts(try attacker.sealed("slots/work")) == false)
        #expect(try evil.decrypts(try attacker.sealed("slots/work")) == false)

        let fingerprint = MachineIdentity.grouped(hex: hexBytes(try Forge.digest(real)))
        let resolved = try m1.run("fleet", "resolve", fingerprint)
        #expect(resolved.status == 0, "\(resolved.stdout) \(resolved.stderr)")
        let refreshed = try m1.run("refresh", "work")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        #expect(try attacker.decrypts(try attacker.sealed("slots/work")) == false)
        #expect(try evil.decrypts(try attacker.sealed("slots/work")) == false)
        try await h.expectNoReuse()
    }

    /// The deferred second spend: the attacker deletes the value while m1's refresh request is in
    /// flight (m1 holds the lock, its intent names the token); m1 still writes its new tokens as
    /// the next generation, fenced on the lock. m2 adopts them; the attacker then deletes the
    /// intent and puts the old value back: m2 refuses it (it saw newer) and nothing is presented
    /// twice.
    @Test func aValueDeletedDuringARefreshEndsWithNoSecondSpend() async throws {
        let h = try await FleetHarness(machines: 2, refresh: Self.due, lifetime: 100)
        let attacker = try EtcdAttacker(h)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let old = try attacker.get(attacker.key("slots/work"))
        guard let refresh = try await h.refreshHeldAtTheServer(on: m1) else { return }
        #expect(try attacker.exists("intents/work"))
        try attacker.delete("slots/work")
        try await h.server.hook("/_test/release", [:])
        refresh.0.waitUntilExit()
        #expect(refresh.0.terminationStatus == 0)
        let written = try jsonObject(String(decoding: try attacker.get(attacker.key("slots/work")), as: UTF8.self))
        #expect(
            try attacker.body(written)["writer"] as? String == "m1",
            "m1 did not write its tokens over the deleted value"
        )
        #expect(try m2.run("token", "work").status == 0)  // adopts them
        try attacker.delete("intents/work")
        try attacker.put("slots/work", old)
        try await h.server.hook("/_test/config", ["access_token_lifetime": 100])
        let other = try m2.run("refresh", "work", "--json")
        #expect(other.status != 0 && other.stdout.contains("fleet_credential_refused"), "\(other.stdout)")
        #expect(try await h.server.stat("refreshes_succeeded") == 1)
        try await h.expectNoReuse()
    }

    /// With etcd's authentication on: a member holding the root role deletes the removed
    /// machine's etcd user in `fleet remove` (its etcd access is gone: it cannot even read); a
    /// member without it prints the `etcdctl` commands, and its `fleet status` keeps saying the
    /// access may be open and that it cannot check.
    @Test func aRemovalDeletesTheEtcdUserWhereItMay() async throws {
        try await EtcdCluster.withPrivateCluster { cluster in
            let admin = EtcdAdmin(cluster: cluster)
            let home = TestHome()
            var extra: [String: String] = [:]
            for name in ["m1", "m2", "m3", "m4"] {
                let file = home.root + "/\(name).password"
                try "pw-\(name)".write(toFile: file, atomically: true, encoding: .utf8)
                chmod(file, 0o600)
                extra[name] = "user = lanyard-\(name)\npassword-file = \(file)"
            }
            try admin.enableAuth(
                users: ["m1", "m2", "m3", "m4"].map { ("lanyard-\($0)", "pw-\($0)") },
                rootUsers: ["lanyard-m1"]
            )
            let h = try await FleetHarness(machines: 4, cluster: cluster, fleetExtra: { extra[$0] ?? "" })
            let m1 = h.machines[0]
            let m2 = h.machines[1]
            let m3 = h.machines[2]

            let byRoot = try m1.run("fleet", "remove", "m3", "--json")
            #expect(byRoot.status == 0, "\(byRoot.stderr)")
            #expect(
                (try jsonObject(byRoot.stdout)["etcd_access"] as? [String: Any])?["revoked"] as? Bool == true,
                "\(byRoot.stdout)"
            )
            #expect(try admin.userExists("lanyard-m3") == false)
            let shut = try m3.run("fleet", "sync")
            #expect(shut.status != 0, "the removed machine still reaches etcd: \(shut.stdout)")

            let byMember = try m2.run("fleet", "remove", "m4")
            #expect(byMember.status == 0, "\(byMember.stderr)")
            #expect(byMember.stdout.contains("user delete 'lanyard-m4'"), "\(byMember.stdout)")
            #expect(try admin.userExists("lanyard-m4"))
            let status = try m2.run("fleet", "status", "--json")
            let access = (try jsonObject(status.stdout)["removed_access"] as? [[String: Any]]) ?? []
            #expect(
                access.first?["machine"] as? String == "m4" && access.first?["revoked"] as? Bool == false,
                "\(status.stdout)"
            )
            let detail = access.first?["detail"] as? String
            #expect(detail?.contains("cannot be checked") == true, "\(status.stdout)")
            try await h.expectNoReuse()
        }
    }
}

/// The signer outside Lanyard's code (Tests/Fixtures/fleet/forge.py, on the test venv's
/// `cryptography`): what a removed machine can sign with the age identity it kept.
enum Forge {
    static func run(_ args: [String], stdin: Data? = nil) throws -> String {
        let python = repositoryRoot.appendingPathComponent(".venv/bin/python").path
        let script = repositoryRoot.appendingPathComponent("Tests/Fixtures/fleet/forge.py").path
        let (status, out, err) = try runProcess(python, [script] + args, stdin: stdin)
        guard status == 0 else { throw ServerError("forge.py \(args.first ?? ""): \(err)") }
        return out.trimmingCharacters(in: .whitespacesAndNewlines)
    }
    static func sign(_ body: Data, identity: String) throws -> Data {
        Data(try run(["sign", "--identity", identity], stdin: body).utf8)
    }
    static func publicKey(_ identity: String) throws -> String { try run(["pubkey", "--identity", identity]) }
    static func digest(_ envelope: Data) throws -> String { try run(["digest"], stdin: envelope) }
}

/// etcd's root user, through `etcdctl` with the cluster's admin certificate (Common Name `root`).
struct EtcdAdmin {
    let cluster: EtcdCluster

    @discardableResult
    func etcdctl(_ args: [String]) throws -> String {
        let base = [
            "--endpoints", cluster.endpoints.map(\.absoluteString).joined(separator: ","), "--cacert", cluster.caFile,
            "--cert", cluster.adminCertFile, "--key", cluster.adminKeyFile,
        ]
        let (status, out, err) = try runProcess("/usr/bin/etcdctl", base + args, environment: ["ETCDCTL_API": "3"])
        guard status == 0 else { throw ServerError("etcdctl \(args.prefix(2).joined(separator: " ")): \(err)") }
        return out
    }

    /// Users with a role limited to `/lanyard/`, the root user, then authentication on.
    func enableAuth(users: [(String, String)], rootUsers: [String]) throws {
        try etcdctl(["user", "add", "root:rootpw", "--interactive=false"])
        try etcdctl(["user", "grant-role", "root", "root"])
        try etcdctl(["role", "add", "lanyard"])
        try etcdctl(["role", "grant-permission", "lanyard", "readwrite", "/lanyard/", "--prefix=true"])
        for (user, password) in users {
            try etcdctl(["user", "add", "\(user):\(password)", "--interactive=false"])
            try etcdctl(["user", "grant-role", user, "lanyard"])
            if rootUsers.contains(user) { try etcdctl(["user", "grant-role", user, "root"]) }
        }
        try etcdctl(["auth", "enable"])
    }

    func userExists(_ name: String) throws -> Bool {
        (try? etcdctl(["user", "get", name])) != nil
    }
}

extension EtcdAttacker {
    /// Whether `path` holds a key.
    func exists(_ path: String) throws -> Bool {
        let answer = try jsonObject(try etcdctl(["get", key(path), "-w", "json"]))
        return !((answer["kvs"] as? [[String: Any]]) ?? []).isEmpty
    }
}

extension FleetMachine {
    /// This machine's fleet identity (its age key and the signing key derived from it).
    func identity() throws -> MachineIdentity {
        let loaded: MachineIdentity? = try MachineIdentity.load(from: EncryptedFileStore(paths: paths))
        return try #require(loaded, "\(name) has no fleet identity")
    }
}

extension FleetHarness {
    /// The state of `refreshToken` at the test server (`active`, `rotated`, `invalidated`, …).
    func refreshTokenState(_ refreshToken: String) async throws -> String? {
        let families = try await server.get("/_test/tokens")["families"] as? [[String: Any]] ?? []
        for family in families {
            for token in family["refresh_tokens"] as? [[String: Any]] ?? []
            where token["refresh_token"] as? String == refreshToken {
                return token["state"] as? String
            }
        }
        return nil
    }
}
