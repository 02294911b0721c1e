import Foundation
import LanyardCLI
import LanyardCore
import LanyardIntegrations
import LanyardTestSupport
import Testing

/// Input from other programs is read within limits: `lanyard git-credential get </dev/zero` used
/// to grow to gigabytes in seconds (the standard library's `readLine()` has no limit).

/// The real binary, its standard input a pipe that a background thread fills without end (like
/// `</dev/zero`), under a data-segment limit of 128 MiB: with unbounded reads the process would run
/// into the limit (and, as it did, quietly see the end of its input instead of failing); bounded,
/// it stops at once with the protocol's error.
@Suite struct HelperEndlessInputTests {
    static let dataLimitKiB = 131_072

    struct Output {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs `program ARGS` with `pattern` repeated forever on its standard input.
    static func runFed(
        _ program: String,
        _ args: [String],
        pattern: String,
        environment: [String: String]
    ) throws -> Output {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", "ulimit -d \(dataLimitKiB) && exec \"$0\" \"$@\"", program] + args
        p.environment = environment
        let input = Pipe()
        let out = Pipe()
        let err = Pipe()
        p.standardInput = input
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let fd = input.fileHandleForWriting.fileDescriptor
        let chunk = Array(repeating: Array(pattern.utf8), count: 65_536 / pattern.utf8.count).flatMap { $0 }
        let fed = DispatchSemaphore(value: 0)
        let feeder = Thread {
            // Writing to a pipe nobody reads raises SIGPIPE in the writing thread: blocked here,
            // write returns EPIPE instead (and the signal goes with the thread).
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            while true {
                let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno != EINTR { break }
            }
            fed.signal()
        }
        feeder.start()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        fed.wait()  // the process is gone, so the feeder's next write failed
        try input.fileHandleForWriting.close()
        return Output(
            status: p.terminationStatus,
            stdout: String(decoding: o, as: UTF8.self),
            stderr: String(decoding: e, as: UTF8.self)
        )
    }

    static let git = [
        (pattern: "\0", message: "lanyard: git-credential: input line 1 contains a NUL byte (it is not text)\n"),
        (pattern: "a", message: "lanyard: git-credential: input line 1 is longer than 64 KiB\n"),
        (
            pattern: "protocol=https\n",
            message: "lanyard: git-credential: input line 69906 takes the request past 1 MiB, the most it may hold\n"
        ),
    ]

    @Test(arguments: ["get", "store", "erase"])
    func gitCredentialStopsAtOnce(action: String) throws {
        let home = TestHome()
        for (pattern, message) in Self.git {
            let r = try Self.runFed(
                lanyardBinary(),
                ["git-credential", action],
                pattern: pattern,
                environment: home.environment
            )
            #expect(r.status == 2, "\(pattern.debugDescription): \(r.stderr)")
            #expect(r.stderr == message)
            #expect(r.stdout.isEmpty)
        }
    }

    static let docker = [
        (
            pattern: "\0",
            message: "docker-credential-lanyard: the input on stdin contains a NUL byte (it is not text)\n"
        ),
        (pattern: "a", message: "docker-credential-lanyard: a line on stdin is longer than 64 KiB\n"),
        (pattern: "https://ghcr.io\n", message: "docker-credential-lanyard: the input on stdin is longer than 1 MiB\n"),
    ]

    @Test(arguments: ["get", "store", "erase"])
    func dockerCredentialHelperStopsAtOnce(action: String) throws {
        let home = TestHome()
        let helper = home.root + "/docker-credential-lanyard"
        try FileManager.default.createSymbolicLink(atPath: helper, withDestinationPath: lanyardBinary())
        for (pattern, message) in Self.docker {
            let r = try Self.runFed(helper, [action], pattern: pattern, environment: home.environment)
            #expect(r.status == 2, "\(pattern.debugDescription): \(r.stdout) \(r.stderr)")
            #expect(r.stdout == message, "Docker reads a helper's errors on stdout")
        }
    }

    @Test func askReadsAPromptOfTextWithinItsLimit() throws {
        let home = TestHome()
        let nul = try Self.runFed(lanyardBinary(), ["ask", "-"], pattern: "\0", environment: home.environment)
        #expect(nul.status == 2, "\(nul.stderr)")
        #expect(nul.stderr.hasPrefix("lanyard: the prompt on standard input contains a NUL byte (it is not text)\n"))
        let endless = try Self.runFed(lanyardBinary(), ["ask", "-"], pattern: "a", environment: home.environment)
        #expect(endless.status == 2, "\(endless.stderr)")
        #expect(endless.stderr.hasPrefix("lanyard: the prompt on standard input is longer than 8 MiB\n"))
    }
}
