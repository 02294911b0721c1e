import FoundationEssentials
import Glibc
import LanyardAgent
import LanyardAuth
import LanyardCore
import LanyardStore

/// A second agent for the same user.
struct AgentRunningError: LanyardError {
    let lockPath: String
    var code: String { "agent_running" }
    var errorDescription: String? { "another lanyard agent is already running (it holds \(lockPath))" }
}

enum AgentCommands {
    static let agent = CommandSpec(
        name: "agent", summary: "keep every slot's tokens fresh in the background", arguments: "",
        minArguments: 0, maxArguments: 0,
        flags: [FlagSpec("once", "refresh the slots that are due now, then exit (for a systemd timer)")],
        prints: false, takesAccount: false,
        details: """
        Runs in the foreground until SIGTERM or Ctrl-C. Each signed-in slot is refreshed once it is within \
        [refresh] lead of expiry, plus a random delay of up to [agent] jitter seconds (at most half the lead) \
        so slots do not refresh together. Transient failures are retried with exponential backoff. The \
        agent sleeps until the next due time and wakes early when another process changes the registry. \
        A slot whose session ends raises a desktop notification and runs the [agent] hook. One agent runs \
        per user; it shares the per-slot refresh lock with every other Lanyard command.
        """,
        examples: [
            CommandExample("lanyard agent", "keep every slot fresh, in the foreground until Ctrl-C"),
            CommandExample("systemctl --user enable --now lanyard-agent.service", "run it as a user service (the unit ships with the package)"),
            CommandExample("lanyard agent --once", "refresh what is due and exit (for lanyard-refresh.timer or cron)"),
        ], network: true) { inv in
        let once = inv.args.has("once")
        let config = try inv.config()
        let paths = inv.paths
        setenv("LANYARD_EVENT_SOURCE", "agent", 1)
        var environment = inv.context.environment
        environment["LANYARD_EVENT_SOURCE"] = "agent"
        var manager = try inv.accounts()
        if manager.refreshRunner != nil {
            manager.refreshRunner = RefreshWorker.runner(environment: environment, executable: nil)
        }
        guard let lock = try RefreshAgent.lock(paths: paths) else {
            if once {
                inv.stderr.line("lanyard: the agent is running; nothing to do")
                return .ok
            }
            throw AgentRunningError(lockPath: paths.lockDirectory + "/agent.lock")
        }
        defer { withExtendedLifetime(lock) {} }
        let stderr = inv.stderr
        let agent = RefreshAgent(manager: manager, options: .init(jitter: config.agentJitter, notify: config.agentNotify, hook: config.agentHook),
                                 diagnostics: { stderr.line("lanyard agent: \($0)") })
        if once {
            return try agent.runOnce() == 0 ? .ok : .network
        }
        let stopper = agent.stopper
        let sources = inv.onInterrupt { stopper.stop() }
        defer { sources.forEach { $0.cancel() } }
        stderr.line("lanyard agent: started (pid \(getpid()))")
        try agent.run()
        stderr.line("lanyard agent: stopped")
        return .ok
    }

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
