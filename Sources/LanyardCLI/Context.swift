import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardSystem

/// Where a command writes text: a file descriptor, or a buffer that tests read back. Text for
/// people goes in as ``HumanText`` (outside text escaped); machine output (JSON, shell code, a
/// token, a protocol's answer) through ``raw(_:)`` and ``rawLine(_:)``.
package final class TextSink: Sendable {
    private let fd: Int32?
    private let buffer = Locked("")

    /// Writes to a file descriptor (1 or 2).
    package init(fd: Int32) { self.fd = fd }
    /// Collects text in memory.
    package init() { fd = nil }

    /// Writes text for people.
    func write(_ text: HumanText) { raw(text.rendered) }

    /// Writes a line of text for people.
    func line(_ text: HumanText = "") { raw(text.rendered + "\n") }

    /// Writes machine output as it is: its format does its own escaping.
    package func raw(_ text: String) {
        if fd != nil { write(bytes: Array(text.utf8)) } else { buffer.withLock { $0 += text } }
    }

    /// Writes a line of machine output as it is.
    package func rawLine(_ text: String) { raw(text + "\n") }

    /// Writes UTF-8 bytes as they are (long outputs, without making a String of them first).
    package func write(bytes: [UInt8]) {
        if let fd {
            // A closed reader (EPIPE; SIGPIPE is ignored) ends the output, as it did the reader.
            try? writeAll(fd, bytes)
        } else {
            buffer.withLock { $0 += String(decoding: bytes, as: UTF8.self) }
        }
    }

    /// What was written, for buffer sinks.
    package var text: String { buffer.withLock { $0 } }
}

/// Opens the credential store of a backend; injected so tests choose real stores in private places.
package typealias ConfiguredStoreOpener =
    @Sendable (_ kind: BackendKind, _ config: LanyardConfig, _ paths: Paths, _ interactive: Bool) throws ->
    any CredentialStore

/// Streams a Responses request as a slot's account under a transport policy; LanyardNetwork's
/// `ResponseStreamer` in `lanyard-net`, nil in `lanyard` (which hands `ask` over).
package typealias ResponseStreamFactory =
    @Sendable (
        _ manager: AccountManager, _ slot: Slot, _ policy: StreamingTransportPolicy,
        _ request: ResponseRequest
    ) -> ResponseStream

/// Everything a command may touch, injected: IO streams, environment, working directory, clock
/// and the store opener. No command reads global state.
package struct CommandContext: Sendable {
    package var stdout: TextSink
    package var stderr: TextSink
    /// Standard input, read a line at a time within limits (helper protocols, prompts,
    /// confirmations).
    package var input: TextInput
    package var environment: [String: String]
    package var workingDirectory: String
    package var clock: any WallClock
    package var stdoutIsTTY: Bool
    package var stderrIsTTY: Bool
    package var stdinIsTTY: Bool
    package var openStore: ConfiguredStoreOpener
    /// HTTP to providers, when injected whole (tests).
    package var transport: (any HTTPTransport)?
    /// Makes the HTTP transport for a timeout; nil in the `lanyard` binary, which hands commands
    /// that need the network to `lanyard-net`.
    package var transportFactory: (@Sendable (TimeInterval) -> any HTTPTransport)?
    /// Streams responses (`ask`); nil in the `lanyard` binary, like `transportFactory`.
    package var streamFactory: ResponseStreamFactory?
    /// How waits happen (tests inject a fast or manual one).
    package var sleeper: any Sleeper
    /// Whether Ctrl-C cancels long operations (true for the real process only).
    package var handlesSignals: Bool

    package init(
        stdout: TextSink,
        stderr: TextSink,
        input: TextInput = .empty,
        environment: [String: String],
        workingDirectory: String,
        clock: any WallClock = SystemClock(),
        stdoutIsTTY: Bool = false,
        stderrIsTTY: Bool = false,
        stdinIsTTY: Bool = false,
        openStore: @escaping ConfiguredStoreOpener = StoreOpeners.unavailable,
        transport: (any HTTPTransport)? = nil,
        transportFactory: (@Sendable (TimeInterval) -> any HTTPTransport)? = nil,
        streamFactory: ResponseStreamFactory? = nil,
        sleeper: any Sleeper = TaskSleeper(),
        handlesSignals: Bool = false
    ) {
        self.stdout = stdout
        self.stderr = stderr
        self.input = input
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.clock = clock
        self.stdoutIsTTY = stdoutIsTTY
        self.stderrIsTTY = stderrIsTTY
        self.stdinIsTTY = stdinIsTTY
        self.openStore = openStore
        self.transport = transport
        self.transportFactory = transportFactory
        self.streamFactory = streamFactory
        self.sleeper = sleeper
        self.handlesSignals = handlesSignals
    }

    /// The process's real streams, environment and working directory.
    package static func process(
        transportFactory: (@Sendable (TimeInterval) -> any HTTPTransport)?,
        streamFactory: ResponseStreamFactory? = nil
    ) -> CommandContext {
        CommandContext(
            stdout: TextSink(fd: 1),
            stderr: TextSink(fd: 2),
            input: standardInput(),
            environment: processEnvironment(),
            workingDirectory: currentDirectory(),
            stdoutIsTTY: isatty(1) == 1,
            stderrIsTTY: isatty(2) == 1,
            stdinIsTTY: isatty(0) == 1,
            openStore: StoreOpeners.system,
            transportFactory: transportFactory,
            streamFactory: streamFactory,
            handlesSignals: true
        )
    }
}

/// Store openers.
package enum StoreOpeners {
    /// Opens no store (for contexts that must not touch any backend).
    package static let unavailable: ConfiguredStoreOpener = { kind, _, _, _ in
        throw StoreError.unavailable(backend: kind.displayName, hint: "no credential store is configured here")
    }

    /// The real backends.
    package static let system: ConfiguredStoreOpener = { kind, config, paths, interactive in
        // The store's variables only: this runs at every store open, and the whole environment is not needed.
        var variables: [String: String] = [:]
        if kind == .file {
            for name in CredentialStores.storeVariables { variables[name] = getenv(name).map { String(cString: $0) } }
        }
        return CredentialStores.open(
            kind,
            config: config,
            paths: paths,
            interactive: interactive,
            passphraseEnvironment: variables
        )
    }
}

/// Standard input (descriptor 0), retrying reads a signal interrupted and waiting when it was
/// opened non-blocking.
func standardInput() -> TextInput {
    TextInput { buffer in
        while true {
            let count = read(0, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK {
                var waiting = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
                _ = poll(&waiting, 1, -1)
                continue
            }
            return -Int(code)
        }
    }
}

/// The working directory from getcwd(3), or "/" when it cannot be named (deleted, or no
/// permission on a parent): pins are then looked for from the root only.
func currentDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return "/" }
    return String(nulTerminated: buffer)
}

/// The process environment read straight from `environ` (ProcessInfo's costs ~1 ms at start-up):
/// each entry's name and value are made from the bytes either side of its first `=` in place.
func processEnvironment() -> [String: String] {
    var count = 0
    while environ[count] != nil { count += 1 }
    var result = [String: String](minimumCapacity: count)
    for index in 0..<count {
        guard let entry = environ[index] else { continue }
        let length = strlen(entry)
        entry.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
            let all = UnsafeBufferPointer(start: bytes, count: length)
            guard let eq = all.firstIndex(of: UInt8(ascii: "=")) else { return }
            result[String(decoding: UnsafeBufferPointer(rebasing: all[..<eq]), as: UTF8.self)] =
                String(decoding: UnsafeBufferPointer(rebasing: all[(eq + 1)...]), as: UTF8.self)
        }
    }
    return result
}
