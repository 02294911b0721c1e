#if DEBUG  // Testing is not there in the release build (make release builds every target)
import Foundation
import Testing

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

    /// How many times `prompt` has been shown.
    package func shown(_ prompt: String) -> Int { text.components(separatedBy: prompt).count - 1 }

    /// Waits until the terminal has shown `needle` `count` times; throws when the program ends
    /// first.
    package func waitUntilShown(_ needle: String, times count: Int = 1) async throws {
        func shown(_ text: String) -> Bool { text.components(separatedBy: needle).count - 1 >= count }
        try await eventually("the terminal shows \"\(needle)\" \(count) times") { [self] in
            let running = process.isRunning
            let seen = text
            guard running || shown(seen) else {
                throw ServerError("the program ended before the terminal showed \"\(needle)\" \(count) times:\n\(seen)")
            }
            return seen
        } until: {
            shown($0)
        }
    }

    /// Types `line` and Enter once `prompt` has been shown `count` times (the typing would be lost
    /// if it came before the program asked). Throws when the prompt does not come.
    package func answer(_ prompt: String, time count: Int = 1, with line: String) async throws {
        try await waitUntilShown(prompt, times: count)
        try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Types `text` as it is (no Enter): a control character like Ctrl-C (`\u{03}`) reaches the
    /// terminal's line discipline, which signals the foreground process group.
    package func type(_ text: String) throws {
        try input.fileHandleForWriting.write(contentsOf: Data(text.utf8))
    }

    /// Waits for the program to end and returns its exit status and everything the terminal
    /// showed; a program that does not end is killed, and the wait fails.
    package func finish() async throws -> (status: Int32, text: String) {
        do {
            try await eventually("the program ends") { [self] in
                (running: process.isRunning, shown: text)
            } until: {
                !$0.running
            }
        } catch {
            process.terminate()
            process.waitUntilExit()
            throw error
        }
        process.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
        let rest = output.fileHandleForReading.readDataToEndOfFile()
        lock.withLock { data.append(rest) }
        try? input.fileHandleForWriting.close()
        return (process.terminationStatus, text)
    }
}
#endif
