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

extension SlotCommands {
    static func parseSlot(_ raw: String, _ inv: Invocation) throws -> Slot {
        do { return try Slot(raw) } catch { throw UsageError(message: error.userFacingDescription, command: inv.spec.name) }
    }
}
