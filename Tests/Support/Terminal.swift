import Foundation

/// A program run on a pseudo-terminal (`script` from bsdutils makes it), with answers typed at
/// its prompts: what a person at a terminal sees and types. The program's stdin, stdout and
/// stderr are the terminal, and so is its /dev/tty.
package final class TerminalRun: @unchecked Sendable {
    package let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let lock = NSLock()
    private var data = Data()

    /// Starts `program ARGS` (paths and arguments only: never a secret) on a new terminal.
    package init(_ program: String, _ args: [String], environment: [String: String]) throws {
        let command = ([program] + args).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(
            separator: " "
        )
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", command, "/dev/null"]
        process.environment = environment.merging(["SHELL": "/bin/sh"]) { $1 }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        output.fileHandleForReading.readabilityHandler = { [self] handle in
            let chunk = handle.availableData
            lock.withLock { data.append(chunk) }
        }
        try process.run()
    }

    /// Everything the terminal showed so far.
    package var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }

    /// Waits (at most `timeout` seconds) until `condition` holds for what the terminal showed,
    /// or the program ends; true when it holds.
    package func wait(timeout: TimeInterval = 60, until condition: (String) -> Bool) async throws -> Bool {
        let deadline = Date() + timeout
        while !condition(text) {
            if !process.isRunning || Date() > deadline { return condition(text) }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        return true
    }

    /// How many times `prompt` has been shown.
    package func shown(_ prompt: String) -> Int { text.components(separatedBy: prompt).count - 1 }

    /// Types `line` and Enter once `prompt` has been shown `count` times (the typing would be lost
    /// if it came before the program asked). Throws when the prompt does not come.
    package func answer(_ prompt: String, time count: Int = 1, with line: String) async throws {
        guard try await wait(until: { $0.components(separatedBy: prompt).count - 1 >= count }) else {
            throw ServerError("the terminal never showed \"\(prompt)\" \(count) times:\n\(text)")
        }
        try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Types `text` as it is (no Enter): a control character like Ctrl-C (`\u{03}`) reaches the
    /// terminal's line discipline, which signals the foreground process group.
    package func type(_ text: String) throws {
        try input.fileHandleForWriting.write(contentsOf: Data(text.utf8))
    }

    /// Waits for the program to end (at most `timeout` seconds; then it is killed) and returns its
    /// exit status and everything the terminal showed.
    package func finish(timeout: TimeInterval = 60) async throws -> (status: Int32, text: String) {
        let deadline = Date() + timeout
        while process.isRunning && Date() < deadline { try await Task.sleep(nanoseconds: 10_000_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
        let rest = output.fileHandleForReading.readDataToEndOfFile()
        lock.withLock { data.append(rest) }
        try? input.fileHandleForWriting.close()
        return (process.terminationStatus, text)
    }
}
