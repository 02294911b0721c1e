import FoundationEssentials
import Glibc
import LanyardAgent
import LanyardCore
import LanyardStore

/// A slot as `list`, `status` and `--json` show it: registry data, never a secret. In key order.
func slotSummaryFields(_ slot: Slot, _ record: SlotRecord, active: Bool) -> [(key: StaticString, value: JSONValue)] {
    var stateMessage: String?
    if case .failed(let message) = record.state { stateMessage = message }
    return [
        ("account_id", .optional(record.account.accountID)), ("active", .bool(active)), ("backend", .string(record.backend.rawValue)),
        ("email", .optional(record.account.email)), ("expires_at", .date(record.expiresAt)),
        ("fedramp", .bool(record.account.isFedRAMPAccount)), ("last_error", .optional(record.lastErrorCode)),
        ("last_refresh", .date(record.lastRefresh)), ("plan", .optional(record.account.plan?.rawValue)),
        ("plan_name", .optional(record.account.plan?.displayName)), ("provider", .string(record.provider)),
        ("slot", .string(slot.name)), ("state", .string(record.state.name)), ("state_message", .optional(stateMessage)),
    ]
}

/// ``slotSummaryFields(_:_:active:)`` as one object.
func slotSummary(_ slot: Slot, _ record: SlotRecord, active: Bool) -> [String: JSONValue] {
    Dictionary(uniqueKeysWithValues: slotSummaryFields(slot, record, active: active).map { ("\($0.key)", $0.value) })
}

/// The `list --json` document, written field by field (no dictionary per slot) and handed to
/// `sink` in pieces of about 64 KiB (never held whole): the same bytes as serializing
/// `{"active", "slots": [summary…]}` and a newline, at a fraction of the cost for many slots.
func writeListDocument(_ document: RegistryDocument, pretty: Bool, to sink: ([UInt8]) -> Void) {
    let piece = 1 << 16
    var writer = JSONWriter(pretty: pretty, capacity: piece + 4096)
    writer.beginObject()
    writer.key("active")
    writer.value(.optional(document.active?.name))
    writer.key("slots")
    writer.beginArray()
    // Sorted names, each record looked up: no sorted copy of every record.
    for slot in document.slots.keys.sorted() {
        guard let record = document.slots[slot] else { continue }
        writer.beginObject()
        for field in slotSummaryFields(slot, record, active: slot == document.active) {
            writer.key(field.key)
            writer.value(field.value)
        }
        writer.endObject()
        if writer.bytes.count >= piece { writer.flush(to: sink) }
    }
    writer.endArray()
    writer.endObject()
    writer.newline()
    writer.flush(to: sink)
}

enum SlotCommands {
    /// `status --watch`: redraws on registry changes (inotify), never polls the store.
    static func watch(_ inv: Invocation) throws -> ExitStatus {
        let watcher = inv.registry.watch()
        defer { watcher.close() }
        var last: RegistryDocument?
        while true {
            let document = try inv.registry.load()
            if inv.json {
                if document != last { writeListDocument(document, pretty: false) { inv.stdout.write(bytes: $0) } }
            } else if inv.context.stdoutIsTTY || document != last {
                let s = inv.style
                let now = inv.now
                let rows = document.sortedSlots.map { slot, record -> [HumanText] in
                    let active = slot == document.active
                    return [active ? s.green("*") : " ", active ? s.bold(slot.name) : "\(slot.name)", "\(record.account.email ?? "-")",
                            s.state(record.state), "\(record.expiresAt.map { RelativeTime.describe($0, now: now) } ?? "-")",
                            "\(record.lastRefresh.map { RelativeTime.describe($0, now: now) } ?? "-")", "\(record.lastErrorCode ?? "-")"]
                }
                var screen: HumanText = inv.context.stdoutIsTTY ? .control(.clearScreen) : ""
                screen += "lanyard status --watch  \(RFC3339.string(from: now))\n\n"
                screen += rows.isEmpty ? "No slots yet.\n"
                    : Table.render(header: [" ", "SLOT", "ACCOUNT", "STATE", "EXPIRES", "REFRESHED", "LAST ERROR"], rows: rows, style: s)
                inv.stdout.write(screen + (inv.context.stdoutIsTTY ? "" : "\n"))
            }
            last = document
            _ = watcher.wait(timeout: inv.json ? 3600 : 15)
        }
    }

    static let list = CommandSpec(
        name: "list", summary: "list every slot with its account, plan and state", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [FlagSpec("names", "print only the slot names, one per line (for scripts and completions)")],
        prints: true, takesAccount: false,
        details: "Reads only the registry: no keyring or store is unlocked.",
        examples: [
            CommandExample("lanyard list", "every slot, its account, plan, state and expiry"),
            CommandExample("lanyard list --names", "only the names, one a line (for scripts)"),
            CommandExample("lanyard list --json | jq -r '.slots[] | select(.state != \"signed-in\") | .slot'", "the slots that need attention"),
        ]) { inv in
        let document = try inv.registry.load()
        if inv.args.has("names") {
            inv.emit(.object(["names": .array(document.sortedSlots.map { .string($0.0.name) })])) {
                for (slot, _) in document.sortedSlots { inv.stdout.line("\(slot.name)") }
            }
            return .ok
        }
        if inv.json {
            writeListDocument(document, pretty: true) { inv.stdout.write(bytes: $0) }
            return .ok
        }
        if document.slots.isEmpty {
            inv.stdout.line("No slots yet. Sign an account in with `lanyard login`.")
        } else {
            let s = inv.style
            let rows = document.sortedSlots.map { slot, record -> [HumanText] in
                let active = slot == document.active
                return [active ? s.green("*") : " ", active ? s.bold(slot.name) : "\(slot.name)", "\(record.provider)",
                        "\(record.account.email ?? "-")", "\(record.account.plan?.displayName ?? "-")", s.state(record.state),
                        "\(record.expiresAt.map { RelativeTime.describe($0, now: inv.now) } ?? "-")", "\(record.backend.rawValue)"]
            }
            inv.stdout.write(Table.render(header: [" ", "SLOT", "PROVIDER", "ACCOUNT", "PLAN", "STATE", "EXPIRES", "BACKEND"],
                                          rows: rows, style: s))
        }
        return .ok
    }

    static let status = CommandSpec(
        name: "status", summary: "show one slot in detail (the resolved slot by default)", arguments: "[SLOT]",
        minArguments: 0, maxArguments: 1,
        flags: [FlagSpec("watch", short: "w", "show every slot live, redrawn whenever the registry changes (until Ctrl-C)")],
        prints: true, takesAccount: true,
        details: """
        Exit status: 0 signed in, 3 signed out, 4 sign-in required, 1 failed. \
        With --watch: a table of every slot, redrawn on each change (and every 15 s for the times); \
        with --json, one `list` document a line on each change.
        """,
        examples: [
            CommandExample("lanyard status", "the slot commands act on here, in detail, and the rule that chose it"),
            CommandExample("lanyard status work --json", "one slot for scripts (exit 3 signed out, 4 sign-in required)"),
            CommandExample("lanyard status --watch", "a live table of every slot, until Ctrl-C"),
        ]) { inv in
        if inv.args.has("watch") { return try watch(inv) }
        let view = try inv.registry.view()
        let (slot, record, rule) = try inv.targetSlot(positional: inv.args.positionals.first, in: view)
        let active = try view.active()
        var summary = slotSummary(slot, record, active: slot == active)
        summary["chosen_by"] = .optional(rule?.name)
        inv.emit(.object(summary)) {
            let s = inv.style
            func time(_ d: Date?) -> String {
                d.map { "\(RelativeTime.describe($0, now: inv.now)) (\(RFC3339.string(from: $0)))" } ?? "-"
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
            if record.account.isFedRAMPAccount { lines.insert(("fedramp", "yes"), at: 4) }
            if let rule { lines.append(("chosen by", "\(rule.explanation)")) }
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

    static let switchSlot = CommandSpec(
        name: "switch", summary: "make SLOT the active slot (--best: the one with most usage headroom)", arguments: "[SLOT]",
        minArguments: 0, maxArguments: 1,
        flags: [FlagSpec("best", "choose among the active provider's slots by the usage endpoint, and say why")],
        prints: true, takesAccount: false,
        details: """
        The active slot is used when no --account, LANYARD_ACCOUNT or .lanyard file chooses one. With `[integrations] codex = true` \
        Codex's auth.json follows: tokens Codex rotated are first copied back into the slot that was active.
        """,
        examples: [
            CommandExample("lanyard switch personal", "make personal the slot used when nothing else chooses one"),
            CommandExample("lanyard switch --best", "switch to the slot with the most usage headroom, and say why"),
        ], networkFlags: ["best"]) { inv in
        var reasons: [JSONValue] = []
        let slot: Slot
        let manager = try inv.accounts()
        if inv.args.has("best") {
            guard inv.args.positionals.isEmpty else { throw UsageError(message: "give a SLOT or --best, not both", command: "switch") }
            (slot, reasons) = try BestSlotView.choose(inv, manager)
        } else {
            guard let name = inv.args.positionals.first else { throw UsageError(message: "missing argument: usage: \(inv.spec.usage)", command: "switch") }
            slot = try parseSlot(name, inv)
        }
        let environment = inv.context.environment
        let outcome = try inv.runAsync { try await manager.switchActive(to: slot, environment: environment) }
        let previous = outcome.change.previous
        var output: [String: JSONValue] = ["active": .string(slot.name), "previous": .optional(previous?.name)]
        if !reasons.isEmpty { output["candidates"] = .array(reasons) }
        if let codex = outcome.codex { output["codex"] = CodexFollowView.render(codex, previous: previous, inv) }
        if let other = outcome.codexStillUses {
            output["codex_still_uses"] = .string(other)
            if !inv.json {
                inv.stderr.line("lanyard: Codex still uses \(other): set `[integrations] codex = true` in config.ini, "
                                + "or run `lanyard codex export` (Codex does not follow `switch` otherwise)")
            }
        }
        inv.emit(.object(output)) {
            let who = outcome.change.record.account.email.map { " (\($0))" } ?? ""
            inv.stdout.line(previous == slot ? "\(slot.name)\(who) is already active." : "Switched to \(slot.name)\(who).")
        }
        return .ok
    }

    static let rename = CommandSpec(
        name: "rename", summary: "rename a slot, moving its stored credential", arguments: "OLD NEW",
        minArguments: 2, maxArguments: 2, flags: [], prints: true, takesAccount: false,
        details: "The credential is copied to the new name and read back before the old one is deleted.",
        examples: [
            CommandExample("lanyard rename alice-example-com alice", "give a slot named after an email a shorter name"),
        ]) { inv in
        let old = try parseSlot(inv.args.positionals[0], inv)
        let new = try parseSlot(inv.args.positionals[1], inv)
        let outcome = try inv.accounts().rename(old, to: new)
        for warning in outcome.warnings { inv.stderr.line("lanyard: warning: \(warning)") }
        inv.emit(.object(["from": .string(old.name), "to": .string(new.name)])) { inv.stdout.line("Renamed \(old.name) to \(new.name).") }
        return .ok
    }

    static let remove = CommandSpec(
        name: "remove", summary: "delete a slot and its stored credential (never revokes it)", arguments: "SLOT",
        minArguments: 1, maxArguments: 1, flags: [FlagSpec("yes", short: "y", "do not ask for confirmation")],
        prints: true, takesAccount: false,
        details: "Without --yes it asks on a terminal and refuses when there is no terminal.",
        examples: [
            CommandExample("lanyard remove old", "delete the slot old and its stored credential (asks first)"),
            CommandExample("lanyard remove old --yes", "the same without asking (scripts)"),
        ]) { inv in
        let slot = try parseSlot(inv.args.positionals[0], inv)
        let manager = try inv.accounts()
        let record = try manager.record(of: slot)
        if !inv.args.has("yes") {
            guard inv.context.stdinIsTTY else {
                throw UsageError(message: "refusing to remove \(slot.name) without --yes (no terminal to ask)", command: "remove")
            }
            let who = record.account.email.map { " (\($0))" } ?? ""
            guard inv.confirm("Remove slot \(slot.name)\(who) and its stored credential?") else {
                inv.stderr.line("Nothing removed.")
                return .failure  // a "no" is an answer, not an interruption (130 is for Ctrl-C)
            }
        }
        try manager.remove(slot)
        inv.emit(.object(["removed": .string(slot.name)])) { inv.stdout.line("Removed \(slot.name).") }
        return .ok
    }

    static func parseSlot(_ raw: String, _ inv: Invocation) throws -> Slot {
        do { return try Slot(raw) } catch { throw UsageError(message: error.userFacingDescription, command: inv.spec.name) }
    }
}
