import Foundation
import LanyardAuth
import LanyardCLI
import LanyardCore
import LanyardIntegrations
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// `lanyard export` / `lanyard import` against the real file store, checked with stock `age`.
@Suite(.serialized) struct BundleTests {
    /// Runs a program; returns status, stdout and stderr.
    @discardableResult
    func sh(_ command: String, stdin: String? = nil) throws -> (Int32, String, String) {
        try runProcess("/bin/sh", ["-c", command], stdin: stdin.map { Data($0.utf8) })
    }

    /// An age identity from stock `age-keygen`: (identity file, public key).
    func keygen(_ dir: String) throws -> (String, String) {
        let file = dir + "/key.txt"
        let (status, _, err) = try sh("age-keygen -o '\(file)'")
        #expect(status == 0)
        let pub = err.components(separatedBy: "Public key: ").last!.trimmingCharacters(in: .whitespacesAndNewlines)
        return (file, pub)
    }

    func token(_ h: CLIHarness, _ slot: String) async -> String { await h.run("token", slot).stdout }

    /// The files an import may change, to show a refused import changed nothing.
    func snapshot(_ h: CLIHarness) -> [Data?] {
        [h.paths.registryFile, h.paths.dataDirectory + "/store.age"].map { FileManager.default.contents(atPath: $0) }
    }

    @Test func x25519ExportOpensWithAgeAndRoundTrips() async throws {
        let source = try await fileStoreHarness()
        try seedFileSlot(source, "alpha")
        try seedFileSlot(source, "beta")
        try seedFileSlot(source, "gamma")
        let (identity, recipient) = try keygen(source.root)
        let bundle = source.root + "/out.bundle"

        let r = await source.run("export", "alpha", "beta", "--to", bundle, "--recipient", recipient, "--json")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.json["slots"] as? [String] == ["alpha", "beta"] && r.json["encryption"] as? String == "x25519")
        #expect(!r.stdout.contains("SECRET") && !r.stderr.contains("SECRET"))
        let attributes = try FileManager.default.attributesOfItem(atPath: bundle)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

        // Stock age opens it; the plaintext is the documented JSON.
        let (status, plain, err) = try sh("age -d -i '\(identity)' '\(bundle)'")
        #expect(status == 0, "\(err)")
        let json = try JSONSerialization.jsonObject(with: Data(plain.utf8)) as? [String: Any] ?? [:]
        #expect(json["version"] as? Int == 1 && json["exported_at"] is String)
        let slots = json["slots"] as? [String: [String: Any]] ?? [:]
        #expect(Set(slots.keys) == ["alpha", "beta"])
        let alphaCredential = slots["alpha"]?["credential"] as? [String: Any]
        #expect((alphaCredential?["tokens"] as? [String: Any])?["access_token"] as? String == "AT-alpha-SECRET")
        #expect((slots["beta"]?["record"] as? [String: Any])?["provider"] as? String == "openai")

        // No overwrite without --force; all slots by default.
        let again = await source.run("export", "--to", bundle, "--recipient", recipient)
        #expect(again.status == 2 && again.stderr.contains("exists; pass --force"))
        #expect(
            await source.run("export", "--to", bundle, "--recipient", recipient, "--recipient", recipient, "--force")
                .status == 0
        )
        let (_, all, _) = try sh("age -d -i '\(identity)' '\(bundle)'")
        #expect(all.contains("\"gamma\""))

        // Round trip into a fresh home, renaming one slot.
        let target = try await fileStoreHarness()
        let imported = await target.run(
            "import",
            bundle,
            "--identity",
            identity,
            "--rename",
            "alpha=work",
            "--rename",
            "gamma=other",
            "--json"
        )
        #expect(imported.status == 0, "\(imported.stderr)")
        let doc = try target.registry.loadInTest()
        #expect(Set(doc.slots.keys.map(\.name)) == ["work", "beta", "other"])
        #expect(doc.slots[try Slot("work")]?.account.email == "alpha@example.com")
        #expect(doc.slots[try Slot("work")]?.backend == .file)
        #expect(await token(target, "work") == "AT-alpha-SECRET\n")
        #expect(await token(target, "beta") == "AT-beta-SECRET\n")
        #expect(await token(target, "other") == "AT-gamma-SECRET\n")

        // A second import would overwrite: refused without a terminal unless --yes.
        let before = snapshot(target)
        let refused = await target.run("import", bundle, "--identity", identity)
        #expect(refused.status == 2 && refused.stderr.contains("without --yes"))
        #expect(snapshot(target) == before)
        let replaced = await target.run("import", bundle, "--identity", identity, "--yes")
        #expect(replaced.status == 0)
        #expect(replaced.stdout.contains("Replaced beta") && replaced.stdout.contains("Imported alpha"))
        // On a terminal it asks; "n" keeps everything.
        target.tty = true
        target.input = ["n"]
        let declined = await target.run("import", bundle, "--identity", identity)
        #expect(declined.status == 1 && declined.stderr.contains("Overwrite the existing slots"))
        target.tty = false

        // Bad renames and a wrong identity are refused before anything is written.
        let snap = snapshot(target)
        #expect(await target.run("import", bundle, "--identity", identity, "--rename", "nope=x", "--yes").status == 2)
        #expect(
            await target.run("import", bundle, "--identity", identity, "--rename", "alpha=beta", "--yes").status == 2
        )
        let (otherIdentity, _) = try keygen(target.root)
        let wrong = await target.run("import", bundle, "--identity", otherIdentity, "--json")
        #expect(
            wrong.status == 1 && (wrong.json["error"] as? [String: Any])?["code"] as? String == "bundle_no_identity"
        )
        let noIdentity = await target.run("import", bundle, "--json")  // asks for a passphrase: none available
        #expect(noIdentity.status == 1)
        #expect(snapshot(target) == snap)
    }

    @Test func tamperedOrTruncatedBundlesChangeNothing() async throws {
        let source = try await fileStoreHarness()
        try seedFileSlot(source, "alpha")
        let (identity, recipient) = try keygen(source.root)
        let bundle = source.root + "/b.age"
        #expect(await source.run("export", "--to", bundle, "--recipient", recipient).status == 0)
        let good = try Data(contentsOf: URL(fileURLWithPath: bundle))

        let target = try await fileStoreHarness()
        try seedFileSlot(target, "alpha", token: "AT-alpha-ORIGINAL")
        let before = snapshot(target)
        var variants: [(String, Data)] = []
        for offset in [good.count - 5, good.count / 2, 40] {
            var bad = good
            bad[offset] ^= 0x01
            variants.append(("flip@\(offset)", bad))
        }
        variants.append(("truncated", good.prefix(good.count - 17)))
        variants.append(("header only", good.prefix(good.count / 3)))
        for (name, bytes) in variants {
            let path = target.root + "/bad.age"
            try bytes.write(to: URL(fileURLWithPath: path))
            let r = await target.run("import", path, "--identity", identity, "--yes", "--json")
            #expect(r.status != 0, "\(name)")
            let code = (r.json["error"] as? [String: Any])?["code"] as? String
            #expect(code == "bundle_corrupt" || code == "bundle_no_identity", "\(name): \(r.stdout)")
            #expect(!r.stdout.contains("SECRET"))
            #expect(snapshot(target) == before, "\(name) changed nothing")
        }
        #expect(await token(target, "alpha") == "AT-alpha-ORIGINAL\n")
    }

    @Test func passphraseBundleOpensWithStockAgeThroughAPty() async throws {
        let source = try await fileStoreHarness()
        try seedFileSlot(source, "alpha")
        try seedFileSlot(source, "beta")
        let passFile = source.root + "/pass"
        try "bundle passphrase\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        chmod(passFile, 0o600)
        source.extraEnvironment["LANYARD_PASSPHRASE_FILE"] = passFile
        let bundle = source.root + "/pass.age"
        let r = await source.run("export", "--to", bundle)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "Exported 2 slots (alpha, beta) to \(bundle).\n")
        #expect(!r.stdout.contains("bundle passphrase") && !r.stderr.contains("bundle passphrase"))

        // age reads passphrases only from a terminal: give it one with script(1).
        let out = source.root + "/plain.json"
        let (status, _, err) = try sh(
            "script -qec \"age -d -o '\(out)' '\(bundle)'\" /dev/null < '\(passFile)' > /dev/null"
        )
        #expect(status == 0, "\(err)")
        let json =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out))) as? [String: Any] ?? [:]
        #expect(Set((json["slots"] as? [String: Any] ?? [:]).keys) == ["alpha", "beta"])

        let target = try await fileStoreHarness()
        target.extraEnvironment["LANYARD_PASSPHRASE_FILE"] = passFile
        let imported = await target.run("import", bundle, "--rename", "beta=b2")
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(await token(target, "alpha") == "AT-alpha-SECRET\n")
        #expect(await token(target, "b2") == "AT-beta-SECRET\n")

        let other = try await fileStoreHarness()
        try "not the passphrase\n".write(toFile: other.root + "/wrong", atomically: true, encoding: .utf8)
        chmod(other.root + "/wrong", 0o600)
        other.extraEnvironment["LANYARD_PASSPHRASE_FILE"] = other.root + "/wrong"
        let wrong = await other.run("import", bundle, "--json")
        #expect(wrong.status == 1 && (wrong.json["error"] as? [String: Any])?["code"] as? String == "wrong_passphrase")
        let wrongMessage = (wrong.json["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(
            wrongMessage.contains("from LANYARD_PASSPHRASE_FILE \(other.root)/wrong"),
            "the file is named: \(wrongMessage)"
        )
        #expect(!wrongMessage.contains("not the passphrase"), "its content is not")
        #expect(try other.registry.loadInTest().slots.isEmpty)
    }

    @Test func exportSkipsSlotsWithoutACredential() async throws {
        let h = try await fileStoreHarness()
        try seedFileSlot(h, "alpha")
        try h.registry.updateInTest { $0.slots[try Slot("ghost")] = SlotRecord(provider: "openai", backend: .file) }
        let (_, recipient) = try keygen(h.root)
        let all = await h.run("export", "--to", h.root + "/all.age", "--recipient", recipient, "--json")
        #expect(
            all.status == 0 && all.json["slots"] as? [String] == ["alpha"]
                && all.json["skipped"] as? [String] == ["ghost"]
        )
        let named = await h.run("export", "ghost", "--to", h.root + "/ghost.age", "--recipient", recipient)
        #expect(named.status == 3, "a named slot without a credential is an error")
        #expect(await h.run("export", "nobody", "--to", h.root + "/n.age", "--recipient", recipient).status == 3)
        #expect(await h.run("export", "--to", h.root + "/x.age", "--recipient", "age1notakey").status == 2)
        #expect(await h.run("export", "alpha").status == 2, "--to is required")
        #expect(!FileManager.default.fileExists(atPath: h.root + "/ghost.age"))
    }

    // MARK: Imports of many slots: linear, and all or nothing

    /// A bundle entry for `name` (`provider` for the credential; the record's may differ).
    func entry(_ name: String, provider: String = "openai", recordProvider: String? = nil) -> ExportBundle.Entry {
        let account = AccountInfo(email: "\(name)@example.com", accountID: "acct-\(name)")
        let credential = Credential(
            provider: provider,
            tokens: TokenSet(
                accessToken: "AT-\(name)-SECRET",
                refreshToken: "RT-\(name)-SECRET",
                expiresAt: Date(timeIntervalSince1970: 4_000_000_000)
            ),
            lastRefresh: Date(timeIntervalSince1970: 1_799_000_000),
            account: account
        )
        let record = SlotRecord(
            provider: recordProvider ?? provider,
            backend: .file,
            account: account,
            state: .signedIn(expiresAt: credential.tokens.expiresAt),
            createdAt: Date(timeIntervalSince1970: 1_799_000_000)
        )
        return ExportBundle.Entry(credential: credential, record: record)
    }

    /// Entries named s-00000, s-00001, ….
    func entries(_ count: Int) throws -> [Slot: ExportBundle.Entry] {
        var entries: [Slot: ExportBundle.Entry] = [:]
        for i in 0..<count {
            let name = "s-" + String(repeating: "0", count: 5 - String(i).count) + String(i)
            entries[try Slot(name)] = entry(name)
        }
        return entries
    }

    /// Seals `entries` as a bundle with stock age (the plaintext on its stdin) to `recipient`.
    func sealedBundle(_ entries: [Slot: ExportBundle.Entry], to recipient: String, at path: String) throws {
        let plain = ExportBundle(exportedAt: Date(timeIntervalSince1970: 1_800_000_000), slots: entries).jsonData(
            pretty: true
        )
        let (status, _, err) = try runProcess("/usr/bin/age", ["-r", recipient, "-o", path], stdin: plain)
        try #require(status == 0, "\(err)")
    }

    @Test func importCallsEachStoreOnceAndWritesTheRegistryOnce() async throws {
        let h = CLIHarness()
        try h.addSlot("s-00003")  // one slot the import replaces
        let registryBefore = FileManager.default.contents(atPath: h.paths.registryFile)
        let counting = CountingStore(h.store)
        let manager = AccountManager(
            paths: h.paths,
            config: LanyardConfig(),
            openStore: { _, _ in counting },
            transport: URLSessionTransport()
        )
        let imported = try manager.importSlots(try entries(60))
        #expect(imported.count == 60 && imported.filter(\.replaced).map(\.slot.name) == ["s-00003"])
        #expect(counting.putAlls == 1 && counting.puts == 0, "one batch write, no slot-by-slot puts (\(counting.puts))")
        #expect(counting.stages == 1, "asked once whether it can stage (the in-memory store cannot)")
        // The registry's previous generation is the one from before: it was written once.
        #expect(FileManager.default.contents(atPath: h.paths.registryFile + ".prev") == registryBefore)
        #expect(try h.registry.loadInTest().slots.count == 60)
        #expect(try h.store.list().count == 60)
    }

    @Test func aFailedItemByItemImportLeavesTheRegistryAndTheStoreAsTheyWere() async throws {
        let h = CLIHarness()
        try h.addSlot("s-00003")
        let registryBefore = FileManager.default.contents(atPath: h.paths.registryFile)
        let counting = CountingStore(h.store)
        counting.failOnPut = 10  // the keyring fails in the middle of the import
        let manager = AccountManager(
            paths: h.paths,
            config: LanyardConfig(),
            openStore: { _, _ in counting },
            transport: URLSessionTransport()
        )
        #expect(throws: StoreError.self) { try manager.importSlots(try entries(20)) }
        #expect(FileManager.default.contents(atPath: h.paths.registryFile) == registryBefore)
        #expect(try h.store.list().map(\.name) == ["s-00003"], "the items the import added are removed again")
        #expect(
            try h.store.get(try Slot("s-00003")).tokens.accessToken == "AT-s-00003-SECRET",
            "and the one it replaced is put back"
        )
    }

    @Test func importIntoTheFileStoreWritesTheStoreOnceAndTheRegistryOnce() async throws {
        let h = try await fileStoreHarness()
        try seedFileSlot(h, "keep")
        try seedFileSlot(h, "s-00002", token: "AT-OLD")
        let (identity, recipient) = try keygen(h.root)
        let bundle = h.root + "/many.age"
        try sealedBundle(try entries(200), to: recipient, at: bundle)
        let storePath = h.paths.dataDirectory + "/store.age"
        let storeBefore = FileManager.default.contents(atPath: storePath)
        let registryBefore = FileManager.default.contents(atPath: h.paths.registryFile)

        let r = await h.run("import", bundle, "--identity", identity, "--yes", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        // Each file's previous generation is the one from before the import: one write each.
        #expect(FileManager.default.contents(atPath: storePath + ".prev") == storeBefore)
        #expect(FileManager.default.contents(atPath: h.paths.registryFile + ".prev") == registryBefore)
        #expect(try h.registry.loadInTest().slots.count == 201)
        #expect(await token(h, "s-00002") == "AT-s-00002-SECRET\n")
        #expect(await token(h, "s-00199") == "AT-s-00199-SECRET\n")
        #expect(await token(h, "keep") == "AT-keep-SECRET\n")
        #expect(!FileManager.default.fileExists(atPath: h.paths.incomingRegistryFile))
        #expect(!FileManager.default.fileExists(atPath: h.paths.incomingStoreFile))
    }

    /// The real binary importing a large bundle into the file store, killed: on entering each of
    /// its rename(2) calls in turn (strace), which covers every step between two durable writes,
    /// then at random moments. After each kill the registry lists every slot of the bundle or
    /// none, and `lanyard doctor` finds the registry and the store in agreement.
    @Test func killedFileStoreImportLeavesAllSlotsOrNone() async throws {
        let count = 1500
        let setup = try await fileStoreHarness()
        let (identity, recipient) = try keygen(setup.root)
        let bundle = setup.root + "/big.age"
        let bundled = try entries(count)
        try sealedBundle(bundled, to: recipient, at: bundle)
        let names = Set(bundled.keys)

        /// A home with one slot of its own; the environment a separate lanyard runs with (no
        /// session bus: only the file store counts, not the test keyring other suites share).
        func home() async throws -> (CLIHarness, [String: String]) {
            let h = try await fileStoreHarness()
            try seedFileSlot(h, "keep")
            var environment = h.environment
            environment["DBUS_SESSION_BUS_ADDRESS"] = nil
            environment["PATH"] = "/usr/bin:/bin"
            return (h, environment)
        }
        let importArgs = ["import", bundle, "--identity", identity, "--yes"]

        /// Whatever the kill left: all or nothing, and doctor agrees.
        func check(_ h: CLIHarness, _ environment: [String: String], _ round: String) async throws -> Int {
            let (status, out, _) = try runProcess(lanyardBinary(), ["doctor", "--json"], environment: environment)
            let problems =
                ((try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any])?["problems"] as? [String]
                ?? ["?"]
            #expect(
                status == 0,
                "\(round): doctor exit \(status), \(problems.count) problems, first: \(problems.first ?? "")"
            )
            let listed = try h.registry.loadInTest().slots.keys.filter { names.contains($0) }.count
            #expect(listed == 0 || listed == count, "\(round): \(listed) of \(count) slots listed")
            if listed == count { #expect(await token(h, "s-01234") == "AT-s-01234-SECRET\n", "\(round)") }
            #expect(await token(h, "keep") == "AT-keep-SECRET\n", "\(round)")
            return listed
        }

        var outcomes: [Int] = []
        var completed = false
        for n in 1...30 where !completed {
            let (h, environment) = try await home()
            let (status, _, _) = try runProcess(
                "/usr/bin/strace",
                [
                    "-f", "-qq", "-o", "/dev/null", "-e", "trace=rename",
                    "-e", "inject=rename:signal=KILL:when=\(n)", lanyardBinary(),
                ] + importArgs,
                environment: environment
            )
            completed = status == 0
            outcomes.append(
                try await check(
                    h,
                    environment,
                    completed ? "not killed (rename #\(n) never came)" : "killed at rename #\(n)"
                )
            )
        }
        #expect(completed, "the import finished once strace ran out of renames to kill it at")
        #expect(outcomes.contains(0) && outcomes.contains(count), "kills before and after the commit: \(outcomes)")

        // Random moments within how long one import takes here.
        let (timing, timingEnvironment) = try await home()
        let started = Date()
        let (status, _, err) = try runProcess(lanyardBinary(), importArgs, environment: timingEnvironment)
        #expect(status == 0, "\(err.prefix(300))")
        let duration = Date().timeIntervalSince(started)
        _ = try await check(timing, timingEnvironment, "unkilled")
        for round in 0..<4 {
            let (h, environment) = try await home()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: lanyardBinary())
            process.arguments = importArgs
            process.environment = environment
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32(Double.random(in: 0...duration) * 1_000_000))  // where to kill it, not a wait for anything
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            _ = try await check(h, environment, "random kill \(round)")
        }
    }

    @Test func importIntoTheKeyringRegistersEverySlotInOneRegistryWrite() async throws {
        try requireTestKeyring()
        let h = CLIHarness()
        h.realStores = true
        try FileManager.default.createDirectory(atPath: h.paths.configDirectory, withIntermediateDirectories: true)
        try "[store]\nbackend = secret-service\n".write(toFile: h.paths.configFile, atomically: true, encoding: .utf8)
        let p = uniquePrefix()
        var bundled: [Slot: ExportBundle.Entry] = [:]
        for i in 0..<25 { bundled[try Slot("\(p)-\(i)")] = entry("\(p)-\(i)") }
        let keyring = SecretServiceStore(timeout: 5)
        defer { for slot in bundled.keys { try? keyring.delete(slot) } }
        let (identity, recipient) = try keygen(h.root)
        let bundle = h.root + "/keyring.age"
        try sealedBundle(bundled, to: recipient, at: bundle)

        let r = await h.run("import", bundle, "--identity", identity, "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let doc = try h.registry.loadInTest()
        #expect(doc.slots.count == 25 && doc.slots.values.allSatisfy { $0.backend == .secretService })
        #expect(
            !FileManager.default.fileExists(atPath: h.paths.registryFile + ".prev"),
            "the registry was written once"
        )
        for slot in bundled.keys { #expect(try keyring.get(slot) == bundled[slot]?.credential) }
        #expect(await h.doctorProblemsOfThisHome() == [])
    }

    // MARK: What an import refuses

    @Test func importRefusesARecordWhoseProviderIsNotItsCredentials() async throws {
        let h = try await fileStoreHarness()
        try seedFileSlot(h, "keep")
        let (identity, recipient) = try keygen(h.root)
        let bundle = h.root + "/mismatch.age"
        try sealedBundle(
            [
                try Slot("alpha"): entry("alpha"),
                try Slot("beta"): entry("beta", provider: "openai", recordProvider: "github"),
            ],
            to: recipient,
            at: bundle
        )
        let before = snapshot(h)
        let r = await h.run("import", bundle, "--identity", identity, "--yes", "--json")
        #expect(r.status == 1)
        let error = r.json["error"] as? [String: Any]
        #expect(error?["code"] as? String == "bundle_provider_mismatch")
        let message = error?["message"] as? String ?? ""
        #expect(
            message.contains("slot beta") && message.contains("\"github\"") && message.contains("\"openai\"")
                && message.contains("nothing was imported"),
            "\(message)"
        )
        #expect(snapshot(h) == before)
        #expect(try h.registry.loadInTest().slots.keys.map(\.name) == ["keep"])
    }

    @Test func importRefusesAProviderConfigDoesNotKnow() async throws {
        let h = try await fileStoreHarness()
        let (identity, recipient) = try keygen(h.root)
        let bundle = h.root + "/unknown.age"
        try sealedBundle(
            [try Slot("alpha"): entry("alpha"), try Slot("gamma"): entry("gamma", provider: "acme\u{1B}[31m")],
            to: recipient,
            at: bundle
        )
        let before = snapshot(h)
        let r = await h.run("import", bundle, "--identity", identity, "--yes", "--json")
        #expect(r.status == 1)
        let error = r.json["error"] as? [String: Any]
        #expect(error?["code"] as? String == "bundle_unknown_provider")
        let message = error?["message"] as? String ?? ""
        #expect(
            message.contains("slot gamma") && message.contains("acme\\u{1B}[31m")
                && message.contains("configured: github, openai"),
            "\(message)"
        )
        #expect(!message.contains("\u{1B}"), "text from the bundle is escaped")
        #expect(snapshot(h) == before)
        #expect(try h.registry.loadInTest().slots.isEmpty)
        // In text mode too.
        let text = await h.run("import", bundle, "--identity", identity, "--yes")
        #expect(text.status == 1 && text.stderr.contains("gamma") && !text.stderr.contains("\u{1B}"))
    }

    /// A bundle is a file from outside: a token with a control character, or an account name a
    /// terminal would act on, refuses the whole import before anything is written.
    @Test func importRefusesHostileTokensAndNames() async throws {
        let h = try await fileStoreHarness()
        let (identity, recipient) = try keygen(h.root)
        var badToken = entry("beta")
        badToken.credential.tokens.refreshToken = "RT\u{1B}]52;c;x\u{07}"
        var badName = entry("gamma")
        badName.record.account.email = "g\u{1B}[2J@example.com"
        for (index, bad) in [("beta", badToken), ("gamma", badName)].enumerated() {
            let bundle = h.root + "/hostile-\(index).age"
            try sealedBundle([try Slot("alpha"): entry("alpha"), try Slot(bad.0): bad.1], to: recipient, at: bundle)
            let before = snapshot(h)
            let r = await h.run("import", bundle, "--identity", identity, "--yes", "--json")
            #expect(r.status == 1, "\(r.stdout)")
            #expect(!r.stdout.contains("\u{1B}") && !r.stdout.contains("RT"), "\(r.stdout)")
            #expect(snapshot(h) == before)
            #expect(try h.registry.loadInTest().slots.isEmpty)
        }
    }

    @Test func importOfAnEmptyBundleSaysSo() async throws {
        let h = try await fileStoreHarness()
        let (identity, recipient) = try keygen(h.root)
        let bundle = h.root + "/empty.age"
        try sealedBundle([:], to: recipient, at: bundle)
        let before = snapshot(h)
        let r = await h.run("import", bundle, "--identity", identity, "--json")
        #expect(r.status == 1)
        let error = r.json["error"] as? [String: Any]
        #expect(error?["code"] as? String == "bundle_empty")
        let message = error?["message"] as? String ?? ""
        #expect(message.contains("holds no slots"), "\(message)")
        #expect(snapshot(h) == before)
    }

    @Test func aWrongIdentityIsNamedNotAskedFor() async throws {
        let h = try await fileStoreHarness()
        try seedFileSlot(h, "alpha")
        let (_, recipient) = try keygen(h.root)
        let bundle = h.root + "/x.age"
        #expect(await h.run("export", "--to", bundle, "--recipient", recipient).status == 0)
        try FileManager.default.createDirectory(atPath: h.root + "/other", withIntermediateDirectories: true)
        let (otherIdentity, _) = try keygen(h.root + "/other")
        let wrong = await h.run("import", bundle, "--identity", otherIdentity, "--json")
        let error = wrong.json["error"] as? [String: Any]
        #expect(wrong.status == 1 && error?["code"] as? String == "bundle_no_identity")
        let message = error?["message"] as? String ?? ""
        #expect(message.contains("the identity in \(otherIdentity) does not open"), "\(message)")
        #expect(!message.contains("pass --identity"), "\(message)")

        // A passphrase bundle given an identity: leave the identity out.
        let passFile = h.root + "/pass"
        try "bundle passphrase\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        chmod(passFile, 0o600)
        h.extraEnvironment["LANYARD_PASSPHRASE_FILE"] = passFile
        let passBundle = h.root + "/p.age"
        #expect(await h.run("export", "--to", passBundle).status == 0)
        let scrypt = await h.run("import", passBundle, "--identity", otherIdentity, "--json")
        let scryptMessage = (scrypt.json["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(
            scrypt.status == 1 && scryptMessage.contains("passphrase-encrypted: leave out --identity"),
            "\(scryptMessage)"
        )
    }
}

/// A store that counts the calls an import makes, over another store; `failOnPut` makes the Nth
/// put (slot by slot, or inside putAll, which goes item by item) fail.
final class CountingStore: CredentialStore, @unchecked Sendable {
    let inner: any CredentialStore
    private let lock = NSLock()
    private var _puts = 0, _putAlls = 0, _stages = 0, batchPuts = 0, inBatch = false
    var failOnPut: Int?
    var puts: Int { lock.withLock { _puts } }
    var putAlls: Int { lock.withLock { _putAlls } }
    var stages: Int { lock.withLock { _stages } }

    init(_ inner: any CredentialStore) { self.inner = inner }

    var kind: BackendKind { inner.kind }
    func get(_ slot: Slot) throws -> Credential { try inner.get(slot) }
    func put(_ credential: Credential, for slot: Slot) throws {
        let fail = lock.withLock { () -> Bool in
            if inBatch { batchPuts += 1 } else { _puts += 1 }
            return failOnPut == (inBatch ? batchPuts : _puts)
        }
        if fail { throw StoreError.timedOut(backend: "test", operation: "put", seconds: 1) }
        try inner.put(credential, for: slot)
    }
    func putAll(_ credentials: [Slot: Credential]) throws {
        lock.withLock {
            _putAlls += 1
            inBatch = true
        }
        defer { lock.withLock { inBatch = false } }
        try putAllItemByItem(credentials)
    }
    func stage(_ credentials: [Slot: Credential], in transaction: RegistryTransaction) throws -> Bool {
        lock.withLock { _stages += 1 }
        return try inner.stage(credentials, in: transaction)
    }
    func delete(_ slot: Slot) throws { try inner.delete(slot) }
    func list() throws -> [Slot] { try inner.list() }
    func health() -> StoreHealth { inner.health() }
}
