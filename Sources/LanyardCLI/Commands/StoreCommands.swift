import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore

enum StoreCommands {
    static let token = CommandSpec(
        name: "token", summary: "print the slot's access token (for scripts)", arguments: "[SLOT]",
        minArguments: 0, maxArguments: 1, flags: [], prints: true, takesAccount: true,
        details: """
        Refreshes first when the token expires within the refresh lead (one refresh per slot across processes). \
        Prints only the token and a newline, so `$(lanyard token)` works. Exit 3 when the slot has none, 4 when it must sign in again.
        """) { inv in
        let document = try inv.registry.load()
        let (slot, _, _) = try inv.targetSlot(positional: inv.args.positionals.first, in: document)
        let manager = try inv.accounts()
        let credential = try inv.freshCredential(manager, slot: slot)
        inv.emit(JSONValue.object(["slot": .string(slot.name), "access_token": .string(credential.tokens.accessToken),
                                   "expires_at": .date(credential.tokens.expiresAt)]).droppingNulls) {
            inv.stdout.line(credential.tokens.accessToken)
        }
        return .ok
    }

    static let doctor = CommandSpec(
        name: "doctor", summary: "check backends and registry ↔ store consistency", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [FlagSpec("repair", "rebuild the registry from what the backends hold")],
        prints: true, takesAccount: false,
        details: "Exit status 0 when everything is consistent (or was repaired), 1 when problems remain.") { inv in
        let config = try inv.config()
        var document = try inv.registry.load()
        let kinds = Set(BackendKind.allCases)

        var backends: [JSONValue] = []
        var humanBackends: [String] = []
        var itemsByBackend: [BackendKind: Set<Slot>] = [:]
        var problems: [String] = []
        for kind in BackendKind.allCases where kinds.contains(kind) {
            var health = StoreHealth(backend: kind, reachable: false, locked: false, persistent: false)
            do {
                let store = try inv.store(kind)
                health = store.health()
                if health.reachable && !health.locked { itemsByBackend[kind] = Set(try store.list()) }
            } catch {
                health.problem = error.localizedDescription
            }
            backends.append(.object([
                "backend": .string(kind.rawValue), "reachable": .bool(health.reachable), "locked": .bool(health.locked),
                "persistent": .bool(health.persistent), "location": .optional(health.location), "problem": .optional(health.problem),
            ]))
            let words = !health.reachable ? "not reachable" + (health.problem.map { ": \($0)" } ?? "")
                : [health.locked ? "locked" : "unlocked", health.persistent ? "survives reboot" : "lost at logout or reboot"]
                    .joined(separator: ", ") + (health.location.map { " (\($0))" } ?? "")
            humanBackends.append("  \(kind.displayName.padding(toLength: 16, withPad: " ", startingAt: 0))\(words)")
            if !health.reachable || health.locked, document.slots.values.contains(where: { $0.backend == kind }) {
                problems.append("\(kind.displayName) is \(health.reachable ? "locked" : "not reachable")")
            }
        }

        var slotRows: [JSONValue] = []
        var humanSlots: [String] = []
        var missingItems: [Slot] = []
        for (slot, record) in document.sortedSlots {
            let items = itemsByBackend[record.backend]
            let status: String
            if let items {
                if items.contains(slot) { status = "ok" } else if case .signedOut = record.state { status = "signed out" } else {
                    status = "missing item"
                    missingItems.append(slot)
                }
            } else {
                status = "unchecked (backend unavailable)"
            }
            slotRows.append(.object(["slot": .string(slot.name), "backend": .string(record.backend.rawValue), "status": .string(status)]))
            humanSlots.append("  \(slot.name.padding(toLength: 16, withPad: " ", startingAt: 0))\(record.backend.displayName.padding(toLength: 16, withPad: " ", startingAt: 0))\(status)")
        }
        var orphans: [(Slot, BackendKind)] = []
        for (kind, items) in itemsByBackend {
            for slot in items.sorted() where document.slots[slot]?.backend != kind {
                orphans.append((slot, kind))
            }
        }

        var repaired: [String] = []
        let recoveries = RecoveryFiles.pending(paths: inv.paths)
        if inv.args.has("repair") && !recoveries.isEmpty {
            for slot in try inv.accounts().restoreRecoveryFiles() {
                repaired.append("restored refreshed tokens of \(slot.name) from its recovery file")
                missingItems.removeAll { $0 == slot }
            }
        } else if !recoveries.isEmpty {
            problems.append("refreshed tokens wait in recovery files for: \(recoveries.map(\.name).joined(separator: ", "))")
        }
        // Registry ↔ backend mismatches are what --repair fixes.
        var mismatches = missingItems.map { "\($0.name) has no stored credential" }
            + orphans.map { "\($0.1.displayName) holds \($0.0.name), which the registry does not list" }
        if inv.args.has("repair") && !mismatches.isEmpty {
            try inv.registry.update { doc in
                for (slot, kind) in orphans where doc.slots[slot] == nil {
                    let store = try inv.store(kind)
                    let credential = try store.get(slot)
                    // A credential whose refresh token was dropped (refused for good) must sign in again.
                    let state: AuthState = credential.tokens.refreshToken == nil
                        ? .reauthenticationRequired : .signedIn(expiresAt: credential.tokens.expiresAt)
                    doc.slots[slot] = SlotRecord(provider: credential.provider, backend: kind, account: credential.account,
                                                 state: state, lastRefresh: credential.lastRefresh, createdAt: inv.now)
                    repaired.append("added \(slot.name) from \(kind.displayName)" + (state == .reauthenticationRequired ? " (it must sign in again)" : ""))
                }
                for slot in missingItems where doc.slots[slot] != nil {
                    doc.slots[slot]?.state = .signedOut
                    repaired.append("marked \(slot.name) signed out (no stored credential)")
                }
            }
            document = try inv.registry.load()
            mismatches = []
        }
        problems += mismatches

        inv.emit(.object([
            "registry": .string(inv.registry.path), "backends": .array(backends), "slots": .array(slotRows),
            "unregistered_items": .array(orphans.map { .object(["slot": .string($0.0.name), "backend": .string($0.1.rawValue)]) }),
            "problems": .array(problems.map(JSONValue.string)), "repaired": .array(repaired.map(JSONValue.string)),
        ])) {
            let s = inv.style
            inv.stdout.line(s.bold("Registry") + "  \(inv.registry.path) (\(document.slots.count) slot\(document.slots.count == 1 ? "" : "s"))")
            inv.stdout.line(s.bold("Backends"))
            for line in humanBackends { inv.stdout.line(line) }
            if !humanSlots.isEmpty {
                inv.stdout.line(s.bold("Slots"))
                for line in humanSlots { inv.stdout.line(line) }
            }
            for line in repaired { inv.stdout.line(s.green("repaired: ") + line) }
            if problems.isEmpty {
                inv.stdout.line(s.green("No problems found."))
            } else {
                for p in problems { inv.stdout.line(s.yellow("problem: ") + p) }
                if !mismatches.isEmpty || !recoveries.isEmpty && !inv.args.has("repair") {
                    inv.stdout.line("Run `lanyard doctor --repair` to rebuild the registry from the backends.")
                }
            }
        }
        return problems.isEmpty ? .ok : .failure
    }
}
