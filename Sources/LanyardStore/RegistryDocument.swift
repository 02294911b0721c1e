import FoundationEssentials
import LanyardCore
import LanyardSupport

/// What the registry knows about one slot: everything `list` and `status` show, nothing secret.
public struct SlotRecord: Hashable, Sendable, JSONDocument {
    public var provider: String
    /// Where the slot's credential lives. A slot never moves backend silently.
    public var backend: BackendKind
    public var account: AccountInfo
    public var state: AuthState
    public var lastRefresh: Date?
    /// The boot clock at `lastRefresh` (see ``Credential/lastRefreshBoot``).
    public var lastRefreshBoot: BootInstant?
    /// The code of the last error seen for this slot (e.g. `refresh_token_reused`), cleared on success.
    public var lastErrorCode: String?
    public var createdAt: Date?
    /// False for a slot whose credential never rotates (a personal access token): the agent
    /// plans no refresh for it. Written only when false (`"rotates": false`).
    public var rotates: Bool

    public init(
        provider: String,
        backend: BackendKind,
        account: AccountInfo = AccountInfo(),
        state: AuthState = .signedOut,
        lastRefresh: Date? = nil,
        lastRefreshBoot: BootInstant? = nil,
        lastErrorCode: String? = nil,
        createdAt: Date? = nil,
        rotates: Bool = true
    ) {
        self.provider = provider
        self.backend = backend
        self.account = account
        self.state = state
        self.lastRefresh = lastRefresh
        self.lastRefreshBoot = lastRefreshBoot
        self.lastErrorCode = lastErrorCode
        self.createdAt = createdAt
        self.rotates = rotates
    }

    /// The access token's expiry when signed in.
    public var expiresAt: Date? {
        if case .signedIn(let date) = state { return date }
        return nil
    }

    package init(json: JSONFields) throws(JSONShapeError) {
        provider = try json.string("provider")
        let backendName = try json.string("backend")
        guard let backend = BackendKind(rawValue: backendName) else {
            throw JSONShapeError(path: json.path + ".backend", problem: "is not a known backend")
        }
        self.backend = backend
        account =
            try json.optionalObject("account").map { (f: JSONFields) throws(JSONShapeError) in try AccountInfo(json: f)
            } ?? AccountInfo()
        state = try AuthState(json: try json.object("state"))
        lastRefresh = try json.optionalDate("last_refresh")
        lastRefreshBoot = try json.optionalBootInstant("last_refresh_boot")
        lastErrorCode = try json.optionalString("last_error")
        createdAt = try json.optionalDate("created_at")
        rotates = try json.optionalBool("rotates") ?? true
    }

    public var json: JSONValue {
        JSONValue.object([
            "provider": .string(provider), "backend": .string(backend.rawValue), "account": account.json,
            "state": state.json,
            "last_refresh": .date(lastRefresh), "last_refresh_boot": .optional(lastRefreshBoot?.text),
            "last_error": .optional(lastErrorCode), "created_at": .date(createdAt),
            "rotates": rotates ? .null : .bool(false),
        ]).droppingNulls
    }
}

/// The registry document: slots, the active slot, per-slot metadata. Layout in docs/store-format.md.
public struct RegistryDocument: Hashable, Sendable, JSONDocument {
    public static let currentVersion = 1

    public var version: Int = RegistryDocument.currentVersion
    public var active: Slot?
    public var slots: [Slot: SlotRecord] = [:]

    public init(active: Slot? = nil, slots: [Slot: SlotRecord] = [:]) {
        self.active = active
        self.slots = slots
    }

    /// Slots in name order.
    public var sortedSlots: [(slot: Slot, record: SlotRecord)] {
        slots.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Decodes a registry file as ``JSONDocument/decode(_:source:)`` does, with the same checks
    /// and the same errors, but one slot at a time: the whole file is never held as one JSON tree
    /// (10,000 slots peaked at about 60 MB that way).
    public static func decodeStreaming(_ data: Data, source: String) throws(DecodeError) -> RegistryDocument {
        var top: [String: JSONValue] = [:]
        var slots: [Slot: SlotRecord] = [:]
        var slotError: JSONShapeError?
        let whole: JSONValue?
        do {
            whole = try JSONValue.parseStreaming(
                data,
                streamed: "slots",
                member: { top[$0] = $1 },
                reader: { name, reader throws(JSONSyntaxError) in
                    guard slotError == nil else {
                        _ = try reader.value()
                        return
                    }
                    guard let slot = try? Slot(name) else {
                        slotError = JSONShapeError(path: ".slots", problem: "has an invalid slot name")
                        _ = try reader.value()
                        return
                    }
                    // Records as Lanyard writes them straight from the bytes; anything else (and every
                    // error) the long way, from the same place.
                    let start = reader
                    if let record = try? SlotRecordReader.read(&reader) {
                        slots[slot] = record
                        return
                    }
                    reader = start
                    let value = try reader.value()
                    do throws(JSONShapeError) {
                        slots[slot] = try SlotRecord(json: try JSONFields(value, path: ".slots." + name))
                    } catch { slotError = error }
                }
            )
        } catch {
            throw DecodeError(source: source, detail: "not valid JSON (\(error.userFacingDescription))")
        }
        // The checks of init(json:), in its order: the version, the slots, each slot, the active slot.
        do throws(JSONShapeError) {
            let json = try JSONFields(whole ?? .object(top))
            let version = try json.int("version")
            guard version == RegistryDocument.currentVersion else {
                throw JSONShapeError(
                    path: ".version",
                    problem:
                        "is \(version): not supported (this Lanyard reads version \(RegistryDocument.currentVersion))"
                )
            }
            _ = try json.object("slots")
            if let slotError { throw slotError }
            var document = RegistryDocument(active: nil, slots: slots)
            document.version = version
            if let name = try json.optionalString("active") {
                guard let slot = try? Slot(name), slots[slot] != nil else {
                    throw JSONShapeError(path: ".active", problem: "names a slot that is not in .slots")
                }
                document.active = slot
            }
            return document
        } catch {
            throw DecodeError(source: source, detail: error.userFacingDescription)
        }
    }

    package init(json: JSONFields) throws(JSONShapeError) {
        version = try json.int("version")
        guard version == RegistryDocument.currentVersion else {
            throw JSONShapeError(
                path: ".version",
                problem: "is \(version): not supported (this Lanyard reads version \(RegistryDocument.currentVersion))"
            )
        }
        let slotsObject = try json.object("slots")
        slots.reserveCapacity(slotsObject.object.count)
        for (name, value) in slotsObject.object {
            guard let slot = try? Slot(name) else {
                throw JSONShapeError(path: ".slots", problem: "has an invalid slot name")
            }
            slots[slot] = try SlotRecord(json: try JSONFields(value, path: ".slots." + name))
        }
        if let name = try json.optionalString("active") {
            guard let slot = try? Slot(name), slots[slot] != nil else {
                throw JSONShapeError(path: ".active", problem: "names a slot that is not in .slots")
            }
            active = slot
        }
    }

    public var json: JSONValue {
        var slotsObject: [String: JSONValue] = [:]
        for (slot, record) in slots { slotsObject[slot.name] = record.json }
        return JSONValue.object([
            "version": .number(Double(version)), "active": .optional(active?.name),
            "slots": .object(slotsObject),
        ]).droppingNulls
    }
}
