import Age
import Foundation
import LanyardCore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardStore

func sampleCredential(_ token: String, email: String = "a@example.com") -> Credential {
    Credential(
        provider: "openai",
        tokens: TokenSet(
            accessToken: token,
            refreshToken: "rt-\(token)",
            idToken: nil,
            expiresAt: Date(timeIntervalSince1970: 1_800_000_000)
        ),
        lastRefresh: Date(timeIntervalSince1970: 1_799_990_000),
        account: AccountInfo(email: email, accountID: "acct")
    )
}

/// Every test gets its own data folder and its own kernel-keyring entry (named after the store path).
@Suite(.serialized) struct EncryptedFileStoreTests {
    let temp = TempDirectory()
    var store: EncryptedFileStore { EncryptedFileStore(paths: temp.paths, unlockCacheSeconds: 60) }
    var environment: [String: String] { temp.environment.merging(["PATH": "/usr/bin:/bin"]) { $1 } }

    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    @Test func roundTripOverwriteDeleteList() throws {
        try store.initialize(passphrase: nil)
        let work = try Slot("work")
        let home = try Slot("home")
        try store.put(sampleCredential("one"), for: work)
        try store.put(sampleCredential("two"), for: home)
        #expect(try store.get(work) == sampleCredential("one"))
        try store.put(sampleCredential("three"), for: work)
        #expect(try store.get(work).tokens.accessToken == "three")
        #expect(try store.list() == [home, work])
        try store.delete(work)
        #expect(throws: StoreError.notFound(slot: work)) { try store.get(work) }
        #expect(throws: StoreError.notFound(slot: work)) { try store.delete(work) }
        #expect(try store.list() == [home])
    }

    @Test func filesArePrivateAndThePreviousGenerationIsKept() throws {
        try store.initialize(passphrase: nil)
        try store.put(sampleCredential("one"), for: try Slot("a"))
        #expect(fileMode(store.directory) == 0o700)
        for file in [store.storePath, store.plainIdentityPath, store.storePath + ".prev"] {
            #expect(fileMode(file) == 0o600, "\(file)")
        }
    }

    /// The unprotected identity file reads like one age-keygen writes: a `# public key: age1…`
    /// comment (the same words and the same key age-keygen -y derives) above the secret key.
    @Test func theIdentityFileCommentsItsPublicKeyAsAgeKeygenDoes() throws {
        try store.initialize(passphrase: nil)
        let text = try String(contentsOfFile: store.plainIdentityPath, encoding: .utf8)
        let comment = text.split(separator: "\n").first { $0.hasPrefix("# public key: ") }.map {
            String($0.dropFirst("# public key: ".count))
        }
        let (status, derived, _) = try runProcess("/usr/bin/age-keygen", ["-y", store.plainIdentityPath])
        #expect(status == 0)
        #expect(
            comment != nil && comment == derived.trimmingCharacters(in: .whitespacesAndNewlines),
            "\(text.split(separator: "\n").first ?? "")"
        )
        // age-keygen's own file carries the same comment.
        let own = temp.path + "/keygen.txt"
        #expect(try runProcess("/usr/bin/age-keygen", ["-o", own]).0 == 0)
        #expect(try String(contentsOfFile: own, encoding: .utf8).contains("\n# public key: age1"))
    }

    @Test func refusesASymlinkedStore() throws {
        try store.initialize(passphrase: nil)
        let real = temp.path + "/elsewhere.age"
        try FileManager.default.moveItem(atPath: store.storePath, toPath: real)
        try FileManager.default.createSymbolicLink(atPath: store.storePath, withDestinationPath: real)
        #expect(throws: StoreError.unsafePath(path: store.storePath, reason: "it is a symbolic link")) {
            try store.list()
        }
    }

    @Test func passphraseProtectedStoreLocksAndUnlocks() throws {
        try store.initialize(passphrase: "correct horse", workFactor: 10)
        try store.put(sampleCredential("one"), for: try Slot("a"))
        #expect(store.lock())
        #expect(store.health().locked)
        #expect(throws: StoreError.locked(backend: "encrypted file", hint: "run `lanyard store unlock`")) {
            try store.list()
        }
        let before = bytes(store.protectedIdentityPath)
        #expect(throws: StoreError.wrongPassphrase) { try store.unlock(passphrase: "wrong horse") }
        #expect(bytes(store.protectedIdentityPath) == before)
        #expect(store.health().locked)
        try store.unlock(passphrase: "correct horse")
        #expect(try store.get(try Slot("a")).tokens.accessToken == "one")
        #expect(!store.health().locked)
        store.lock()
    }

    @Test func aWorkFactorAboveTheCapIsRejectedBeforeScrypt() throws {
        try store.initialize(passphrase: "pw", workFactor: 10)
        store.lock()
        // Raise the stanza's work factor to 2^40: running scrypt for it would take hours and TiBs.
        let sealed = try #require(bytes(store.protectedIdentityPath))
        let plain = try Age.decrypt(try Armor.decode(sealed), with: [try ScryptIdentity(passphrase: "pw")])
        let file = try Age.encrypt(plain, to: [try ScryptRecipient(passphrase: "pw", workFactor: 10)])
        var text = String(decoding: file, as: UTF8.self)
        let range = try #require(text.range(of: #"-> scrypt \S+ 10\n"#, options: .regularExpression))
        text.replaceSubrange(range, with: text[range].replacingOccurrences(of: " 10\n", with: " 40\n"))
        try Data(text.utf8).write(to: URL(fileURLWithPath: store.protectedIdentityPath))
        let error = #expect(throws: StoreError.self) { try store.unlock(passphrase: "pw") }
        guard case .corrupt(_, let detail)? = error else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(detail.contains("work factor"))
    }

    /// Truncation and a flipped byte in the header, the MAC and the payload each give their own
    /// clear error, and the file stays byte for byte as it was.
    @Test func tamperedFilesAreCorruptAndLeftUntouched() throws {
        try store.initialize(passphrase: nil)
        try store.put(sampleCredential(String(repeating: "x", count: 100)), for: try Slot("a"))
        let good = try #require(bytes(store.storePath))
        let text = String(decoding: good, as: UTF8.self)
        let macStart = try #require(text.range(of: "\n--- "))
        let headerEnd = good.firstIndex(
            of: 0x0a,
            after: text.utf8.distance(from: text.startIndex, to: macStart.upperBound)
        )!
        let cases: [(String, Data)] = [
            ("truncated", good.prefix(headerEnd + 11)),
            ("header", flip(good, at: 30)),
            ("mac", flip(good, at: text.utf8.distance(from: text.startIndex, to: macStart.upperBound) + 3)),
            ("payload", flip(good, at: headerEnd + 20)),
        ]
        var details: Set<String> = []
        for (name, damaged) in cases {
            try damaged.write(to: URL(fileURLWithPath: store.storePath))
            let error = #expect(throws: StoreError.self, "\(name)") { try store.get(try Slot("a")) }
            guard case .corrupt(let source, let detail)? = error else {
                Issue.record("\(name): \(String(describing: error))")
                continue
            }
            #expect(source == store.storePath)
            details.insert(detail)
            #expect(throws: StoreError.self) { try store.put(sampleCredential("new"), for: try Slot("b")) }
            #expect(bytes(store.storePath) == damaged, "\(name): the damaged file must stay as it was")
        }
        #expect(details.count == cases.count, "each damage has its own message: \(details.sorted())")
    }

    func flip(_ data: Data, at index: Int) -> Data {
        var copy = data
        copy[copy.startIndex + index] ^= 0x01
        return copy
    }

    @Test func theStockAgeToolOpensTheStore() throws {
        try store.initialize(passphrase: nil)
        try store.put(sampleCredential("interop"), for: try Slot("work"))
        let (status, out, err) = try runProcess(
            "/usr/bin/age",
            ["-d", "-i", store.plainIdentityPath, store.storePath],
            environment: environment
        )
        #expect(status == 0, "\(err)")
        let document = try StoreDocument.decode(Data(out.utf8), source: "age -d output")
        #expect(document.slots[try Slot("work")] == sampleCredential("interop"))
    }

    @Test func twoProcessesWritingDifferentSlotsLoseNothing() throws {
        try store.initialize(passphrase: nil)
        let tool = builtBinary("lanyard-test-tool")
        let a = Process()
        let b = Process()
        for (p, prefix) in [(a, "a"), (b, "b")] {
            p.executableURL = URL(fileURLWithPath: tool)
            p.arguments = ["file-put", prefix, "200"]
            p.environment = environment
            try p.run()
        }
        a.waitUntilExit()
        b.waitUntilExit()
        #expect(a.terminationStatus == 0 && b.terminationStatus == 0)
        let slots = try store.list()
        #expect(slots.count == 400)
        #expect(try store.get(try Slot("a-199")).tokens.accessToken == "a-199")
    }

    @Test func killedWritersLeaveTheOldOrTheNewContent() throws {
        try store.initialize(passphrase: nil)
        let slot = try Slot("w")
        let tool = builtBinary("lanyard-test-tool")
        var seen: Set<String> = []
        for round in 0..<10 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: tool)
            p.arguments = ["file-rewrite", "w", "100"]
            p.environment = environment
            let out = Pipe()
            p.standardOutput = out
            try p.run()
            // Kill it after a varying number of completed writes.
            let target = 3 + round * 7
            var lines = 0
            let handle = out.fileHandleForReading
            while lines < target, let chunk = try handle.read(upToCount: 64), !chunk.isEmpty {
                lines += chunk.filter { $0 == 0x0a }.count
            }
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            let token = try store.get(slot).tokens.accessToken  // must decrypt and parse
            #expect(token.hasPrefix("generation-"))
            seen.insert(token)
        }
        #expect(!seen.isEmpty)
    }
}

extension Data {
    fileprivate func firstIndex(of byte: UInt8, after offset: Int) -> Int? {
        var i = offset
        while i < count {
            if self[startIndex + i] == byte { return i }
            i += 1
        }
        return nil
    }
}
