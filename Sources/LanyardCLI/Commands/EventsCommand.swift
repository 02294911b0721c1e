import Glibc
import LanyardCore
import LanyardStore
import LanyardSupport

extension AgentCommands {
    static let events = CommandSpec(
        name: "events",
        summary: "show the event log (refreshes, transitions, errors, switches)",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [
            FlagSpec("follow", short: "f", "keep printing new events as they are logged"),
            FlagSpec("lines", short: "n", value: "N", "show only the last N events"),
        ],
        prints: true,
        takesAccount: false,
        details: """
            The log is $XDG_STATE_HOME/lanyard/events.jsonl (one JSON object a line; never a token), capped at \
            [events] max-bytes and rotated to events.jsonl.1. With --json each event is printed as one JSON line.
            """,
        examples: [
            CommandExample("lanyard events -n 20", "the last 20 refreshes, transitions and errors"),
            CommandExample("lanyard events --follow", "keep printing events as the agent and other commands log them"),
            CommandExample("lanyard events --json | jq 'select(.event == \"error\")'", "only the errors, as JSON"),
        ]
    ) { inv in
        let config = try inv.config()
        let log = EventLog(paths: inv.paths, maxBytes: config.eventsMaxBytes)
        var lines = log.read()
        if let raw = inv.args.value("lines") {
            guard let n = Int(raw), n >= 0 else {
                throw UsageError(message: "--lines needs a number, got \"\(raw)\"", command: "events")
            }
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
            if let exp = event["expires_at"]?.string.flatMap(RFC3339.date(from:)) {
                detail.append("new token expires \(RFC3339.string(from: exp))")
            }
        case "transition":
            detail.append("\(event["from"]?.string ?? "?") -> \(event["to"]?.string ?? "?")")
            if let reason = event["reason"]?.string { detail.append("(\(reason))") }
            if let fix = event["fix"]?.string { detail.append("fix: \(fix)") }
        case "error":
            detail.append(event["code"]?.string ?? "error")
            if let message = event["message"]?.string { detail.append(message) }
        case "switch":
            detail.append("\(event["from"]?.string ?? "-") -> \(event["to"]?.string ?? "?")")
            detail.append("(\(switchReason(event, inv)))")
        case "switch_blocked":
            detail.append("every \(event["provider"]?.string ?? "") slot is at its limit (\(switchReason(event, inv)))")
            if let reset = event["earliest_reset"]?.string.flatMap(RFC3339.date(from:)) {
                detail.append("first reset \(RelativeTime.describe(reset, now: inv.now))")
            }
        default: break
        }
        // The log is a file anyone with the user's rights can write: every field is escaped.
        let name = HumanText(kind)
        let coloured =
            kind == "error" || kind == "switch_blocked"
            ? s.red(name) : kind == "transition" || kind == "switch" ? s.yellow(name) : s.green(name)
        let source = event["source"]?.string.map { "by \($0)" } ?? ""
        let fields = [
            HumanText(event["time"]?.string ?? "-"), coloured, HumanText(event["slot"]?.string ?? "-"),
            HumanText(source),
            HumanText(detail.joined(separator: " ")),
        ]
        inv.stdout.line(HumanText.joined(fields.filter { !$0.isEmpty }, separator: "  "))
    }

    /// Why a `switch` (or `switch_blocked`) happened, in words: the user's `switch`, `switch
    /// --best` and its pick's use, or auto-switching's limit with the window (by its length).
    static func switchReason(_ event: JSONValue, _ inv: Invocation) -> String {
        func percent(_ key: String) -> String? { event[key]?.number.map { "\($0.rounded().saturatingInt) %" } }
        switch event["reason"]?.string {
        case "user": return "switch by the user"
        case "best":
            return "switch --best" + (percent("to_used_percent").map { ": the most headroom, \($0) used" } ?? "")
        case "usage", "all_at_limit":
            let window = event["window_name"]?.string.map { "the \($0) window" }
            let refused = event["trigger"]?.string == "usage_limit_reached"
            let what: String
            if refused || (event["used_percent"]?.number ?? 0) >= 100 {
                what =
                    (window.map { "limit reached on \($0)" } ?? "usage limit reached")
                    + (refused ? " (a request was refused)" : "")
            } else {
                what = "\(window ?? "the busiest window") at \(percent("used_percent") ?? "?"), over the threshold"
            }
            let reset =
                event["resets_at"]?.string.flatMap(RFC3339.date(from:)).map {
                    ", resets \(RelativeTime.describe($0, now: inv.now))"
                } ?? ""
            let to =
                event["reason"]?.string == "usage"
                ? percent("to_used_percent").map { "; \(event["to"]?.string ?? "?") at \($0)" } ?? "" : ""
            return "auto-switch: \(what)\(reset)\(to)"
        case let other?: return other
        case nil: return "reason not logged"
        }
    }

    /// Prints lines appended to the log until killed, following rotation (inotify on the folder).
    static func follow(_ log: EventLog, _ inv: Invocation) {
        try? SecureFiles.ensureDirectory(inv.paths.stateDirectory)
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        if fd >= 0 {
            inotify_add_watch(fd, inv.paths.stateDirectory, UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM))
        }
        var cursor = EventLogCursor(log)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            for event in cursor.newEvents() { print(event, inv) }
            if fd < 0 { return }
            _ = read(fd, &buffer, buffer.count)  // blocks until the folder changes
        }
    }
}
