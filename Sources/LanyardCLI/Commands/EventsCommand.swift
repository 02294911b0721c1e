import FoundationEssentials
import Glibc
import LanyardAgent
import LanyardAuth
import LanyardCore
import LanyardStore

extension AgentCommands {
    static let events = CommandSpec(
        name: "events", summary: "show the event log (refreshes, transitions, errors)", arguments: "",
        minArguments: 0, maxArguments: 0,
        flags: [FlagSpec("follow", short: "f", "keep printing new events as they are logged"),
                FlagSpec("lines", short: "n", value: "N", "show only the last N events")],
        prints: true, takesAccount: false,
        details: """
        The log is $XDG_STATE_HOME/lanyard/events.jsonl (one JSON object a line; never a token), capped at \
        [events] max-bytes and rotated to events.jsonl.1. With --json each event is printed as one JSON line.
        """,
        examples: [
            CommandExample("lanyard events -n 20", "the last 20 refreshes, transitions and errors"),
            CommandExample("lanyard events --follow", "keep printing events as the agent and other commands log them"),
            CommandExample("lanyard events --json | jq 'select(.event == \"error\")'", "only the errors, as JSON"),
        ]) { inv in
        let config = try inv.config()
        let log = EventLog(paths: inv.paths, maxBytes: config.eventsMaxBytes)
        var lines = log.read()
        if let raw = inv.args.value("lines") {
            guard let n = Int(raw), n >= 0 else { throw UsageError(message: "--lines needs a number, got \"\(raw)\"", command: "events") }
            lines = Array(lines.suffix(n))
        }
        for event in lines { print(event, inv) }
        guard inv.args.has("follow") else { return .ok }
        follow(log, inv)
        return .ok
    }

    static func print(_ event: JSONValue, _ inv: Invocation) {
        if inv.json {
            inv.stdout.rawLine(event.serialized(pretty: false))
            return
        }
        let s = inv.style
        let kind = event["event"]?.string ?? "?"
        var detail: [String] = []
        switch kind {
        case "refresh":
            if let exp = event["expires_at"]?.string.flatMap(RFC3339.date(from:)) { detail.append("new token expires \(RFC3339.string(from: exp))") }
        case "transition":
            detail.append("\(event["from"]?.string ?? "?") -> \(event["to"]?.string ?? "?")")
            if let reason = event["reason"]?.string { detail.append("(\(reason))") }
            if let fix = event["fix"]?.string { detail.append("fix: \(fix)") }
        case "error":
            detail.append(event["code"]?.string ?? "error")
            if let message = event["message"]?.string { detail.append(message) }
        default: break
        }
        // The log is a file anyone with the user's rights can write: every field is escaped.
        let name = HumanText(kind)
        let coloured = kind == "error" ? s.red(name) : kind == "transition" ? s.yellow(name) : s.green(name)
        let source = event["source"]?.string.map { "by \($0)" } ?? ""
        let fields = [HumanText(event["time"]?.string ?? "-"), coloured, HumanText(event["slot"]?.string ?? "-"), HumanText(source),
                      HumanText(detail.joined(separator: " "))]
        inv.stdout.line(HumanText.joined(fields.filter { !$0.isEmpty }, separator: "  "))
    }

    /// The bytes of `path` from `offset` to its end, or nil when it cannot be opened.
    static func bytes(of path: String, from offset: Int) -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var position = off_t(offset)
        while true {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, position) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return data }
            data.append(contentsOf: chunk[..<n])
            position += off_t(n)
        }
    }

    /// Prints lines appended to the log until killed, following rotation (inotify on the folder).
    static func follow(_ log: EventLog, _ inv: Invocation) {
        try? SecureFiles.ensureDirectory(inv.paths.stateDirectory)
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        if fd >= 0 { inotify_add_watch(fd, inv.paths.stateDirectory, UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM)) }
        var offset = fileSize(log.path)
        var inode = fileInode(log.path)
        var pending = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if fileInode(log.path) != inode {  // rotated: read the new file from its start
                inode = fileInode(log.path)
                offset = 0
                pending = Data()
            }
            if let data = bytes(of: log.path, from: offset) {
                offset += data.count
                pending += data
                if let last = pending.lastIndex(of: 0x0a) {
                    for event in EventLog.parseLines(pending[..<last]) { print(event, inv) }
                    pending = Data(pending[(last + 1)...])
                }
            }
            if fd < 0 { return }
            _ = read(fd, &buffer, buffer.count)  // blocks until the folder changes
        }
    }

    static func fileSize(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : 0
    }

    static func fileInode(_ path: String) -> UInt {
        var st = stat()
        return stat(path, &st) == 0 ? UInt(st.st_ino) : 0
    }
}
