import Foundation
import Testing

@testable import Age

/// Interoperability with the reference `age` CLI (Debian package `age`).
///
/// These tests fail, rather than skip, when `age` is missing: interop is a
/// requirement, not an optional extra. Secrets never go through argv: keys are
/// passed as files and passphrases are typed into a pseudo-terminal, because
/// age reads them from /dev/tty (`script` from bsdutils provides the pty).
@Suite("Interop with the age CLI", .serialized)
struct InteropTests {
    static let sizes = [0, 1, 65536, 65537, 5_000_000]
    static let age = "/usr/bin/age"
    static let ageKeygen = "/usr/bin/age-keygen"
    static let script = "/usr/bin/script"

    /// A scratch directory removed when the test ends.
    final class Scratch {
        let url: URL
        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("age-interop-\(UUID().uuidString)")
            try FileManager.default.createDirectory(
                at: url,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        }
        func path(_ name: String) -> String { url.appendingPathComponent(name).path }
        func write(_ name: String, _ data: Data) throws -> String {
            let p = path(name)
            guard FileManager.default.createFile(atPath: p, contents: data, attributes: [.posixPermissions: 0o600])
            else {
                throw InflateError(description: "cannot write \(p)")
            }
            return p
        }
        func read(_ name: String) throws -> Data { try Data(contentsOf: url.appendingPathComponent(name)) }
        /// age 1.1.1 opens its `-o` file lazily and creates none for an empty plaintext.
        func readOutput(_ name: String) throws -> Data {
            FileManager.default.fileExists(atPath: path(name)) ? try read(name) : Data()
        }
        deinit { try? FileManager.default.removeItem(at: url) }
    }

    /// Thread-safe byte sink for a child's output.
    final class Collector: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()
        func append(_ d: Data) {
            lock.lock()
            data.append(d)
            lock.unlock()
        }
        var text: String {
            lock.lock()
            defer { lock.unlock() }
            return String(decoding: data, as: UTF8.self)
        }
    }

    static func requireTools() throws {
        for tool in [age, ageKeygen, script] {
            try #require(
                FileManager.default.isExecutableFile(atPath: tool),
                "\(tool) is required for interop tests (apt-get install age bsdutils)"
            )
        }
    }

    /// Runs a program without a terminal; returns exit status and combined output.
    static func run(_ exe: String, _ args: [String]) async throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        p.standardInput = FileHandle.nullDevice
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        let collector = Collector()
        out.fileHandleForReading.readabilityHandler = { collector.append($0.availableData) }
        try p.run()
        while p.isRunning { try await Task.sleep(for: .milliseconds(5)) }
        out.fileHandleForReading.readabilityHandler = nil
        collector.append(out.fileHandleForReading.readDataToEndOfFile())
        return (p.terminationStatus, collector.text)
    }

    /// Runs `command` under a pseudo-terminal (via `script`) and types
    /// `passphrase` at each of the first `prompts` passphrase prompts.
    static func runInTerminal(
        _ command: String,
        passphrase: String,
        prompts: Int
    ) async throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: script)
        p.arguments = ["-qec", command, "/dev/null"]  // file paths only, no secrets
        let input = Pipe()
        let out = Pipe()
        p.standardInput = input
        p.standardOutput = out
        p.standardError = out
        let collector = Collector()
        out.fileHandleForReading.readabilityHandler = { collector.append($0.availableData) }
        try p.run()
        var answered = 0
        let deadline = Date().addingTimeInterval(120)
        while p.isRunning && Date() < deadline {
            let seen = collector.text.components(separatedBy: "passphrase").count - 1
            if seen > answered && answered < prompts {
                try input.fileHandleForWriting.write(contentsOf: Data((passphrase + "\n").utf8))
                answered += 1
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        if p.isRunning { p.terminate() }
        while p.isRunning { try await Task.sleep(for: .milliseconds(5)) }
        try? input.fileHandleForWriting.close()
        out.fileHandleForReading.readabilityHandler = nil
        // The passphrase is a throwaway test value, but keep it out of logs anyway.
        return (p.terminationStatus, collector.text.replacingOccurrences(of: passphrase, with: "<passphrase>"))
    }

    static func testPassphrase() -> String { "interop-" + Sodium.base64String(Sodium.randomBytes(12)) }

    // MARK: Lanyard -> age

    @Test("Lanyard X25519 file decrypts with age -d (binary and armored)", arguments: sizes)
    func lanyardX25519ToAge(size: Int) async throws {
        try Self.requireTools()
        let dir = try Scratch()
        let id = X25519Identity.generate()
        let keyFile = try dir.write("key.txt", Data("# test key\n\(id.secretKeyString)\n".utf8))
        let plaintext = randomData(size)
        for armored in [false, true] {
            let file = try dir.write("file.age", try Age.encrypt(plaintext, to: [id.recipient], armored: armored))
            let result = try await Self.run(Self.age, ["-d", "-i", keyFile, "-o", dir.path("out"), file])
            #expect(result.status == 0, "age -d failed (armored: \(armored)): \(result.output)")
            #expect(try dir.readOutput("out") == plaintext, "armored: \(armored)")
            try? FileManager.default.removeItem(atPath: dir.path("out"))
        }
    }

    @Test("Lanyard scrypt file decrypts with age -d in a terminal", arguments: sizes)
    func lanyardScryptToAge(size: Int) async throws {
        try Self.requireTools()
        let dir = try Scratch()
        let passphrase = Self.testPassphrase()
        let plaintext = randomData(size)
        let file = try dir.write(
            "file.age",
            try Age.encrypt(plaintext, to: [try ScryptRecipient(passphrase: passphrase, workFactor: 10)])
        )
        let result = try await Self.runInTerminal(
            "\(Self.age) -d -o '\(dir.path("out"))' '\(file)'",
            passphrase: passphrase,
            prompts: 1
        )
        #expect(result.status == 0, "age -d failed: \(result.output)")
        #expect(try dir.readOutput("out") == plaintext)
    }

    // MARK: age -> Lanyard

    @Test("age -r files (binary and -a armored) decrypt with Lanyard", arguments: sizes)
    func ageX25519ToLanyard(size: Int) async throws {
        try Self.requireTools()
        let dir = try Scratch()
        let keygen = try await Self.run(Self.ageKeygen, ["-o", dir.path("key.txt")])
        try #require(keygen.status == 0, "age-keygen failed: \(keygen.output)")
        let identities = try Age.parseIdentityFile(String(decoding: try dir.read("key.txt"), as: UTF8.self))
        try #require(identities.count == 1)
        // Our public key derivation agrees with age-keygen -y.
        let y = try await Self.run(Self.ageKeygen, ["-y", dir.path("key.txt")])
        #expect(y.output.trimmingCharacters(in: .whitespacesAndNewlines) == identities[0].recipient.string)

        let plaintext = randomData(size)
        let input = try dir.write("in", plaintext)
        for armored in [false, true] {
            let out = dir.path(armored ? "file.age.asc" : "file.age")
            let result = try await Self.run(
                Self.age,
                ["-r", identities[0].recipient.string] + (armored ? ["-a"] : []) + ["-o", out, input]
            )
            try #require(result.status == 0, "age -r failed: \(result.output)")
            let file = try Data(contentsOf: URL(fileURLWithPath: out))
            #expect(file.starts(with: Data((armored ? Armor.beginLine : "age-encryption.org/v1").utf8)))
            #expect(try Age.decrypt(file, with: identities) == plaintext, "armored: \(armored)")
        }
    }

    @Test("age -p files decrypt with Lanyard", arguments: sizes)
    func ageScryptToLanyard(size: Int) async throws {
        try Self.requireTools()
        let dir = try Scratch()
        let passphrase = Self.testPassphrase()
        let plaintext = randomData(size)
        let input = try dir.write("in", plaintext)
        // Armored once (at the size that straddles a chunk boundary) to keep scrypt time down.
        let armored = size == 65537
        let result = try await Self.runInTerminal(
            "\(Self.age) -p \(armored ? "-a " : "")-o '\(dir.path("file.age"))' '\(input)'",
            passphrase: passphrase,
            prompts: 2
        )
        try #require(result.status == 0, "age -p failed: \(result.output)")
        let file = try dir.read("file.age")
        #expect(try Age.decrypt(file, with: [try ScryptIdentity(passphrase: passphrase)]) == plaintext)
        if size == 0 {  // one wrong-passphrase check is enough: each scrypt run costs ~0.7 s
            #expect(throws: AgeError.incorrectPassphrase) {
                try Age.decrypt(file, with: [try ScryptIdentity(passphrase: passphrase + "x")])
            }
        }
    }
}
