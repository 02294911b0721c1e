import LanyardCore
import LanyardStore
import LanyardSupport

/// A slot as `list`, `status` and `--json` show it: registry data, never a secret.
struct SlotSummaryView: JSONView {
    static let keys = [
        "slot", "active", "provider", "backend", "email", "plan", "plan_name", "account_id", "fedramp",
        "state", "state_message", "expires_at", "last_refresh", "last_error", "shared", "rotates",
    ]
    let slot: Slot
    let record: SlotRecord
    let active: Bool
    /// The fleet the slot is shared in, if any.
    var shared: String? = nil

    /// The fields in key order, for ``ListView/write(pretty:to:)``.
    var fields: [(key: StaticString, value: JSONValue)] {
        var stateMessage: String?
        if case .failed(let message) = record.state { stateMessage = message }
        return [
            ("account_id", .optional(record.account.accountID)), ("active", .bool(active)),
            ("backend", .string(record.backend.rawValue)),
            ("email", .optional(record.account.email)), ("expires_at", .date(record.expiresAt)),
            ("fedramp", .bool(record.account.isFedRAMPAccount)), ("last_error", .optional(record.lastErrorCode)),
            ("last_refresh", .date(record.lastRefresh)), ("plan", .optional(record.account.plan?.rawValue)),
            ("plan_name", .optional(record.account.plan?.displayName)), ("provider", .string(record.provider)),
            ("rotates", .bool(record.rotates)), ("shared", .optional(shared)), ("slot", .string(slot.name)),
            ("state", .string(record.state.name)), ("state_message", .optional(stateMessage)),
        ]
    }

    var object: [String: JSONValue] { Dictionary(uniqueKeysWithValues: fields.map { ("\($0.key)", $0.value) }) }
    var json: JSONValue { .object(object) }
}

/// `list --json`: `{"active", "slots": [summary…]}`.
struct ListView: JSONView {
    static let keys = ["active", "slots"]
    let document: RegistryDocument
    /// Shared slots and their fleet.
    var shared: [Slot: String] = [:]

    var json: JSONValue {
        .object([
            "active": .optional(document.active?.name),
            "slots": .array(
                document.sortedSlots.map {
                    SlotSummaryView(
                        slot: $0.slot,
                        record: $0.record,
                        active: $0.slot == document.active,
                        shared: shared[$0.slot]
                    ).json
                }
            ),
        ])
    }

    /// The document written field by field (no dictionary per slot) and handed to `sink` in
    /// pieces of about 64 KiB (never held whole): the same bytes as serializing ``json`` and a
    /// newline, at a fraction of the cost for many slots.
    func write(pretty: Bool, to sink: ([UInt8]) -> Void) {
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
            for field in SlotSummaryView(
                slot: slot,
                record: record,
                active: slot == document.active,
                shared: shared[slot]
            ).fields {
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
}

/// `list --names --json`.
struct ListNamesView: JSONView {
    static let keys = ["names"]
    let names: [Slot]
    var json: JSONValue { .object(["names": .array(names.map { .string($0.name) })]) }
}

extension SlotCommands {
    static func parseSlot(_ raw: String, _ inv: Invocation) throws -> Slot {
        if ArgumentText.looksSecret(raw) {
            let hint =
                inv.spec.name == "login"
                ? "; `--with-access-token` reads the token from standard input, never from the command line" : ""
            throw UsageError(message: "not a slot name: \(ArgumentText.shown(raw))\(hint)", command: inv.spec.name)
        }
        do { return try Slot(raw) } catch {
            throw UsageError(message: error.userFacingDescription, command: inv.spec.name)
        }
    }
}
