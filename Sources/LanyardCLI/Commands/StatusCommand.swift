import FoundationEssentials
import LanyardCore
import LanyardFleet
import LanyardIntegrations
import LanyardStore
import LanyardSupport
import LanyardSystem

extension SlotCommands {
    static let status = CommandSpec(
        name: "status",
        summary: "show one slot in detail (the resolved slot by default)",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [
            FlagSpec("watch", short: "w", "show every slot live, redrawn whenever the registry changes (until Ctrl-C)")
        ],
        prints: true,
        takesAccount: true,
        details: """
            Exit status: 0 signed in, 3 signed out, 4 sign-in required, 1 failed. \
            With --watch: a table of every slot, redrawn on each change (and every 15 s for the times); \
            with --json, one `list` document a line on each change.
            """,
        examples: [
            CommandExample("lanyard status", "the slot commands act on here, in detail, and the rule that chose it"),
            CommandExample(
                "lanyard status work --json",
                "one slot for scripts (exit 3 signed out, 4 sign-in required)"
            ),
            CommandExample("lanyard status --watch", "a live table of every slot, until Ctrl-C"),
        ]
    ) { inv in
        if inv.args.has("watch") { return try watch(inv) }
        let view = try inv.registry.view()
        let (slot, record, rule) = try inv.targetSlot(positional: inv.args.positionals.first, in: view)
        let active = try view.active()
        let autoSwitch = try inv.config().autoSwitch
        let lastSwitch = AutoSwitchState.load(inv.paths).lastSwitch
        // A block left from before `auto = off` is not news: nothing is checking any more.
        let blocked = autoSwitch.mode == .usage ? AutoSwitchState.blocked(paths: inv.paths, active: active) : nil
        let shared = SharedSlotState.loadIfReadable(slot, paths: inv.paths)?.fleet
        let summary = SlotSummaryView(slot: slot, record: record, active: slot == active, shared: shared)
        inv.emit(
            StatusView(
                summary: summary,
                chosenBy: rule?.name,
                autoSwitch: autoSwitch,
                lastSwitch: lastSwitch,
                blocked: blocked
            )
        ) {
            let s = inv.style
            func time(_ d: Date?) -> String {
                d.map { RelativeTime.describe($0, now: inv.now) } ?? "-"
            }
            var lines: [(String, HumanText)] = [
                ("provider", "\(record.provider)"),
                ("account", "\(record.account.email ?? "-")"),
                ("plan", "\(record.account.plan?.displayName ?? "-")"),
                ("account id", "\(record.account.accountID ?? "-")"),
                ("state", s.state(record.state)),
                ("expires", "\(time(record.expiresAt))"),
                ("last refresh", "\(time(record.lastRefresh))"),
                ("last error", "\(record.lastErrorCode ?? "-")"),
                ("backend", "\(record.backend.displayName)"),
            ]
            if !record.rotates {
                // A personal access token: no expiry Lanyard knows, and nothing refreshes it.
                lines[5] = ("expires", "never refreshed: a personal access token (it does not rotate)")
            }
            if let shared { lines.append(("shared", "in fleet \(shared) (`lanyard fleet status`)")) }
            if record.account.isFedRAMPAccount { lines.insert(("fedramp", "yes"), at: 4) }
            if let rule { lines.append(("chosen by", "\(rule.explanation)")) }
            lines.append(
                (
                    "auto-switch",
                    autoSwitch.mode == .off
                        ? "off"
                        : "at \(autoSwitch.threshold.rounded().saturatingInt) % usage, "
                            + "checked every \(RelativeTime.span(autoSwitch.poll))"
                )
            )
            if let last = lastSwitch, let from = last["from"]?.string, let to = last["to"]?.string {
                let when =
                    last["time"]?.string.flatMap(RFC3339.date(from:)).map { RelativeTime.describe($0, now: inv.now) }
                    ?? "-"
                let used = last["used_percent"]?.number.map { ": \(from) at \($0.rounded().saturatingInt) %" } ?? ""
                lines.append(("last switch", "\(from) → \(to) \(when)\(used)"))
            }
            if let blocked { lines.append(("switch held", blockedText(blocked, inv))) }
            inv.stdout.line(s.bold(slot.name) + (slot == active ? " (active)" : ""))
            for (key, value) in lines { inv.stdout.line("  \(key.padded(toWidth: 13))\(value)") }
        }
        switch record.state {
        case .signedOut: return .notSignedIn
        case .reauthenticationRequired: return .reauthenticationRequired
        case .failed: return .failure
        default: return .ok
        }
    }

    /// A blocked auto-switch in words: what is blocked (every slot of the provider out, the
    /// active one at which window) and until when (the earliest reset of any of them).
    static func blockedText(_ blocked: JSONValue, _ inv: Invocation) -> HumanText {
        let slot = blocked["slot"]?.string ?? "?"
        let window = blocked["window_name"]?.string.map { " of its \($0) window" } ?? ""
        let used = blocked["used_percent"]?.number.map { "\($0.rounded().saturatingInt) %" } ?? "its limit"
        let until =
            blocked["earliest_reset"]?.string.flatMap(RFC3339.date(from:)).map { reset in
                reset > inv.now
                    ? "until the first reset \(RelativeTime.describe(reset, now: inv.now))"
                    : "the first reset was \(RelativeTime.describe(reset, now: inv.now)): the next check switches"
            } ?? "no reset time known"
        return "every \(blocked["provider"]?.string ?? "") slot is at its limit (\(slot) at \(used)\(window)); \(until)"
    }

    /// `status --watch`: redraws on registry changes (inotify), never polls the store.
    static func watch(_ inv: Invocation) throws -> ExitStatus {
        let watcher = inv.registry.watch()
        defer { watcher.close() }
        var last: RegistryDocument?
        while true {
            let document = try inv.registry.load()
            if inv.json {
                if document != last {
                    ListView(document: document, shared: SharedSlotState.fleets(paths: inv.paths)).write(pretty: false)
                    { inv.stdout.write(bytes: $0) }
                }
            } else if inv.context.stdoutIsTTY || document != last {
                let s = inv.style
                let now = inv.now
                let rows = document.sortedSlots.map { slot, record -> [HumanText] in
                    let active = slot == document.active
                    return [
                        active ? s.green("*") : " ", active ? s.bold(slot.name) : "\(slot.name)",
                        "\(record.account.email ?? "-")",
                        s.state(record.state), "\(record.expiresAt.map { RelativeTime.describe($0, now: now) } ?? "-")",
                        "\(record.lastRefresh.map { RelativeTime.describe($0, now: now) } ?? "-")",
                        "\(record.lastErrorCode ?? "-")",
                    ]
                }
                var screen: HumanText = inv.context.stdoutIsTTY ? .control(.clearScreen) : ""
                screen += "lanyard status --watch  \(RFC3339.string(from: now))\n\n"
                screen +=
                    rows.isEmpty
                    ? "No slots yet.\n"
                    : Table.render(
                        header: [" ", "SLOT", "ACCOUNT", "STATE", "EXPIRES", "REFRESHED", "LAST ERROR"],
                        rows: rows,
                        style: s
                    )
                inv.stdout.write(screen + (inv.context.stdoutIsTTY ? "" : "\n"))
            }
            last = document
            _ = watcher.wait(timeout: inv.json ? 3600 : 15)
        }
    }
}

/// `status --json`: the slot's summary, the rule that chose it and the auto-switch settings.
struct StatusView: JSONView {
    static let keys = SlotSummaryView.keys + ["chosen_by", "auto_switch"]
    let summary: SlotSummaryView
    /// The rule's name; nil when SLOT was given.
    let chosenBy: String?
    let autoSwitch: AutoSwitchPolicy
    /// The last `switch` event auto-switching logged.
    let lastSwitch: JSONValue?
    /// The `switch_blocked` event of an auto-switch blocked now (every slot out).
    let blocked: JSONValue?
    var json: JSONValue {
        var object = summary.object
        object["chosen_by"] = .optional(chosenBy)
        object["auto_switch"] = .object([
            "auto": .string(autoSwitch.mode.rawValue), "threshold": .number(autoSwitch.threshold),
            "poll": .number(autoSwitch.poll), "last_switch": lastSwitch ?? .null, "blocked": blocked ?? .null,
        ])
        return .object(object)
    }
}
