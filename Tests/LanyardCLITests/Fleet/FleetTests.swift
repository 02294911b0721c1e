import Foundation
import Glibc
import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// One simulated machine of a fleet: its own HOME and XDG folders, file store and identity,
/// pointed at the ChatGPT emulator and at the etcd cluster.
struct FleetMachine {
    let name: String
    let home = TestHome()
    let server: OAuthTestServer

    /// `fleetExtra`: more lines of its `[fleet]` group (an etcd user and password file).
    init(
        _ name: String,
        fleet: String,
        cluster: EtcdCluster,
        server: OAuthTestServer,
        refresh: String = "",
        fleetExtra: String = ""
    ) throws {
        self.name = name
        self.server = server
        try home.useEmulator(
            server,
            extraConfig: refresh + "\n" + cluster.fleetSection(fleet: fleet, machine: name) + "\n" + fleetExtra
        )
    }

    var paths: Paths { Paths(environment: home.environment) }

    func manager() throws -> AccountManager {
        let paths = self.paths
        return AccountManager(
            paths: paths,
            config: try ConfigFile.load(path: paths.configFile).config,
            openStore: { _, _ in EncryptedFileStore(paths: paths) },
            transport: URLSessionTransport()
        )
    }

    @discardableResult
    func run(_ args: String...) throws -> TestHome.Output { try home.run(args) }
    @discardableResult
    func run(_ args: [String]) throws -> TestHome.Output { try home.run(args) }

    func stored(_ slot: String) throws -> Credential { try EncryptedFileStore(paths: paths).get(try Slot(slot)) }

    /// Takes slot `work`'s fleet lock here with a `ttl`-second lease, in a process
    /// (`lanyard-test-tool fleet-lock`) that holds it until it is killed.
    func holdFleetLock(ttl: Int) throws -> Process {
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: builtBinary("lanyard-test-tool"))
        holder.arguments = ["fleet-lock", "work", String(ttl)]
        holder.environment = home.environment
        let out = Pipe()
        holder.standardOutput = out
        try holder.run()
        let line = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        #expect(line.hasPrefix("locked "), "\(line)")
        return holder
    }

    /// The fleet's fingerprint as `fleet status` shows it here.
    func fleetFingerprint() throws -> String {
        let status = try run("fleet", "status", "--json")
        return try #require(
            (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])?["fingerprint"]
                as? String,
            "\(status.stdout)"
        )
    }

    /// `fleet join` here with the fleet fingerprint `member` shows, and `fleet approve` on
    /// `member` with the fingerprint join printed.
    func join(through member: FleetMachine) throws {
        let joined = try run("fleet", "join", "--fleet-fingerprint", try member.fleetFingerprint(), "--json")
        #expect(joined.status == 0, "\(joined.stderr)")
        let fingerprint = try #require(
            (try JSONSerialization.jsonObject(with: Data(joined.stdout.utf8)) as? [String: Any])?["fingerprint"]
                as? String
        )
        let approved = try member.run("fleet", "approve", name, "--fingerprint", fingerprint)
        #expect(approved.status == 0, "\(approved.stderr)")
    }
}

/// A fleet of machines against the shared test cluster, under a fleet name of its own.
struct FleetHarness {
    let cluster: EtcdCluster
    let server: OAuthTestServer
    let fleet = "t" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
    var machines: [FleetMachine] = []

    /// `count` machines; the first signs `work` in and creates the fleet, the others join and
    /// sync. Tokens issued at sign-in live `lifetime` seconds.
    init(
        machines count: Int,
        refresh: String = "",
        lifetime: Int = 3600,
        cluster: EtcdCluster? = nil,
        fleetExtra: (String) throws -> String = { _ in "" }
    ) async throws {
        self.cluster = try cluster ?? EtcdCluster.fromEnvironment()
        server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook("/_test/config", ["interval": 0, "access_token_lifetime": lifetime])
        for i in 1...count {
            machines.append(
                try FleetMachine(
                    "m\(i)",
                    fleet: fleet,
                    cluster: self.cluster,
                    server: server,
                    refresh: refresh,
                    fleetExtra: try fleetExtra("m\(i)")
                )
            )
        }
        try await server.signIn(machines[0].manager(), slot: "work", email: "fleet@example.com")
        let created = try machines[0].run("fleet", "init")
        #expect(created.status == 0, "\(created.stderr)")
        let shared = try machines[0].run("fleet", "share", "work")
        #expect(shared.status == 0, "\(shared.stderr)")
        for m in machines.dropFirst() {
            try m.join(through: machines[0])
            let synced = try m.run("fleet", "sync")
            #expect(synced.status == 0, "\(synced.stderr)")
        }
    }

    func client() -> EtcdGatewayClient {
        EtcdGatewayClient(
            endpoints: cluster.endpoints.map(\.absoluteString),
            caFile: cluster.caFile,
            certFile: cluster.certFile,
            keyFile: cluster.keyFile
        )
    }

    /// Every token the server ever issued (access and refresh).
    func issuedTokens() async throws -> [String] {
        let answer = try await server.get("/_test/tokens")
        let families = answer["families"] as? [[String: Any]] ?? []
        return families.flatMap { family -> [String] in
            let refresh = (family["refresh_tokens"] as? [[String: Any]] ?? []).compactMap {
                $0["refresh_token"] as? String
            }
            let access = (family["access_tokens"] as? [[String: Any]] ?? []).compactMap {
                $0["access_token"] as? String
            }
            return refresh + access
        }
    }
}

@Suite(.serialized) struct FleetTests {
    /// join → approve (a wrong fingerprint changes nothing) → sync brings the slot; a machine
    /// that asked but was not approved can neither sync nor decrypt.
    @Test func joinApproveShareAndAnOutsiderThatCannotRead() async throws {
        var h = try await FleetHarness(machines: 2)
        let first = h.machines[0]
        let second = h.machines[1]
        let same = try second.stored("work").tokens.accessToken == first.stored("work").tokens.accessToken
        #expect(same, "m2 does not hold m1's tokens")
        let list = try second.run("fleet", "status", "--json")
        #expect(list.status == 0, "\(list.stderr)")
        let status = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])
        #expect((status["members"] as? [[String: Any]])?.compactMap { $0["machine"] as? String } == ["m1", "m2"])
        #expect(status["standing"] as? String == "member")
        // One machine cannot sign out, rename or remove what every machine shares.
        for args in [["logout", "work"], ["rename", "work", "mine"], ["remove", "work", "--yes"]] {
            let refused = try second.run(args + ["--json"])
            #expect(refused.status == 1 && refused.stdout.contains("fleet_slot_shared"), "\(args): \(refused.stdout)")
        }

        let outsider = try FleetMachine("m9", fleet: h.fleet, cluster: h.cluster, server: h.server)
        h.machines.append(outsider)
        #expect(try outsider.run("fleet", "join", "--fleet-fingerprint", try first.fleetFingerprint()).status == 0)
        let wrong = try first.run("fleet", "approve", "m9", "--fingerprint", "0000-0000-0000-0000", "--json")
        #expect(wrong.status == 1 && wrong.stdout.contains("fleet_fingerprint_mismatch"), "\(wrong.stdout)")
        let refused = try outsider.run("fleet", "sync", "--json")
        #expect(refused.status == 1 && refused.stdout.contains("fleet_not_member"), "\(refused.stdout)")
        // Its identity cannot open the fleet's copy either.
        let identity = try #require(try MachineIdentity.load(from: EncryptedFileStore(paths: outsider.paths)))
        let sealed = try #require(try h.client().get(FleetKeys(fleet: h.fleet).slot(try Slot("work"))))
        let membership = try #require(try MembershipCache.load(first.paths))
        #expect(throws: FleetError.self) {
            try SealedCredential.open(
                sealed,
                slot: try Slot("work"),
                fleet: h.fleet,
                membership: membership,
                identity: identity
            )
        }
    }

    /// 4 machines × 8 `lanyard token` at once on one due shared slot: one refresh at the server,
    /// none reused, and all 32 print the same new token.
    @Test func fourMachinesRefreshADueSharedSlotExactlyOnce() async throws {
        // Tokens from sign-in live 100 s and the lead covers all of it (due at once); after the
        // first refresh the server issues hour-long tokens, which are not due.
        let h = try await FleetHarness(machines: 4, refresh: "[refresh]\nlead = 300\nlead-share = 1", lifetime: 100)
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let before = try await h.server.stat("refreshes_succeeded")
        var running: [(Process, Pipe, Pipe)] = []
        for m in h.machines { for _ in 0..<8 { running.append(try m.home.start(["token", "work"])) } }
        var printed: [String] = []
        for (p, out, err) in running {
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let problem = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            #expect(p.terminationStatus == 0, "\(problem)")
            printed.append(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(try await h.server.stat("refreshes_succeeded") - before == 1)
        #expect(try await h.server.stat("refresh_reused") == 0)
        #expect(Set(printed).count == 1, "\(Set(printed).count) different tokens")
        #expect(printed.first != nil && printed.first != "")
    }

    /// A removed member cannot decrypt what is written after its removal; the remover is told
    /// which slots to refresh.
    @Test func aRemovedMemberCannotReadLaterWrites() async throws {
        let h = try await FleetHarness(machines: 2)
        let removed = try h.machines[0].run("fleet", "remove", "m2", "--json")
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout.contains("\"work\""))
        #expect(try h.machines[0].run("refresh", "work").status == 0)
        let identity = try #require(try MachineIdentity.load(from: EncryptedFileStore(paths: h.machines[1].paths)))
        let sealed = try #require(try h.client().get(FleetKeys(fleet: h.fleet).slot(try Slot("work"))))
        let membership = try #require(try MembershipCache.load(h.machines[0].paths))
        #expect(throws: FleetError.self) {
            try SealedCredential.open(
                sealed,
                slot: try Slot("work"),
                fleet: h.fleet,
                membership: membership,
                identity: identity
            )
        }
        let sync = try h.machines[1].run("fleet", "sync", "--json")
        #expect(sync.status == 1 && sync.stdout.contains("fleet_not_member"), "\(sync.stdout)")
    }

    /// A credential for another account, even one a member signed as the next generation (a
    /// member's mistake), is refused, and the local copy stays.
    @Test func aCredentialForAnotherAccountIsRefused() async throws {
        let h = try await FleetHarness(machines: 2)
        let m2 = h.machines[1]
        let other = try await h.server.signIn(h.machines[0].manager(), slot: "other", email: "intruder@example.com")
        let fleet = try h.machines[0].manager().openFleet()
        let (identity, membership) = try fleet.memberIdentity()
        let work = try Slot("work")
        let current = try #require(try fleet.newest(work, identity: identity, membership: membership))
        let sealed = try SealedCredential.seal(
            other,
            slot: work,
            fleet: h.fleet,
            generation: current.generation + 1,
            membership: membership,
            writer: identity,
            machine: "m1"
        )
        try h.client().put(FleetKeys(fleet: h.fleet).slot(try Slot("work")), value: sealed, lease: 0)
        let before = try m2.stored("work")
        let sync = try m2.run("fleet", "sync", "--json")
        #expect(sync.status == 1 && sync.stdout.contains("refused"), "\(sync.stdout)")
        let kept = try m2.stored("work") == before
        #expect(kept, "the local copy changed")
    }

    /// A session that died on every machine (the server revoked it) comes back with one sign-in:
    /// `login` on one machine writes the new credential to the fleet, and the other machine's
    /// next command uses it, with no refresh and no sign-in of its own. Another account cannot be
    /// signed into a shared slot.
    @Test func aNewSignInOnOneMachineRevivesTheSlotEverywhere() async throws {
        let h = try await FleetHarness(machines: 2, refresh: "[refresh]\nlead = 300\nlead-share = 1", lifetime: 100)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        _ = try await h.server.hook(
            "/_test/revoke_family",
            ["refresh_token": try #require(m1.stored("work").tokens.refreshToken)]
        )
        let dead = try m2.run("token", "work", "--json")
        #expect(dead.status != 0, "a revoked session still handed out a token")
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let refreshesBefore = try await h.server.stat("refreshes_succeeded")
        let events = Locked<[SignInEvent]>([])
        let signedIn = try await h.server.signIn(m1.manager(), slot: "work", email: "fleet@example.com") { event in
            if case .shared = event { events.withLock { $0.append(event) } }
        }
        #expect(events.withLock { $0 } == [.shared(.written(fleet: h.fleet))])
        let served = try m2.run("token", "work")
        #expect(served.status == 0, "\(served.stderr)")
        let same = served.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == signedIn.tokens.accessToken
        #expect(same, "m2 does not hand out m1's new sign-in")
        #expect(try await h.server.stat("refreshes_succeeded") == refreshesBefore)
        #expect(try await h.server.stat("refresh_reused") == 0)

        let replaced = try m2.run("login", "work", "--replace", "--json")
        #expect(replaced.status == 1 && replaced.stdout.contains("fleet_slot_shared"), "\(replaced.stdout)")
    }

    /// A personal access token stored in a shared slot on one machine is the slot's credential on
    /// every machine: handed out as it is, never refreshed anywhere.
    @Test func aPersonalAccessTokenIsSharedLikeAnySignIn() async throws {
        let h = try await FleetHarness(machines: 2)
        let m1 = h.machines[0]
        let m2 = h.machines[1]
        let token = try #require(
            try await h.server.hook("/_test/personal_access_token", ["email": "fleet@example.com"])["token"] as? String
        )
        let (status, _, stderr) = try runProcess(
            lanyardBinary(),
            ["login", "work", "--with-access-token"],
            environment: m1.home.environment,
            stdin: Data(token.utf8)
        )
        #expect(status == 0 && stderr.contains("Written to fleet \(h.fleet)"), "\(stderr)")
        let refreshesBefore = try await h.server.stat("refresh_requests")
        // m2's copy is still fresh, so it reads the fleet's new value at its next sync (the agent's
        // watch does the same within seconds).
        let synced = try m2.run("fleet", "sync")
        #expect(synced.status == 0, "\(synced.stderr)")
        let served = try m2.run("token", "work")
        #expect(served.status == 0, "\(served.stderr)")
        let same = served.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == token
        #expect(same, "m2 does not hand out m1's personal access token")
        #expect(try m2.stored("work").isPersonalAccessToken)
        #expect(try Registry(paths: m2.paths).loadInTest().slots[try Slot("work")]?.rotates == false)
        let refreshed = try m2.run("refresh", "work")
        #expect(
            refreshed.status == 0 && refreshed.stdout.contains("does not rotate"),
            "\(refreshed.stdout)\(refreshed.stderr)"
        )
        #expect(try m2.run("fleet", "sync").status == 0)
        #expect(try await h.server.stat("refresh_requests") == refreshesBefore)
    }

    /// etcd holds no token: every key and value under the fleet's prefix, and every file of every
    /// member's data folder (WAL and snapshots), is searched for every token the server issued.
    @Test func etcdNeverSeesAToken() async throws {
        let h = try await FleetHarness(machines: 3, refresh: "[refresh]\nlead = 300\nlead-share = 1", lifetime: 100)
        try await h.server.hook("/_test/config", ["access_token_lifetime": 3600])
        for m in h.machines { #expect(try m.run("token", "work").status == 0) }
        #expect(try h.machines[1].run("refresh", "work").status == 0)
        let tokens = try await h.issuedTokens()
        #expect(tokens.count >= 4)
        let everything = try h.client().range("/", EtcdRangeOptions(prefix: true))
        #expect(!everything.kvs.isEmpty)
        var blobs: [[UInt8]] = everything.kvs.flatMap { [Array($0.key.utf8), $0.value] }
        let fm = FileManager.default
        let dataDirs = h.cluster.memberNames.map { h.cluster.directory + "/members/\($0)/data" }
        for dir in dataDirs {
            let files = fm.enumerator(atPath: dir)?.compactMap { $0 as? String } ?? []
            #expect(!files.isEmpty, "no files under \(dir)")
            for file in files {
                var isDir: ObjCBool = false
                if fm.fileExists(atPath: dir + "/" + file, isDirectory: &isDir), !isDir.boolValue,
                    let data = fm.contents(atPath: dir + "/" + file)
                {
                    blobs.append(Array(data))
                }
            }
        }
        for token in tokens {
            let needle = Array(token.utf8)
            let found = blobs.contains { blob in
                blob.withUnsafeBytes { b in needle.withUnsafeBytes { n in contains(b, n) } }
            }
            #expect(!found, "a token the server issued is in etcd")
        }
    }
}

/// Whether `haystack` holds `needle` (memchr for the first byte, then memcmp: fast enough for
/// etcd's 64 MB WAL files).
private func contains(_ haystack: UnsafeRawBufferPointer, _ needle: UnsafeRawBufferPointer) -> Bool {
    guard let base = haystack.baseAddress, let first = needle.first, needle.count <= haystack.count else {
        return false
    }
    var offset = 0
    while offset + needle.count <= haystack.count {
        guard let hit = memchr(base + offset, Int32(first), haystack.count - offset - needle.count + 1) else {
            return false
        }
        let at = base.distance(to: UnsafeRawPointer(hit))
        if memcmp(base + at, needle.baseAddress!, needle.count) == 0 { return true }
        offset = at + 1
    }
    return false
}
