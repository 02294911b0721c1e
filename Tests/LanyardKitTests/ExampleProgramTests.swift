import Foundation
import LanyardTestSupport
import Testing

/// Runs Examples/lanyard-example (which imports LanyardKit alone) end to end against the ChatGPT
/// emulator: it signs a slot in, lists, switches, renames, takes a token, reads usage and runs the
/// doctor's checks, all through LanyardKit's public API.
@Suite struct ExampleProgramTests {
    /// Collects a pipe's output as it arrives and hands out complete lines.
    final class Lines: Sendable {
        let stream: AsyncStream<String>

        init(_ pipe: Pipe) {
            let (stream, continuation) = AsyncStream.makeStream(of: String.self)
            self.stream = stream
            let pending = LockedBuffer()
            pipe.fileHandleForReading.readabilityHandler = { handle in
                let data = handle.availableData
                if data.isEmpty {
                    handle.readabilityHandler = nil
                    continuation.finish()
                    return
                }
                for line in pending.append(data) { continuation.yield(line) }
            }
        }
    }

    final class LockedBuffer: @unchecked Sendable {
        private let lock = NSLock()
        private var bytes = Data()

        /// Adds `data`; returns the lines it completed.
        func append(_ data: Data) -> [String] {
            lock.withLock {
                bytes += data
                var lines: [String] = []
                while let newline = bytes.firstIndex(of: 0x0A) {
                    lines.append(String(decoding: bytes[bytes.startIndex..<newline], as: UTF8.self))
                    bytes = Data(bytes[(newline + 1)...])
                }
                return lines
            }
        }
    }

    @Test func theExampleSignsInListsSwitchesRenamesTakesATokenAndRunsTheDoctor() async throws {
        let env = try KitHome()
        try await env.server.hook("/_test/config", ["interval": 0])
        let process = Process()
        process.executableURL = repositoryRoot.appendingPathComponent(".build/debug/lanyard-example")
        process.arguments = ["work", "job"]
        process.environment = env.home.environment
        process.currentDirectoryURL = URL(fileURLWithPath: env.home.root)
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        let lines = Lines(out)
        try process.run()
        // A watchdog, not a synchronisation: a broken example fails the test instead of hanging it.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            process.terminate()
        }
        defer { watchdog.cancel() }

        var seen: [String] = []
        for await line in lines.stream {
            seen.append(line)
            if let range = line.range(of: "enter the code: ") {
                let code = String(line[range.upperBound...])
                _ = try await env.server.hook("/_test/approve", ["user_code": code, "email": "example@example.com", "plan": "plus"])
            }
        }
        process.waitUntilExit()
        let output = seen.joined(separator: "\n")
        #expect(process.terminationStatus == 0, "lanyard-example failed:\n\(output)")
        #expect(seen.contains { $0.hasPrefix("open ") && $0.contains("/codex/device") }, "no device code shown:\n\(output)")
        #expect(seen.contains("signed in as example@example.com on Plus in slot work"), "\(output)")
        #expect(seen.contains("slots: work (signed in)") || seen.contains { $0.hasPrefix("slots: work (") }, "\(output)")
        #expect(seen.contains("active: work (was work)") || seen.contains("active: work (was none)"), "\(output)")
        #expect(seen.contains("renamed work to job"), "\(output)")
        #expect(seen.contains { $0.hasPrefix("token: ") && !$0.hasPrefix("token: 0 ") }, "\(output)")
        #expect(seen.contains("doctor: no problems"), "\(output)")

        // What the program did is what the command sees, and the token never reached its output.
        let list = try env.home.run("list", "--names")
        #expect(list.stdout == "job\n")
        let token = try env.home.run("token", "job")
        #expect(token.status == 0 && token.stdout.count > 20)
        #expect(!output.contains(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
    }
}
