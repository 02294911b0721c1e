import Foundation
import LanyardTestSupport
import Testing

/// Runs Examples/lanyard-example (which imports LanyardKit alone) end to end against the ChatGPT
/// emulator: it signs a slot in, lists, switches, renames, takes a token, reads usage and runs the
/// doctor's checks, all through LanyardKit's public API.
@Suite struct ExampleProgramTests {
    /// A pipe's output as lines, as they arrive, read by a plain thread with blocking reads
    /// (FileHandle's readabilityHandler runs on a dispatch source, which Thread Sanitizer's
    /// runtime crashes on under Linux).
    static func lines(of pipe: Pipe) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let fd = pipe.fileHandleForReading.fileDescriptor
        let reader = Thread {
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                pending += chunk[0..<n]
                while let newline = pending.firstIndex(of: 0x0A) {
                    continuation.yield(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
            }
            continuation.finish()
        }
        reader.start()
        return stream
    }

    @Test func theExampleSignsInListsSwitchesRenamesTakesATokenAndRunsTheDoctor() async throws {
        let env = try KitHome()
        env.home.withoutSessionBus = true  // its doctor must see only this home (file store)
        try await env.server.hook("/_test/config", ["interval": 0])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtBinary("lanyard-example"))
        process.arguments = ["work", "job"]
        process.environment = env.home.environment
        process.currentDirectoryURL = URL(fileURLWithPath: env.home.root)
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        let lines = Self.lines(of: out)
        try process.run()
        // A watchdog, not a synchronisation: a broken example fails the test instead of hanging it.
        // Generous, as it must never end a working run on a loaded machine (a full parallel run
        // keeps tests waiting for minutes).
        let watchdog = Task {
            try await Task.sleep(for: .seconds(300))
            process.terminate()
        }
        defer { watchdog.cancel() }

        var seen: [String] = []
        for await line in lines {
            seen.append(line)
            if let range = line.range(of: "enter the code: ") {
                let code = String(line[range.upperBound...])
                _ = try await env.server.hook(
                    "/_test/approve",
                    ["user_code": code, "email": "example@example.com", "plan": "plus"]
                )
            }
        }
        process.waitUntilExit()
        let output = seen.joined(separator: "\n")
        #expect(process.terminationStatus == 0, "lanyard-example failed:\n\(output)")
        #expect(
            seen.contains { $0.hasPrefix("open ") && $0.contains("/codex/device") },
            "no device code shown:\n\(output)"
        )
        #expect(seen.contains("signed in as example@example.com on Plus in slot work"), "\(output)")
        #expect(
            seen.contains("slots: work (signed in)") || seen.contains { $0.hasPrefix("slots: work (") },
            "\(output)"
        )
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

/// Runs Examples/lanyard-ask-example (LanyardKit alone) against the emulator's streaming endpoint.
@Suite struct AskExampleProgramTests {
    func run(_ arguments: [String], _ env: KitHome) throws -> (Int32, String) {
        let (status, out, _) = try runProcess(
            builtBinary("lanyard-ask-example"),
            arguments,
            environment: env.home.environment
        )
        return (status, out)
    }

    @Test(arguments: [[], ["--sse"]])
    func theExampleStreamsTheReply(_ flags: [String]) async throws {
        let home = try await StreamHome()
        let (status, out) = try run(flags + ["s", "tell", "me"], home.env)
        #expect(status == 0)
        let transport = flags.isEmpty ? "websocket" : "sse"
        #expect(out.hasPrefix(StreamHome.reply(to: "tell me") + "\ndone: resp_"))
        #expect(out.hasSuffix("tokens over \(transport))\n"))
    }

    @Test func theExampleHandlesADivergedReplay() async throws {
        let home = try await StreamHome()
        try await home.script([
            ["transport": "websocket", "drop_after": 3, "chunk": 2], ["transport": "websocket", "text": "Nope"],
        ])
        let (status, out) = try run(["s", "hi"], home.env)
        #expect(status == 6)
        #expect(out == "Hell\nthe connection replayed different text after 4 characters; please retry\n")
    }
}
