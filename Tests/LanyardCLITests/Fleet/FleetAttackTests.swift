import Age
import Foundation
import Glibc
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// Someone who can write the fleet's etcd prefix but holds no member's key: each attack of
/// issue 31 against the real 3-member TLS cluster, made with stock `etcdctl` and `age` only
/// (never Lanyard's code). Each asserts at the test server that no refresh token was spent twice,
/// that nothing under the prefix decrypts with the attacker's key, and that the slot still holds
/// the victim's account: an etcd writer can deny service, nothing else.
@Suite(.serialized) struct FleetAttackTests {
    /// Sign-in tokens live 100 s and the lead covers all of it: every command finds them due (so it
    /// reads the fleet) but still valid (so they can be served when the fleet cannot be trusted).
    static let due = "[refresh]\nlead = 300\nlead-share = 1"

    /// An age recipient written into the log (a copied member entry with the attacker's key, the
    /// old `members/` layout and a join request) is never sealed to: after a refresh, a share and
    /// an approval, nothing under the prefix decrypts with the attacker's key, and the members are
    /// the real ones.
    @Test func anInjectedMemberGetsNoToken() async throws {
        let h = try await FleetHarness(machines: 2, refresh: Self.due, lifetime: 100)
        let attacker = try EtcdAttacker(h)
        let m1 = h.machines[0]
        let entry = try attacker.document(attacker.key("log/0000000002"))
        var body = try attacker.body(entry)
        body["recipient"] = attacker.recipient
        body["machine"] = "evil"
        body["seq"] = "3"
        try attacker.put("log/0000000003", try attacker.envelope(body, signature: entry["signature"] as? String ?? ""))
        try attacker.put("members/evil", try attacker.json(["machine": "evil", "recipient": attacker.recipient]))
        try attacker.put("pending/evil", try attacker.json(["machine": "evil", "recipient": attacker.recipient]))

        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        #expect(try m1.run("refresh", "work").status == 0)
        try await h.server.signIn(m1.manager(), slot: "solo", email: "solo@example.com")
        #expect(try m1.run("fleet", "share", "solo").status == 0)
        let m3 = try FleetMachine("m3", fleet: h.fleet, cluster: h.cluster, server: h.server)
        try m3.join(through: m1)
        let status = try m1.run("fleet", "status", "--json")
        #expect(status.status == 0, "\(status.stderr)")
        let report = try jsonObject(status.stdout)
        #expect((report["members"] as? [[String: Any]])?.compactMap { $0["machine"] as? String } == ["m1", "m2", "m3"])
        #expect((report["damaged"] as? [String])?.isEmpty == false, "the injected entry is not reported")
        #expect((report["pending"] as? [[String: Any]])?.isEmpty == true)
        try await attacker.expectNothingReadable()
        try await h.expectNoReuse()
    }

    /// An entry that names a member under the attacker's key (an impostor `m1`) is damaged, not a
    /// second `m1`: status lists each member once with its real fingerprint.
    @Test func anImpostorNameIsNotAMember() async throws {
        let h = try await FleetHarness(machines: 2)
        let attacker = try EtcdAttacker(h)
        let genesis = try attacker.document(attacker.key("log/0000000001"))
        var body = try attacker.body(genesis)
        body["op"] = "add"
        body["seq"] = "3"
        body["recipient"] = attacker.recipient
        try attacker.put(
            "log/0000000003",
            try attacker.envelope(body, signature: genesis["signature"] as? String ?? "")
        )
        for m in h.machines {
            let status = try jsonObject(try m.run("fleet", "status", "--json").stdout)
            let members = status["members"] as? [[String: Any]] ?? []
            #expect(members.compactMap { $0["machine"] as? String } == ["m1", "m2"])
            for member in members {
                let name = member["machine"] as? String ?? ""
                let real = try #require(h.machines.first { $0.name == name })
                let identity = try #require(try MachineIdentity.load(from: EncryptedFileStore(paths: real.paths)))
                #expect(member["fingerprint"] as? String == identity.fingerprint)
            }
        }
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        #expect(try h.machines[1].run("refresh", "work").status == 0)
        try await attacker.expectNothingReadable()
    }

    /// A removed machine that kept its etcd certificate puts its old `add` entry back and deletes
    /// the entry that removed it: members that saw the removal keep it removed, and what they
    /// write next is sealed without it (its own age key reads nothing).
    @Test func aRemovedMachineCannotWriteItselfBack() async throws {
        let h = try await FleetHarness(machines: 2)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        #expect(try m1.run("fleet", "remove", "m2").status == 0)
        // m2 is the attacker now, with its own age key.
        let attacker = try EtcdAttacker(
            h,
            identity: try MachineIdentity.load(from: EncryptedFileStore(paths: m2.paths))
        )
        let added = try attacker.get(attacker.key("log/0000000002"))
        try attacker.delete("log/0000000003")
        try attacker.put("log/0000000003", added)
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let refreshed = try m1.run("refresh", "work")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        let status = try jsonObject(try m1.run("fleet", "status", "--json").stdout)
        #expect((status["members"] as? [[String: Any]])?.compactMap { $0["machine"] as? String } == ["m1"])
        try await attacker.expectNothingReadable(except: [
            "log/", "pending/", "created", "refreshed/", "leader/", "locks/",
        ])
        let sealed = try attacker.sealed("slots/work")
        #expect(try attacker.decrypts(sealed) == false, "the removed machine reads the fleet's new credential")
        try await h.expectNoReuse()
    }

    /// A credential the attacker sealed with stock age to the members' recipients, naming the
    /// victim's account id (which `list --json` prints) and a writer that is a member, is refused:
    /// m2 keeps handing out the victim's token, and no refresh makes the slot the attacker's.
    @Test func aForgedCredentialForTheVictimsAccountIsRefused() async throws {
        let h = try await FleetHarness(machines: 2, refresh: Self.due, lifetime: 100)
        let attacker = try EtcdAttacker(h)
        let m2 = h.machines[1]
        let before = try m2.stored("work")
        let accountID = try #require(before.account.accountID)
        try attacker.put(
            "slots/work",
            try attacker.forgedCredential(slot: "work", accountID: accountID, generation: 99)
        )
        let token = try m2.run("token", "work")
        #expect(token.status == 0, "\(token.stderr)")
        let servedVictims = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == before.tokens.accessToken
        #expect(servedVictims, "m2 did not hand out the victim's token")
        let sync = try m2.run("fleet", "sync", "--json")
        #expect(sync.stdout.contains("refused"), "\(sync.stdout)")
        let forced = try m2.run("refresh", "work", "--json")
        #expect(forced.status != 0 && forced.stdout.contains("fleet_credential_refused"), "\(forced.stdout)")
        let kept = try m2.stored("work")
        #expect(kept.account == before.account && kept.tokens.refreshToken == before.tokens.refreshToken)
        #expect(try await h.accountOf(kept.tokens.accessToken) == accountID)
        try await h.expectNoReuse()
    }

    /// A slot the attacker invents is created on no member, and no active slot changes.
    @Test func anInventedSlotIsCreatedNowhere() async throws {
        let h = try await FleetHarness(machines: 2)
        let attacker = try EtcdAttacker(h)
        try attacker.put(
            "slots/invented",
            try attacker.forgedCredential(slot: "invented", accountID: "acct-attacker", generation: 1)
        )
        for m in h.machines {
            let active = try m.run("which", "--json").stdout
            _ = try m.run("fleet", "sync")
            let list = try m.run("list", "--json")
            #expect(!list.stdout.contains("invented"), "\(m.name): \(list.stdout)")
            #expect(try m.run("which", "--json").stdout == active)
        }
    }

    /// A slot named like the machine's own key entry: no door takes the name, so neither a value
    /// in etcd nor `lanyard login` reaches the machine's fleet identity.
    @Test func aReservedNameReachesNoMachineKey() async throws {
        let h = try await FleetHarness(machines: 2)
        let attacker = try EtcdAttacker(h)
        let m2 = h.machines[1]
        let identity = try #require(try MachineIdentity.load(from: EncryptedFileStore(paths: m2.paths)))
        try attacker.put(
            "slots/lanyard-fleet-identity",
            try attacker.forgedCredential(slot: "lanyard-fleet-identity", accountID: "x", generation: 1)
        )
        _ = try m2.run("fleet", "sync")
        let login = try m2.run("login", "lanyard-fleet-identity", "--json")
        #expect(login.status != 0 && login.stdout.contains("reserved"), "\(login.stdout) \(login.stderr)")
        let after = try #require(try MachineIdentity.load(from: EncryptedFileStore(paths: m2.paths)))
        #expect(after.recipient == identity.recipient && after.signingKey == identity.signingKey)
        #expect(!(try m2.run("list", "--json").stdout.contains("lanyard-fleet")))
        #expect(try m2.run("token", "work").status == 0)
    }

    /// A value from 1 and from 10 generations ago, put back: every member that saw the newer one
    /// refuses it, and its spent refresh token is never presented.
    @Test func aRolledBackCredentialIsRefused() async throws {
        let h = try await FleetHarness(machines: 2)
        let attacker = try EtcdAttacker(h)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        var history: [Data] = []
        for _ in 0..<11 {
            history.append(try attacker.get(attacker.key("slots/work")))
            let refreshed = try m1.run("refresh", "work")
            #expect(refreshed.status == 0, "\(refreshed.stderr)")
        }
        #expect(try m2.run("fleet", "sync").status == 0)
        let newest = try m2.stored("work")
        for back in [1, 10] {
            try attacker.put("slots/work", history[history.count - back])
            for m in [m1, m2] {
                let forced = try m.run("refresh", "work", "--json")
                #expect(
                    forced.status != 0 && forced.stdout.contains("fleet_credential_refused"),
                    "\(m.name), \(back) back: \(forced.stdout)"
                )
                let token = try m.run("token", "work")
                #expect(token.status == 0, "\(token.stderr)")
            }
            let kept = try m2.stored("work").tokens.refreshToken == newest.tokens.refreshToken
            #expect(kept, "m2 took a value \(back) generation(s) old")
        }
        try await h.expectNoReuse()
    }

    /// The value deleted: the slot stays shared on every machine (never a local slot that would
    /// refresh on its own), valid tokens are served, no refresh happens, and a sign-in on a member
    /// puts a live credential back.
    @Test func aDeletedValueLeavesTheSlotSharedAndUnrefreshed() async throws {
        let h = try await FleetHarness(machines: 2, refresh: Self.due, lifetime: 100)
        let attacker = try EtcdAttacker(h)
        try attacker.delete("slots/work")
        for m in h.machines {
            #expect(try m.run("token", "work").status == 0)
            let forced = try m.run("refresh", "work", "--json")
            #expect(forced.status != 0 && forced.stdout.contains("fleet_value_missing"), "\(m.name): \(forced.stdout)")
            #expect(
                try SharedSlotState.load(try Slot("work"), paths: m.paths) != nil,
                "\(m.name) turned the slot local"
            )
        }
        #expect(try await h.server.stat("refreshes_succeeded") == 0)
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let signedIn = try await h.server.signIn(h.machines[0].manager(), slot: "work", email: "fleet@example.com")
        let served = try h.machines[1].run("token", "work")
        let same = served.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == signedIn.tokens.accessToken
        let sync = try h.machines[1].run("fleet", "sync", "--json").stdout
        #expect(same, "m2 does not hand out the new sign-in: \(served.stderr) \(sync)")
        try await h.expectNoReuse()
    }

    /// `fleet unshare`: the machine that ran it keeps the live credential; the other marks its
    /// copy handed over and never spends that refresh token; sharing again brings it back.
    @Test func unshareHandsTheSlotOverWithoutASecondSpend() async throws {
        let h = try await FleetHarness(machines: 2)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        #expect(try m1.run("fleet", "unshare", "work").status == 0)
        let sync = try m2.run("fleet", "sync", "--json")
        #expect(sync.stdout.contains("handed-over"), "\(sync.stdout)")
        let refused = try m2.run("refresh", "work", "--json")
        #expect(refused.status == 4 && refused.stdout.contains("fleet_handed_over"), "\(refused.stdout)")
        #expect(try m1.run("refresh", "work").status == 0)
        #expect(try m1.run("refresh", "work").status == 0)
        try await h.expectNoReuse()
        // Shared again: the handed-over copy adopts it.
        #expect(try m1.run("fleet", "share", "work").status == 0)
        let back = try m2.run("fleet", "sync", "--json")
        #expect(back.stdout.contains("adopted"), "\(back.stdout)")
        #expect(try m2.run("refresh", "work").status == 0)
        #expect(try m1.run("token", "work").status == 0)
        try await h.expectNoReuse()
    }

    /// A typo in `[fleet] name` on one machine: it has not joined that fleet, so it serves its
    /// valid token, refreshes nothing, and keeps the slot shared in its real fleet.
    @Test func aFleetNameTypoNeverRefreshesBlind() async throws {
        let h = try await FleetHarness(machines: 2, refresh: Self.due, lifetime: 100)
        let m2 = h.machines[1]
        let config = m2.home.root + "/config/lanyard/config.ini"
        let good = try String(contentsOfFile: config, encoding: .utf8)
        try good.replacingOccurrences(of: "name = \(h.fleet)", with: "name = \(h.fleet)x").write(
            toFile: config,
            atomically: true,
            encoding: .utf8
        )
        #expect(try m2.run("token", "work").status == 0)
        let forced = try m2.run("refresh", "work", "--json")
        #expect(forced.status != 0 && forced.stdout.contains("fleet_not_joined"), "\(forced.stdout)")
        #expect(try SharedSlotState.load(try Slot("work"), paths: m2.paths)?.fleet == h.fleet)
        #expect(try await h.server.stat("refreshes_succeeded") == 0)
        try good.write(toFile: config, atomically: true, encoding: .utf8)
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        #expect(try m2.run("refresh", "work").status == 0)
        #expect(try h.machines[0].run("token", "work").status == 0)
        try await h.expectNoReuse()
    }

    /// A removed machine can neither unshare the slot for everyone nor touch the fleet by signing
    /// out: `logout` forgets its own copy, and the members go on refreshing with no reuse.
    @Test func aRemovedMachinesLogoutAndUnshareLeaveTheFleetAlone() async throws {
        let h = try await FleetHarness(machines: 2)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        #expect(try m1.run("fleet", "remove", "m2").status == 0)
        let unshare = try m2.run("fleet", "unshare", "work", "--json")
        #expect(unshare.status != 0 && unshare.stdout.contains("fleet_not_member"), "\(unshare.stdout)")
        let logout = try m2.run("logout", "work")
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(try SharedSlotState.load(try Slot("work"), paths: m2.paths) == nil)
        let status = try jsonObject(try m1.run("fleet", "status", "--json").stdout)
        #expect((status["slots"] as? [[String: Any]])?.compactMap { $0["slot"] as? String } == ["work"])
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        #expect(try m1.run("refresh", "work").status == 0)
        #expect(try m1.run("refresh", "work").status == 0)
        try await h.expectNoReuse()
    }

    /// One undecodable entry in the log: status lists it and exits 0, refreshes and approvals go
    /// on (the next entry replaces it).
    @Test func aCorruptMemberEntryBlocksNothing() async throws {
        let h = try await FleetHarness(machines: 2)
        let attacker = try EtcdAttacker(h)
        let m1 = h.machines[0]
        try attacker.put("log/0000000003", Data("{\"body\": \"\\u001b[31mnot json".utf8))
        let status = try m1.run("fleet", "status", "--json")
        #expect(status.status == 0, "\(status.stdout)")
        let damaged = (try jsonObject(status.stdout)["damaged"] as? [String]) ?? []
        #expect(
            damaged.count == 1 && damaged[0].contains("log/0000000003") && !damaged[0].contains("\u{1b}"),
            "\(damaged)"
        )
        let human = try m1.run("fleet", "status")
        #expect(human.status == 0 && !human.stdout.contains("\u{1b}"))
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        #expect(try m1.run("refresh", "work").status == 0)
        let m3 = try FleetMachine("m3", fleet: h.fleet, cluster: h.cluster, server: h.server)
        try m3.join(through: m1)
        #expect(try m3.run("fleet", "sync").status == 0)
        #expect(try m3.run("token", "work").status == 0)
        let after = try jsonObject(try m1.run("fleet", "status", "--json").stdout)
        #expect((after["damaged"] as? [String])?.isEmpty == true)
        try await h.expectNoReuse()
    }

    /// The value a refresh is replacing, put again while the provider answers (the same bytes at a
    /// new revision, so the refresh's fenced write fails), then the refresh's intent deleted: the
    /// refreshing machine still writes its tokens over that value (it holds the token just spent),
    /// so the other machine adopts them instead of presenting the spent token.
    @Test func aValuePutAgainDuringARefreshThenTheIntentDeletedSpendsNothingTwice() async throws {
        let h = try await FleetHarness(machines: 2, refresh: Self.due, lifetime: 100)
        let attacker = try EtcdAttacker(h)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let value = try attacker.get(attacker.key("slots/work"))
        guard let refresh = try await h.refreshHeldAtTheServer(on: m1) else { return }
        try attacker.put("slots/work", value)
        try await h.server.hook("/_test/release", [:])
        refresh.0.waitUntilExit()
        #expect(refresh.0.terminationStatus == 0)
        try attacker.delete("intents/work")
        let other = try m2.run("refresh", "work")
        #expect(other.status == 0, "\(other.stderr)")
        let same = try m1.stored("work").tokens.refreshToken == m2.stored("work").tokens.refreshToken
        #expect(same, "m2 does not hold m1's refreshed tokens")
        #expect(try await h.server.stat("refreshes_succeeded") == 1)
        try await h.expectNoReuse()
    }

    /// etcd loses quorum after the provider rotated the token and before the fleet write, and the
    /// refreshing machine has no agent: the other machine finds the intent for the token it holds,
    /// never spends it, and says where the new tokens are; once the first machine runs again its
    /// tokens reach the fleet and both converge.
    @Test func etcdLostMidRefreshNeverLeadsToASecondSpend() async throws {
        try await EtcdCluster.withPrivateCluster { cluster in
            // A 5 s request limit makes the fleet lock's lease 20 s, so m2 does not wait the default
            // 70 s for the lock m1's refresh leaves behind.
            let h = try await FleetHarness(
                machines: 2,
                refresh: Self.due + "\n[http]\ntimeout = 5",
                lifetime: 100,
                cluster: cluster
            )
            let m1 = h.machines[0]
            let m2 = h.machines[1]
            try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
            // The refresh request waits at the server until etcd has lost quorum, then gets its
            // answer (within m1's 5 s request limit: the two kills take moments).
            guard let refresh = try await h.refreshHeldAtTheServer(on: m1) else { return }
            try await cluster.kill(member: cluster.memberNames[1])
            try await cluster.kill(member: cluster.memberNames[2])
            try await h.server.hook("/_test/release", [:])
            refresh.0.waitUntilExit()
            #expect(try await h.server.stat("refreshes_succeeded") == 1)
            try await cluster.restart(member: cluster.memberNames[1])
            try await cluster.restart(member: cluster.memberNames[2])
            try await cluster.waitHealthy()
            let blocked = try m2.run("refresh", "work", "--json")
            #expect(
                blocked.status != 0 && blocked.stdout.contains("fleet_refresh_in_flight")
                    && blocked.stdout.contains("m1"),
                "\(blocked.stdout)"
            )
            #expect(try m2.run("token", "work").status == 0)  // still valid: served
            #expect(try await h.server.stat("refreshes_succeeded") == 1)
            // m1 runs again: its tokens reach the fleet, and m2 adopts them.
            #expect(try m1.run("fleet", "sync").status == 0)
            let a = try m1.run("token", "work")
            let b = try m2.run("token", "work")
            #expect(a.status == 0 && b.status == 0 && a.stdout == b.stdout, "\(a.stderr) \(b.stderr)")
            try await h.expectNoReuse()
        }
    }
}

/// Someone with an etcd client certificate and stock tools: `etcdctl` for the prefix, `age` and
/// `age-keygen` for keys. Never Lanyard's code.
struct EtcdAttacker {
    let cluster: EtcdCluster
    let prefix: String
    let home = TestHome()
    let keyFile: String
    let recipient: String

    /// A new attacker key, or `identity` (a removed member's own age key, written to a file).
    init(_ h: FleetHarness, identity: MachineIdentity? = nil) throws {
        cluster = h.cluster
        prefix = "/lanyard/\(h.fleet)/"
        keyFile = home.root + "/attacker.key"
        if let identity {
            try (identity.identity.secretKeyString + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        } else {
            let (status, _, err) = try runProcess("/usr/bin/age-keygen", ["-o", keyFile])
            guard status == 0 else { throw ServerError("age-keygen: \(err)") }
        }
        let (status, out, err) = try runProcess("/usr/bin/age-keygen", ["-y", keyFile])
        guard status == 0 else { throw ServerError("age-keygen -y: \(err)") }
        recipient = out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func key(_ path: String) -> String { prefix + path }

    @discardableResult
    func etcdctl(_ args: [String], stdin: Data? = nil) throws -> String {
        let base = [
            "--endpoints", cluster.endpoints.map(\.absoluteString).joined(separator: ","), "--cacert", cluster.caFile,
            "--cert", cluster.certFile, "--key", cluster.keyFile,
        ]
        let (status, out, err) = try runProcess(
            "/usr/bin/etcdctl",
            base + args,
            environment: ["ETCDCTL_API": "3"],
            stdin: stdin
        )
        guard status == 0 else { throw ServerError("etcdctl \(args.first ?? ""): \(err)") }
        return out
    }

    func put(_ path: String, _ value: Data) throws { try etcdctl(["put", key(path)], stdin: value) }
    func delete(_ path: String) throws { try etcdctl(["del", key(path)]) }

    /// The value of `key` (a full key).
    func get(_ key: String) throws -> Data {
        let answer = try jsonObject(try etcdctl(["get", key, "-w", "json"]))
        guard let kvs = answer["kvs"] as? [[String: Any]], let value = kvs.first?["value"] as? String,
            let data = Data(base64Encoded: value)
        else {
            throw ServerError("etcdctl get \(key): no value")
        }
        return data
    }

    /// Every key and value under the prefix.
    func everything() throws -> [(String, Data)] {
        let answer = try jsonObject(try etcdctl(["get", prefix, "--prefix", "-w", "json"]))
        return (answer["kvs"] as? [[String: Any]] ?? []).compactMap { kv in
            guard let k = (kv["key"] as? String).flatMap({ Data(base64Encoded: $0) }),
                let v = (kv["value"] as? String).flatMap({ Data(base64Encoded: $0) })
            else { return nil }
            return (String(decoding: k, as: UTF8.self), v)
        }
    }

    func document(_ key: String) throws -> [String: Any] {
        try jsonObject(String(decoding: try get(key), as: UTF8.self))
    }
    func body(_ document: [String: Any]) throws -> [String: Any] { try jsonObject(document["body"] as? String ?? "") }
    func json(_ object: [String: Any]) throws -> Data { try JSONSerialization.data(withJSONObject: object) }
    func envelope(_ body: [String: Any], signature: String) throws -> Data {
        try json(["body": String(decoding: try json(body), as: UTF8.self), "signature": signature])
    }

    /// The members' recipients, as anyone who reads the log finds them.
    func recipients() throws -> [String] {
        try everything().filter { $0.0.hasPrefix(key("log/")) }.compactMap { _, value in
            (try? body(try jsonObject(String(decoding: value, as: UTF8.self))))?["recipient"] as? String
        }
    }

    /// A credential of the attacker's own, sealed with stock age to every member, claiming to be
    /// member m1's value for `slot` (naming `accountID`), with a signature of zeros.
    func forgedCredential(slot: String, accountID: String, generation: Int) throws -> Data {
        let credential: [String: Any] = [
            "version": 1, "provider": "openai",
            "tokens": ["access_token": "at-attacker", "refresh_token": "rt-attacker", "token_type": "Bearer"],
            "account": ["email": "victim@example.com", "account_id": accountID],
        ]
        let plain = try json([
            "fleet": String(prefix.dropFirst("/lanyard/".count).dropLast()), "slot": slot,
            "generation": String(generation),
            "credential": credential,
        ])
        let plainFile = home.root + "/plain.json"
        try plain.write(to: URL(fileURLWithPath: plainFile))
        let sealedFile = home.root + "/sealed.age"
        let (status, _, err) = try runProcess(
            "/usr/bin/age",
            ["-e", "-o", sealedFile] + (try recipients()).flatMap { ["-r", $0] } + [plainFile]
        )
        guard status == 0 else { throw ServerError("age -e: \(err)") }
        let sealed = try Data(contentsOf: URL(fileURLWithPath: sealedFile))
        let body: [String: Any] = [
            "type": "lanyard-fleet-credential", "fleet": String(prefix.dropFirst("/lanyard/".count).dropLast()),
            "slot": slot,
            "generation": String(generation), "head_seq": "1", "head": String(repeating: "0", count: 64),
            "writer": "m1",
            "sealed": sealed.base64EncodedString(), "digest": String(repeating: "0", count: 64),
        ]
        return try envelope(body, signature: Data(count: 64).base64EncodedString())
    }

    /// The age file inside a shared value.
    func sealed(_ path: String) throws -> Data {
        guard let text = try body(try document(key(path)))["sealed"] as? String, let data = Data(base64Encoded: text)
        else {
            throw ServerError("\(path) holds no sealed credential")
        }
        return data
    }

    /// Whether `age -d -i KEY` opens `data`.
    func decrypts(_ data: Data) throws -> Bool {
        let file = home.root + "/candidate.age"
        try data.write(to: URL(fileURLWithPath: file))
        let (status, _, _) = try runProcess("/usr/bin/age", ["-d", "-i", keyFile, "-o", "/dev/null", file])
        return status == 0
    }

    /// Nothing under the prefix (a value, or an age file inside a signed value) decrypts with the
    /// attacker's key. `except` names folders whose values the attacker wrote itself.
    func expectNothingReadable(except: [String] = []) async throws {
        var tried = 0
        for (k, value) in try everything() where !except.contains(where: { k.hasPrefix(key($0)) }) {
            var candidates = [value]
            if let doc = try? jsonObject(String(decoding: value, as: UTF8.self)), let b = try? body(doc),
                let sealed = (b["sealed"] as? String).flatMap({ Data(base64Encoded: $0) })
            {
                candidates.append(sealed)
            }
            for candidate in candidates where candidate.starts(with: Array("age-encryption.org/v1".utf8)) {
                tried += 1
                // The attacker's own forgeries (sealed to members and to no one else) are not the
                // point; every sealed value a member wrote must stay closed.
                #expect(try !decrypts(candidate), "\(k) decrypts with the attacker's key")
            }
        }
        #expect(tried > 0, "no sealed value found under the prefix")
    }
}

extension FleetHarness {
    /// Starts `lanyard refresh work` on `machine` with its request held at the test server until
    /// the test posts `/_test/release` (at most 60 s), and returns once the request is there (the
    /// server takes the fault off its queue then): the moment between a refresh's intent and its
    /// fleet write, as long as the test's move takes. Nil (recorded) when the refresh ended before
    /// it reached the server.
    func refreshHeldAtTheServer(on machine: FleetMachine) async throws -> (Process, Pipe, Pipe)? {
        try await server.hook(
            "/_test/fault",
            ["endpoint": "oauth_token", "type": "delay", "seconds": 60, "until_released": true]
        )
        let refresh = try machine.home.start(["refresh", "work"])
        let reached = try await eventually("the refresh reaches the server") {
            try await server.get("/_test/faults").isEmpty ? "reached" : refresh.0.isRunning ? "on its way" : "ended"
        } until: {
            $0 != "on its way"
        }
        guard reached == "reached" else {
            Issue.record("the refresh ended before it reached the server")
            return nil
        }
        return refresh
    }

    /// No refresh token was presented twice, and no family was revoked for it.
    func expectNoReuse() async throws {
        #expect(try await server.stat("refresh_reused") == 0)
    }

    /// The account id of the family that issued `accessToken`.
    func accountOf(_ accessToken: String) async throws -> String? {
        let families = try await server.get("/_test/tokens")["families"] as? [[String: Any]] ?? []
        return families.first { family in
            (family["access_tokens"] as? [[String: Any]] ?? []).contains {
                $0["access_token"] as? String == accessToken
            }
        }?["account_id"] as? String
    }
}

/// A JSON object from text.
func jsonObject(_ text: String) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
        throw ServerError("not a JSON object: \(text.prefix(200))")
    }
    return object
}
