import Foundation
import LanyardAuth
import LanyardCLI
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

/// Commands against the real gnome-keyring of the test session and the real file store.
@Suite(.serialized) struct RealBackendCommandTests {
    func harness() throws -> CLIHarness {
        try requireTestKeyring()
        let h = CLIHarness()
        h.realStores = true
        return h
    }

    func credential(_ token: String, email: String) -> Credential {
        Credential(
            provider: "openai",
            tokens: TokenSet(
                accessToken: token,
                refreshToken: "rt-" + token,
                expiresAt: Date(timeIntervalSince1970: 4_000_000_000)
            ),
            lastRefresh: Date(timeIntervalSince1970: 1_799_000_000),
            account: AccountInfo(email: email, accountID: "acct-" + email)
        )
    }

    /// Adds a slot with its credential in `backend`.
    func seed(_ h: CLIHarness, _ name: String, backend: BackendKind) throws -> Slot {
        let slot = try Slot(name)
        let cred = credential("AT-\(name)", email: "\(name)@example.com")
        try StoreOpeners.system(backend, LanyardConfig(), h.paths, false).put(cred, for: slot)
        try h.registry.update { doc in
            doc.slots[slot] = SlotRecord(
                provider: "openai",
                backend: backend,
                account: cred.account,
                state: .signedIn(expiresAt: cred.tokens.expiresAt)
            )
        }
        return slot
    }

    /// A slot's whole life with its credential in the keyring of this run (gnome-keyring, or
    /// KeePassXC under scripts/with-keepassxc.sh, or KWallet under scripts/with-kwallet.sh): login,
    /// token, refresh, rename, migrate both ways, doctor and logout, each as the command runs it,
    /// against the ChatGPT emulator.
    @Test func aSlotsWholeLifeInTheKeyring() async throws {
        try requireTestKeyring()
        let rig = try await LoginRig(backend: "secret-service")
        let h = rig.h
        let login = await h.run(
            ["login", "life", "--json"],
            sleeper: rig.approving(at: 2, ["email": "life@example.com"])
        )
        #expect(login.status == 0, "\(login.stderr)")
        let slot = try Slot("life")
        let renamed = try Slot("life2")
        defer { for s in [slot, renamed] { try? SecretServiceStore(timeout: 5).delete(s) } }
        #expect(try h.registry.loadInTest().slots[slot]?.backend == .secretService)
        let first = try SecretServiceStore(timeout: 5).get(slot)

        let token = await h.runDetached("token", "life")
        #expect(token.status == 0 && token.stdout == first.tokens.accessToken + "\n")
        let refresh = await h.runDetached("refresh", "life")
        #expect(refresh.status == 0, "\(refresh.stderr)")
        let refreshed = try SecretServiceStore(timeout: 5).get(slot)
        #expect(refreshed.tokens.refreshToken != first.tokens.refreshToken)
        #expect(try await rig.emulator.stat("refresh_reused") == 0)

        #expect(await h.runDetached("rename", "life", "life2").status == 0)
        #expect(try SecretServiceStore(timeout: 5).get(renamed) == refreshed)
        #expect(try !SecretServiceStore(timeout: 5).list().contains(slot))

        #expect(await h.runDetached("store", "migrate", "--to", "file", "life2").status == 0)
        #expect(try h.fileStore.get(renamed) == refreshed)
        #expect(try !SecretServiceStore(timeout: 5).list().contains(renamed))
        #expect(await h.runDetached("store", "migrate", "--to", "secret-service", "life2").status == 0)
        #expect(try SecretServiceStore(timeout: 5).get(renamed) == refreshed)

        #expect(await h.doctorProblemsOfThisHome() == [])
        let doctor = await h.run("doctor", "--json")
        let provider = testKeyringProviderName
        #expect(
            doctor.stdout.contains(#""provider" : "\#(provider)""#)
                || doctor.stdout.contains(#""provider": "\#(provider)""#),
            "\(doctor.stdout)"
        )

        #expect(await h.runDetached("logout", "life2").status == 0)
        #expect(try !SecretServiceStore(timeout: 5).list().contains(renamed))
    }

    @Test func tokenReadsTheKeyringAndFileStore() async throws {
        let h = try harness()
        let p = uniquePrefix()
        #expect(await h.run("store", "init", "--no-passphrase").status == 0)
        let a = try seed(h, p + "-ss", backend: .secretService)
        let b = try seed(h, p + "-file", backend: .file)
        #expect(await h.run("token", a.name).stdout == "AT-\(a.name)\n")
        #expect(await h.run("token", b.name).stdout == "AT-\(b.name)\n")
        let j = await h.run("token", a.name, "--json")
        #expect(j.json["access_token"] as? String == "AT-\(a.name)")
        _ = try StoreOpeners.system(.secretService, LanyardConfig(), h.paths, false).deleteInTest(a)
        let missing = await h.run("token", a.name)
        #expect(missing.status == 3)
        #expect(missing.stderr.contains("not signed in"))
    }

    /// In a keyring of its own (a child process in its own D-Bus session): `--repair` adopts every
    /// item the registry does not list, and on the shared test keyring those are the items of the
    /// tests running beside this one, which they delete as it works.
    @Test func doctorFindsAndRepairsMismatches() async throws {
        try await inProcessOfItsOwn("RealBackendCommandTests/doctorFindsAndRepairsMismatches", ownKeyring: true) {
            let h = try harness()
            let p = uniquePrefix()
            let kept = try seed(h, p + "-ok", backend: .secretService)
            let orphan = try seed(h, p + "-orphan", backend: .secretService)
            let ghost = try seed(h, p + "-ghost", backend: .secretService)
            // An orphan whose refresh token was dropped after a permanent refusal.
            let dead = try Slot(p + "-dead")
            var deadCredential = credential("AT-\(dead.name)", email: "\(dead.name)@example.com")
            deadCredential.tokens.refreshToken = nil
            try StoreOpeners.system(.secretService, LanyardConfig(), h.paths, false).putInTest(
                deadCredential,
                for: dead
            )
            try h.registry.updateInTest { $0.slots[orphan] = nil }
            try StoreOpeners.system(.secretService, LanyardConfig(), h.paths, false).deleteInTest(ghost)

            let report = await h.run("doctor", "--json")
            #expect(report.status == 1)
            let problems = report.json["problems"] as? [String] ?? []
            #expect(problems.contains("\(ghost.name) has no stored credential"))
            #expect(problems.contains("Secret Service holds \(orphan.name), which the registry does not list"))
            let backends = report.json["backends"] as? [[String: Any]] ?? []
            let ss = backends.first { $0["backend"] as? String == "secret-service" }
            #expect(
                ss?["reachable"] as? Bool == true && ss?["locked"] as? Bool == false
                    && ss?["persistent"] as? Bool == true
            )

            let human = await h.run("doctor")
            #expect(human.stdout.contains("Run `lanyard doctor --repair`"))

            let repair = await h.run("doctor", "--repair")
            #expect(repair.status == 0, "\(repair.stdout)")
            #expect(repair.stdout.contains("repaired: added \(orphan.name) from Secret Service"))
            let doc = try h.registry.loadInTest()
            #expect(doc.slots[orphan]?.account.email == "\(orphan.name)@example.com")
            if case .signedIn = doc.slots[orphan]?.state {} else { Issue.record("\(orphan.name) should be signed in") }
            #expect(
                doc.slots[dead]?.state == .reauthenticationRequired,
                "a credential without a refresh token must sign in again"
            )
            #expect(repair.stdout.contains("repaired: added \(dead.name) from Secret Service (it must sign in again)"))
            #expect(doc.slots[ghost]?.state == .signedOut)
            #expect(doc.slots[kept] != nil)
            #expect(await h.run("doctor").status == 0)
            for slot in [kept, orphan, dead] {
                try StoreOpeners.system(.secretService, LanyardConfig(), h.paths, false).deleteInTest(slot)
            }
        }
    }

    @Test func migrateBothWays() async throws {
        let h = try harness()
        let p = uniquePrefix()
        #expect(await h.run("store", "init", "--no-passphrase").status == 0)
        let slots = try (0..<3).map { try seed(h, "\(p)-\($0)", backend: .secretService) }
        let dry = await h.run("store", "migrate", "--to", "file", "--dry-run", "--json")
        #expect(
            (dry.json["steps"] as? [[String: Any]])?.allSatisfy { $0["outcome"] as? String == "would-move" } == true
        )
        #expect(try h.registry.loadInTest().slots.values.allSatisfy { $0.backend == .secretService })

        let toFile = await h.run("store", "migrate", "--to", "file")
        #expect(toFile.status == 0, "\(toFile.stderr)")
        let ss = try StoreOpeners.system(.secretService, LanyardConfig(), h.paths, false)
        let file = try StoreOpeners.system(.file, LanyardConfig(), h.paths, false)
        for slot in slots {
            #expect(try file.getInTest(slot).tokens.accessToken == "AT-\(slot.name)")
            #expect(throws: StoreError.notFound(slot: slot)) { try ss.get(slot) }
            #expect(try h.registry.loadInTest().slots[slot]?.backend == .file)
        }
        let back = await h.run("store", "migrate", "--to", "secret-service", slots[0].name, "--json")
        #expect(back.status == 0)
        #expect(try ss.getInTest(slots[0]).tokens.accessToken == "AT-\(slots[0].name)")
        #expect(try h.registry.loadInTest().slots[slots[0]]?.backend == .secretService)
        #expect(try file.listInTest() == Array(slots.dropFirst()))
        try ss.deleteInTest(slots[0])
    }

    /// kill -9 at varying points of a migration: every slot stays readable from the backend the
    /// registry names or from the other one.
    @Test func killedMigrationLosesNothing() async throws {
        let h = try harness()
        let p = uniquePrefix()
        #expect(await h.run("store", "init", "--no-passphrase").status == 0)
        let slots = try (0..<12).map { try seed(h, "\(p)-\($0)", backend: .secretService) }
        let ss = try StoreOpeners.system(.secretService, LanyardConfig(), h.paths, false)
        let file = try StoreOpeners.system(.file, LanyardConfig(), h.paths, false)
        var environment = h.environment
        environment["PATH"] = "/usr/bin:/bin"
        for (round, target) in ["file", "secret-service", "file", "secret-service"].enumerated() {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: lanyardBinary())
            process.arguments = ["store", "migrate", "--to", target]
            process.environment = environment
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            // Let a few slots land, then kill it at a varying moment inside the next one.
            var lines = 0
            while lines < round + 1, let chunk = try out.fileHandleForReading.read(upToCount: 256), !chunk.isEmpty {
                lines += chunk.filter { $0 == 0x0a }.count
            }
            usleep(UInt32(500 * round))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let doc = try h.registry.loadInTest()
            for slot in slots {
                let named = doc.slots[slot]!.backend == .file ? file : ss
                let other = doc.slots[slot]!.backend == .file ? ss : file
                let found = (try? named.getInTest(slot)) ?? (try? other.get(slot))
                #expect(found?.tokens.accessToken == "AT-\(slot.name)", "round \(round): \(slot.name)")
            }
        }
        #expect(await h.run("store", "migrate", "--to", "file").status == 0)
        for slot in slots { #expect(try file.getInTest(slot).tokens.accessToken == "AT-\(slot.name)") }
    }

    /// (The fallback to the file when no keyring answers is tested with `login` in a process
    /// without a bus, since libsecret reads the process environment.)
    @Test func autoBackendPrefersTheKeyring() async throws {
        let h = try harness()
        #expect(try h.accountManager().backendForNewSlot() == .secretService)
    }
}
