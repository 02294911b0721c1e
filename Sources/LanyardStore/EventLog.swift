import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport
import LanyardSystem

/// The event log (`$XDG_STATE_HOME/lanyard/events.jsonl`): one JSON object a line for refreshes,
/// state transitions and errors, written by every Lanyard process. Never holds a token.
///
/// Each line has `time` (RFC 3339), `ts` (Unix seconds with fractions), `event`, `source` (who
/// wrote it: `agent`, `cli`, … from `LANYARD_EVENT_SOURCE`), `pid`, and, for slot events, `slot`.
/// Appends go under `events.jsonl.lock`; when a line would take the file past `maxBytes` the file
/// is first renamed to `events.jsonl.1` (one old generation is kept).
package struct EventLog: Sendable {
    package let path: String
    package let maxBytes: Int
    private let directory: String

    package init(paths: Paths, maxBytes: Int = 1 << 20) {
        directory = paths.stateDirectory
        path = paths.stateDirectory + "/events.jsonl"
        self.maxBytes = max(4096, maxBytes)
    }

    package var rotatedPath: String { path + ".1" }

    /// Who this process is in the log.
    package static var source: String {
        if let s = getenv("LANYARD_EVENT_SOURCE"), let v = String(validatingCString: s), !v.isEmpty { return v }
        return "cli"
    }

    /// The line written for an event (exposed for hooks, which receive the same object).
    package static func record(
        _ event: String,
        slot: Slot?,
        fields: [String: JSONValue] = [:],
        now: Date = Date()
    ) -> JSONValue {
        var object = fields
        object["time"] = .string(RFC3339.string(from: now))
        object["ts"] = .number((now.timeIntervalSince1970 * 1000).rounded() / 1000)
        object["event"] = .string(event)
        object["source"] = .string(source)
        object["pid"] = .number(Double(getpid()))
        if let slot { object["slot"] = .string(slot.name) }
        return JSONValue.object(object).droppingNulls
    }

    /// Told, once per process, the first time an event cannot be written (the CLI prints it as a
    /// warning), so a log that stopped working does not go unnoticed.
    package static func reportFailures(to reporter: @escaping @Sendable (String) -> Void) {
        failures.withLock { $0.reporter = reporter }
    }

    private static let failures = Locked<(reporter: (@Sendable (String) -> Void)?, told: Bool)>((nil, false))

    private func failed(_ what: String) {
        let reporter = Self.failures.withLock { state -> (@Sendable (String) -> Void)? in
            if state.told { return nil }
            state.told = true
            return state.reporter
        }
        reporter?("events are not being logged: \(TerminalText.escaped(path)): \(what)")
    }

    /// Why events cannot be appended now, or nil when they can (for `doctor`).
    package func problem() -> String? {
        var st = stat()
        guard lstat(directory, &st) == 0 else { return nil }  // made on the first write
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return "\(TerminalText.escaped(directory)) is not a folder" }
        if lstat(path, &st) != 0 {
            return access(directory, W_OK) == 0
                ? nil : "\(TerminalText.escaped(directory)): \(SystemCallError.reason())"
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return "\(TerminalText.escaped(path)) is not a regular file" }
        let fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return "\(TerminalText.escaped(path)): \(SystemCallError.reason())" }
        close(fd)
        return nil
    }

    /// Appends an event. Best effort: a log that cannot be written never fails the operation
    /// (the first failure of a process goes to ``reportFailures(to:)``'s reporter).
    @discardableResult
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    package func append(_ event: String, slot: Slot?, fields: [String: JSONValue] = [:]) -> JSONValue {
        let record = Self.record(event, slot: slot, fields: fields)
        append(record)
        return record
    }

    /// Appends an `error` event: `code` (written as its raw value, as `--json` writes it),
    /// `message`, and any other `fields`. Every `error` event is written through here, so each
    /// code in the log is an ``ErrorCode`` that docs/cli.md lists.
    @discardableResult
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    package func appendError(
        _ code: ErrorCode,
        slot: Slot?,
        message: String,
        fields: [String: JSONValue] = [:]
    ) -> JSONValue {
        var fields = fields
        fields["code"] = .string(code.rawValue)
        fields["message"] = .string(message)
        return append("error", slot: slot, fields: fields)
    }

    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    package func append(_ record: JSONValue) {
        do { try SecureFiles.ensureDirectory(directory) } catch { return failed(error.userFacingDescription) }
        let line = Array((record.serialized(pretty: false) + "\n").utf8)
        let lock: FileLock
        do { lock = try FileLock(path: path + ".lock") } catch { return failed(error.userFacingDescription) }
        defer { withExtendedLifetime(lock) {} }
        var st = stat()
        if lstat(path, &st) == 0, Int(st.st_size) + line.count > maxBytes, (st.st_mode & S_IFMT) == S_IFREG {
            rename(path, rotatedPath)
        }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            let reason = errno == ELOOP ? "it is a symbolic link" : SystemCallError.reason()
            return failed(reason)
        }
        defer { close(fd) }
        do { try writeAll(fd, line) } catch { return failed(error.reason) }
    }

    /// Every event still on disk, oldest first (the rotated generation, then the current file).
    package func read() -> [JSONValue] {
        var out: [JSONValue] = []
        for file in [rotatedPath, path] {
            guard let data = try? SecureFiles.read(file) else { continue }
            out += Self.parseLines(data)
        }
        return out
    }

    /// Parses complete JSON lines, skipping any that do not parse.
    package static func parseLines(_ data: Data) -> [JSONValue] {
        data.split(separator: 0x0a).compactMap { try? JSONValue.parse(Data($0)) }
    }
}

/// Reads what is appended to an event log after a point, across its rotation: `events --follow`
/// and the agent (a `usage_limit_reached` another process logged) both follow the log with it.
package struct EventLogCursor {
    package let log: EventLog
    /// The file read last (its inode) and the offset after its last complete line.
    private var position: (inode: UInt64, offset: Int)?

    /// A cursor at the log's current end: only events appended from now on are read.
    package init(_ log: EventLog) {
        self.log = log
        position = Self.end(of: log.path)
    }

    /// The complete lines appended since the last call, oldest first. After a rotation the rest of
    /// the previous generation comes first, then the new file from its start; a line still being
    /// written waits for the next call.
    package mutating func newEvents() -> [JSONValue] {
        guard let current = Self.end(of: log.path) else { return [] }
        var events: [JSONValue] = []
        if let read = position, current.inode != read.inode {
            if let rotated = Self.end(of: log.rotatedPath), rotated.inode == read.inode {
                events += Self.completeLines(log.rotatedPath, from: read.offset).events
            }
            position = (current.inode, 0)
        }
        let start = position?.inode == current.inode ? position!.offset : 0
        let (more, end) = Self.completeLines(log.path, from: start)
        position = (current.inode, end)
        return events + more
    }

    /// A file's inode and size, or nil when it does not exist.
    static func end(of path: String) -> (inode: UInt64, offset: Int)? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return (UInt64(st.st_ino), Int(st.st_size))
    }

    /// The complete lines of `path` from byte `offset`, and the offset after the last of them.
    static func completeLines(_ path: String, from offset: Int) -> (events: [JSONValue], end: Int) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return ([], offset) }
        defer { close(fd) }
        guard lseek(fd, off_t(offset), SEEK_SET) >= 0, let data = try? readToEnd(fd),
            let last = data.lastIndex(of: 0x0a)
        else { return ([], offset) }
        return (EventLog.parseLines(Data(data[...last])), offset + last + 1)
    }
}
