import Foundation
import LanyardAuth
import LanyardCore
import LanyardSupport
import Testing

@testable import LanyardIntegrations

/// Input from other programs is read within limits: `lanyard git-credential get </dev/zero` used
/// to grow to gigabytes in seconds (the standard library's `readLine()` has no limit).
@Suite struct TextInputTests {
    /// A source that never ends, counting what it handed out.
    final class Endless: Sendable {
        let pattern: [UInt8]
        let given = Locked(0)
        init(_ pattern: String) { self.pattern = Array(pattern.utf8) }
        var input: TextInput {
            TextInput { [self] buffer in
                for i in 0..<buffer.count { buffer[i] = pattern[i % pattern.count] }
                given.withLock { $0 += buffer.count }
                return buffer.count
            }
        }
    }

    @Test func linesEndAtNewlinesAndTheLastLineNeedsNone() throws {
        let input = TextInput(Data("one\r\n\ntwo\nthree".utf8))
        #expect(try input.line(maxBytes: 10) == "one\r")
        #expect(try input.line(maxBytes: 10) == "")
        #expect(try input.line(maxBytes: 10) == "two")
        #expect(try input.line(maxBytes: 10) == "three")
        #expect(try input.line(maxBytes: 10) == nil)
        #expect(try TextInput.empty.line(maxBytes: 10) == nil)
    }

    @Test func aLineMayBeExactlyItsLimit() throws {
        let input = TextInput(Data("abcd\nabcde\n".utf8))
        #expect(try input.line(maxBytes: 4) == "abcd")
        #expect(throws: TextInput.Failure.lineTooLong(maxBytes: 4)) { try input.line(maxBytes: 4) }
        #expect(throws: TextInput.Failure.lineTooLong(maxBytes: 4), "a failed input stays failed") {
            try input.line(maxBytes: 100)
        }
    }

    @Test func endlessNULsFailAfterOneChunk() {
        let source = Endless("\0")
        let input = source.input
        #expect(throws: TextInput.Failure.nulByte) { try input.line(maxBytes: 65_536) }
        #expect(source.given.withLock { $0 } <= TextInput.chunkSize, "read no further than the first chunk")
        #expect(throws: TextInput.Failure.nulByte) { try input.line(maxBytes: 65_536) }
        #expect(source.given.withLock { $0 } <= TextInput.chunkSize, "nor afterwards")
    }

    @Test func aNULAfterGoodLinesFailsTheLineItIsIn() throws {
        let input = TextInput(Data("good\nba\0d\nnever read\n".utf8))
        #expect(try input.line(maxBytes: 100) == "good")
        #expect(throws: TextInput.Failure.nulByte) { try input.line(maxBytes: 100) }
    }

    @Test func anEndlessLineFailsJustPastItsLimit() {
        let source = Endless("a")
        #expect(throws: TextInput.Failure.lineTooLong(maxBytes: 100_000)) { try source.input.line(maxBytes: 100_000) }
        #expect(source.given.withLock { $0 } == 100_001, "the limit and one byte more, never a chunk beyond")
    }

    @Test func readFailuresAreTyped() {
        let input = TextInput { _ in -Int(EIO) }
        #expect(throws: TextInput.Failure.unreadable(errno: EIO)) { try input.line(maxBytes: 10) }
    }

    @Test func gitAndDockerRequestsAreBoundedWhole() {
        // Short lines that never end: the request limit stops them.
        #expect(
            throws: GitCredentialInputError(
                line: 1_048_576 / 4 + 1,
                problem: "takes the request past 1 MiB, the most it may hold"
            )
        ) {
            try GitCredential.read(Endless("a=b\n").input)
        }
        #expect(throws: DockerCredentialInputError(problem: "the input on stdin is longer than 1 MiB")) {
            try DockerCredential.readInput(Endless("ghcr.io\n").input)
        }
        #expect(throws: DockerCredentialInputError(problem: "a line on stdin is longer than 64 KiB")) {
            try DockerCredential.readInput(Endless("x").input)
        }
    }
}
