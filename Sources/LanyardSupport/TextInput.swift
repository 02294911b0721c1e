import FoundationEssentials

#if canImport(Glibc)
#endif

/// Text arriving from another program (a credential helper's standard input), read a line at a
/// time and never further than a line's limit: a line that grows past it, or a NUL byte (never
/// part of text), fails at once, having read at most one chunk beyond it. `readLine()` of the
/// standard library has no limit, so `lanyard git-credential get </dev/zero` used to grow without
/// end; every command reads its input through this instead.
///
/// The bytes come from a ``Source`` (the process's standard input in the CLI, `Data` in tests and
/// programs), asked for in chunks of at most ``chunkSize`` bytes.
package final class TextInput: Sendable {
    /// Fills the buffer with the next bytes: the count read, 0 at the end of input, or a negative
    /// `errno` when reading failed. Called only while a line is incomplete.
    package typealias Source = @Sendable (UnsafeMutableRawBufferPointer) -> Int

    /// Why a line could not be read. Never carries the input itself (it may hold a secret).
    package enum Failure: Error, Equatable, Sendable {
        /// A NUL byte: the input is not text (`/dev/zero`, a binary file).
        case nulByte
        /// The line is longer than `maxBytes` bytes without ending.
        case lineTooLong(maxBytes: Int)
        /// Reading failed with this `errno`.
        case unreadable(errno: Int32)

        /// Says what is wrong, in words that fit after "input line N" or "the input".
        package var problem: String {
            switch self {
            case .nulByte: return "contains a NUL byte (it is not text)"
            case .lineTooLong(let maxBytes): return "is longer than \(ByteCount.describe(maxBytes))"
            case .unreadable(let code): return "cannot be read: \(systemMessage(code))"
            }
        }
    }

    /// The most bytes asked of the source at once.
    package static let chunkSize = 16_384

    private struct State {
        var buffer: [UInt8] = []
        var ended = false
        var failure: Failure?
    }

    private let source: Source
    private let state = Locked(State())

    /// Input read from `source`.
    package init(source: @escaping Source) { self.source = source }

    /// Input that is `data`, then the end.
    package convenience init(_ data: Data) {
        let remaining = Locked(data[...])
        self.init { buffer in
            remaining.withLock { rest in
                let count = min(buffer.count, rest.count)
                buffer.copyBytes(from: rest.prefix(count))
                rest = rest.dropFirst(count)
                return count
            }
        }
    }

    /// Input that has already ended.
    package static var empty: TextInput { TextInput(Data()) }

    /// The next line, without its `\n`; the text after the last `\n` counts as a line; nil at the
    /// end of input. Fails on a NUL byte or a line longer than `maxBytes`, and keeps failing the
    /// same way afterwards (the input is not read any further).
    package func line(maxBytes: Int) throws(Failure) -> String? {
        try state.withLock { (state: inout State) throws(Failure) -> String? in
            if let failure = state.failure { throw failure }
            var scanned = 0
            while true {
                while scanned < state.buffer.count {
                    let byte = state.buffer[scanned]
                    if byte == 0x0A {
                        let line = String(decoding: state.buffer[..<scanned], as: UTF8.self)
                        state.buffer.removeFirst(scanned + 1)
                        return line
                    }
                    if byte == 0 { return try Self.fail(.nulByte, &state) }
                    scanned += 1
                    if scanned > maxBytes { return try Self.fail(.lineTooLong(maxBytes: maxBytes), &state) }
                }
                if state.ended {
                    guard !state.buffer.isEmpty else { return nil }
                    defer { state.buffer.removeAll() }
                    return String(decoding: state.buffer, as: UTF8.self)
                }
                // Never more than the line may still hold (plus one byte, to see it end or overflow).
                let want = min(Self.chunkSize, maxBytes - scanned + 1)
                var chunk = [UInt8](repeating: 0, count: want)
                let count = chunk.withUnsafeMutableBytes { source($0) }
                if count < 0 { return try Self.fail(.unreadable(errno: Int32(-count)), &state) }
                if count == 0 { state.ended = true } else { state.buffer += chunk[..<count] }
            }
        }
    }

    private static func fail(_ failure: Failure, _ state: inout State) throws(Failure) -> String? {
        state.failure = failure
        state.buffer.removeAll()
        throw failure
    }
}

/// Byte counts in words (`64 KiB`, `1 MiB`) for limits named in messages.
package enum ByteCount {
    /// `bytes` in MiB or KiB when it is a whole number of them, else in bytes.
    package static func describe(_ bytes: Int) -> String {
        if bytes >= 1_048_576 && bytes % 1_048_576 == 0 { return "\(bytes / 1_048_576) MiB" }
        if bytes >= 1024 && bytes % 1024 == 0 { return "\(bytes / 1024) KiB" }
        return "\(bytes) bytes"
    }
}
