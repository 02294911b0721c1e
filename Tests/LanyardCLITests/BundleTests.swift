import Foundation
import LanyardTestSupport
import Testing
@testable import LanyardCLI
@testable import LanyardCore
@testable import LanyardStore

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

    func token(_ h: CLIHarness, _ slot: String) -> String { h.run("token", slot).stdout }

    /// The files an import may change, to show a refused import changed nothing.
    func snapshot(_ h: CLIHarness) -> [Data?] {
        [h.paths.registryFile, h.paths.dataDirectory + "/store.age"].map { FileManager.default.contents(atPath: $0) }
    }

    @Test func x25519ExportOpensWithAgeAndRoundTrips() throws {
        let source = try fileStoreHarness()
        try seedFileSlot(source, "alpha")
        try seedFileSlot(source, "beta")
        try seedFileSlot(source, "gamma")
        let (identity, recipient) = try keygen(source.root)
        let bundle = source.root + "/out.bundle"

        let r = source.run("export", "alpha", "beta", "--to", bundle, "--recipient", recipient, "--json")
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
        let again = source.run("export", "--to", bundle, "--recipient", recipient)
        #expect(again.status == 2 && again.stderr.contains("exists; pass --force"))
        #expect(source.run("export", "--to", bundle, "--recipient", recipient, "--recipient", recipient, "--force").status == 0)
        let (_, all, _) = try sh("age -d -i '\(identity)' '\(bundle)'")
        #expect(all.contains("\"gamma\""))

        // Round trip into a fresh home, renaming one slot.
        let target = try fileStoreHarness()
        let imported = target.run("import", bundle, "--identity", identity, "--rename", "alpha=work", "--rename", "gamma=other", "--json")
        #expect(imported.status == 0, "\(imported.stderr)")
        let doc = try target.registry.load()
        #expect(Set(doc.slots.keys.map(\.name)) == ["work", "beta", "other"])
        #expect(doc.slots[try Slot("work")]?.account.email == "alpha@example.com")
        #expect(doc.slots[try Slot("work")]?.backend == .file)
        #expect(token(target, "work") == "AT-alpha-SECRET\n")
        #expect(token(target, "beta") == "AT-beta-SECRET\n")
        #expect(token(target, "other") == "AT-gamma-SECRET\n")

        // A second import would overwrite: refused without a terminal unless --yes.
        let before = snapshot(target)
        let refused = target.run("import", bundle, "--identity", identity)
        #expect(refused.status == 2 && refused.stderr.contains("without --yes"))
        #expect(snapshot(target) == before)
        let replaced = target.run("import", bundle, "--identity", identity, "--yes")
        #expect(replaced.status == 0)
        #expect(replaced.stdout.contains("Replaced beta") && replaced.stdout.contains("Imported alpha"))
        // On a terminal it asks; "n" keeps everything.
        target.tty = true
        target.input = ["n"]
        let declined = target.run("import", bundle, "--identity", identity)
        #expect(declined.status == 130 && declined.stderr.contains("Overwrite the existing slots"))
        target.tty = false

        // Bad renames and a wrong identity are refused before anything is written.
        let snap = snapshot(target)
        #expect(target.run("import", bundle, "--identity", identity, "--rename", "nope=x", "--yes").status == 2)
        #expect(target.run("import", bundle, "--identity", identity, "--rename", "alpha=beta", "--yes").status == 2)
        let (otherIdentity, _) = try keygen(target.root)
        let wrong = target.run("import", bundle, "--identity", otherIdentity, "--json")
        #expect(wrong.status == 1 && (wrong.json["error"] as? [String: Any])?["code"] as? String == "bundle_no_identity")
        let noIdentity = target.run("import", bundle, "--json")  // asks for a passphrase: none available
        #expect(noIdentity.status == 1)
        #expect(snapshot(target) == snap)
    }

    @Test func tamperedOrTruncatedBundlesChangeNothing() throws {
        let source = try fileStoreHarness()
        try seedFileSlot(source, "alpha")
        let (identity, recipient) = try keygen(source.root)
        let bundle = source.root + "/b.age"
        #expect(source.run("export", "--to", bundle, "--recipient", recipient).status == 0)
        let good = try Data(contentsOf: URL(fileURLWithPath: bundle))

        let target = try fileStoreHarness()
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
            let r = target.run("import", path, "--identity", identity, "--yes", "--json")
            #expect(r.status != 0, "\(name)")
            let code = (r.json["error"] as? [String: Any])?["code"] as? String
            #expect(code == "bundle_corrupt" || code == "bundle_no_identity", "\(name): \(r.stdout)")
            #expect(!r.stdout.contains("SECRET"))
            #expect(snapshot(target) == before, "\(name) changed nothing")
        }
        #expect(token(target, "alpha") == "AT-alpha-ORIGINAL\n")
    }

    @Test func passphraseBundleOpensWithStockAgeThroughAPty() throws {
        let source = try fileStoreHarness()
        try seedFileSlot(source, "alpha")
        try seedFileSlot(source, "beta")
        let passFile = source.root + "/pass"
        try "bundle passphrase\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        source.extraEnvironment["LANYARD_PASSPHRASE_FILE"] = passFile
        let bundle = source.root + "/pass.age"
        let r = source.run("export", "--to", bundle)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "Exported 2 slots (alpha, beta) to \(bundle).\n")
        #expect(!r.stdout.contains("bundle passphrase") && !r.stderr.contains("bundle passphrase"))

        // age reads passphrases only from a terminal: give it one with script(1).
        let out = source.root + "/plain.json"
        let (status, _, err) = try sh("script -qec \"age -d -o '\(out)' '\(bundle)'\" /dev/null < '\(passFile)' > /dev/null")
        #expect(status == 0, "\(err)")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out))) as? [String: Any] ?? [:]
        #expect(Set((json["slots"] as? [String: Any] ?? [:]).keys) == ["alpha", "beta"])

        let target = try fileStoreHarness()
        target.extraEnvironment["LANYARD_PASSPHRASE_FILE"] = passFile
        let imported = target.run("import", bundle, "--rename", "beta=b2")
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(token(target, "alpha") == "AT-alpha-SECRET\n" && token(target, "b2") == "AT-beta-SECRET\n")

        let other = try fileStoreHarness()
        try "not the passphrase\n".write(toFile: other.root + "/wrong", atomically: true, encoding: .utf8)
        other.extraEnvironment["LANYARD_PASSPHRASE_FILE"] = other.root + "/wrong"
        let wrong = other.run("import", bundle, "--json")
        #expect(wrong.status == 1 && (wrong.json["error"] as? [String: Any])?["code"] as? String == "wrong_passphrase")
        #expect(try other.registry.load().slots.isEmpty)
    }

    @Test func exportSkipsSlotsWithoutACredential() throws {
        let h = try fileStoreHarness()
        try seedFileSlot(h, "alpha")
        try h.registry.update { $0.slots[try Slot("ghost")] = SlotRecord(provider: "openai", backend: .file) }
        let (_, recipient) = try keygen(h.root)
        let all = h.run("export", "--to", h.root + "/all.age", "--recipient", recipient, "--json")
        #expect(all.status == 0 && all.json["slots"] as? [String] == ["alpha"] && all.json["skipped"] as? [String] == ["ghost"])
        let named = h.run("export", "ghost", "--to", h.root + "/ghost.age", "--recipient", recipient)
        #expect(named.status == 3, "a named slot without a credential is an error")
        #expect(h.run("export", "nobody", "--to", h.root + "/n.age", "--recipient", recipient).status == 3)
        #expect(h.run("export", "--to", h.root + "/x.age", "--recipient", "age1notakey").status == 2)
        #expect(h.run("export", "alpha").status == 2, "--to is required")
        #expect(!FileManager.default.fileExists(atPath: h.root + "/ghost.age"))
    }
}
