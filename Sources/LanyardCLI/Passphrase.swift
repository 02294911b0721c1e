import Foundation
import LanyardCore

/// Where passphrases come from — never argv: a file named by `LANYARD_PASSPHRASE_FILE`, the
/// output of the `LANYARD_ASKPASS` program, or the terminal with echo off.
struct PassphraseReader {
    let environment: [String: String]

    /// Reads one passphrase; `confirm` asks twice on a terminal (for new passphrases).
    func read(prompt: String, confirm: Bool = false) throws -> String {
        if let file = environment["LANYARD_PASSPHRASE_FILE"], !file.isEmpty {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw PassphraseError("cannot read LANYARD_PASSPHRASE_FILE (\(file))")
            }
            return try firstLine(data, source: "LANYARD_PASSPHRASE_FILE")
        }
        if let program = environment["LANYARD_ASKPASS"], !program.isEmpty {
            return try askpass(program, prompt: prompt)
        }
        let first = try terminal(prompt: prompt)
        if confirm {
            guard try terminal(prompt: "Repeat to confirm: ") == first else { throw PassphraseError("the passphrases did not match") }
        }
        return first
    }

    /// Whether LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS is set, so `read` never asks on the
    /// terminal (commands may then open a locked store on their own).
    var hasUnattendedSource: Bool {
        ["LANYARD_PASSPHRASE_FILE", "LANYARD_ASKPASS"].contains { environment[$0].map { !$0.isEmpty } == true }
    }

    func firstLine(_ data: Data, source: String) throws -> String {
        let text = String(decoding: data, as: UTF8.self)
        let line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        let trimmed = line.hasSuffix("\r") ? String(line.dropLast()) : line
        guard !trimmed.isEmpty else { throw PassphraseError("\(source) gave an empty passphrase") }
        return trimmed
    }

    func askpass(_ program: String, prompt: String) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", "exec \"$0\" \"$1\"", program, prompt]
        let out = Pipe()
        p.standardOutput = out
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch { throw PassphraseError("cannot run LANYARD_ASKPASS (\(program))") }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw PassphraseError("LANYARD_ASKPASS exited with status \(p.terminationStatus)") }
        return try firstLine(data, source: "LANYARD_ASKPASS")
    }

    /// Reads from /dev/tty with echo off, restoring the terminal even on error.
    func terminal(prompt: String) throws -> String {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            throw PassphraseError("no terminal to ask for the passphrase; set LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS")
        }
        defer { close(fd) }
        var original = termios()
        tcgetattr(fd, &original)
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        silent.c_lflag |= tcflag_t(ICANON)
        _ = prompt.withCString { Foundation.write(fd, $0, strlen($0)) }
        tcsetattr(fd, TCSAFLUSH, &silent)
        defer {
            tcsetattr(fd, TCSAFLUSH, &original)
            _ = Foundation.write(fd, "\n", 1)
        }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while Foundation.read(fd, &byte, 1) == 1 {
            if byte == 0x0a || byte == 0x0d { break }
            bytes.append(byte)
        }
        defer { for i in bytes.indices { bytes[i] = 0 } }
        guard !bytes.isEmpty else { throw PassphraseError("empty passphrase") }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// No usable passphrase (exit 1); never contains the passphrase.
struct PassphraseError: LanyardError {
    let message: String
    init(_ message: String) { self.message = message }
    var code: String { "passphrase_unavailable" }
    var exitStatus: ExitStatus { .failure }
    var errorDescription: String? { message }
}
