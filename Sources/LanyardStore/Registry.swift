import Foundation
import LanyardCore

/// What the registry knows about one slot: everything `list` and `status` show, nothing secret.
public struct SlotRecord: Codable, Hashable, Sendable {
    public var provider: String
    /// Where the slot's credential lives. A slot never moves backend silently.
    public var backend: BackendKind
    public var account: AccountInfo
    public var state: AuthState
    public var lastRefresh: Date?
    /// The code of the last error seen for this slot (e.g. `refresh_token_reused`), cleared on success.
    public var lastErrorCode: String?
    public var createdAt: Date?

    public init(provider: String, backend: BackendKind, account: AccountInfo = AccountInfo(),
                state: AuthState = .signedOut, lastRefresh: Date? = nil, lastErrorCode: String? = nil,
                createdAt: Date? = nil) {
        self.provider = provider
        self.backend = backend
        self.account = account
        self.state = state
        self.lastRefresh = lastRefresh
        self.lastErrorCode = lastErrorCode
        self.createdAt = createdAt
    }

    /// The access token's expiry when signed in.
    public var expiresAt: Date? {
        if case .signedIn(let date) = state { return date }
        return nil
    }

    enum CodingKeys: String, CodingKey {
        case provider, backend, account, state, lastRefresh = "last_refresh", lastErrorCode = "last_error", createdAt = "created_at"
    }
}

/// The registry document: slots, the active slot, per-slot metadata. Layout in docs/store-format.md.
public struct RegistryDocument: Codable, Hashable, Sendable {
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

    enum CodingKeys: String, CodingKey { case version, active, slots }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decode(Int.self, forKey: .version)
        guard version == RegistryDocument.currentVersion else {
            throw DecodingError.dataCorruptedError(forKey: .version, in: c,
                debugDescription: "version \(version) is not supported (this Lanyard reads version \(RegistryDocument.currentVersion))")
        }
        active = try c.decodeIfPresent(Slot.self, forKey: .active)
        let raw = try c.decode([String: SlotRecord].self, forKey: .slots)
        var slots: [Slot: SlotRecord] = [:]
        slots.reserveCapacity(raw.count)
        for (name, record) in raw {
            do { slots[try Slot(name)] = record } catch {
                throw DecodingError.dataCorruptedError(forKey: .slots, in: c, debugDescription: error.localizedDescription)
            }
        }
        self.slots = slots
        if let active, slots[active] == nil {
            throw DecodingError.dataCorruptedError(forKey: .active, in: c, debugDescription: "active slot \(active) is not in slots")
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(version, forKey: .version)
        try c.encodeIfPresent(active, forKey: .active)
        try c.encode(Dictionary(uniqueKeysWithValues: slots.map { ($0.key.name, $0.value) }), forKey: .slots)
    }
}

/// The list of slots on disk (`$XDG_DATA_HOME/lanyard/registry.json`).
///
/// Reads need no lock (writes replace the file atomically, so a reader sees the old or the new
/// document). Changes go through ``update(_:)``, which holds an exclusive `flock` across
/// read-modify-write so concurrent processes never lose each other's changes. A file that does not
/// parse is moved aside and reported, never treated as empty.
public struct Registry: Sendable {
    public let path: String
    private let directory: String

    public init(paths: Paths) {
        directory = paths.dataDirectory
        path = paths.registryFile
    }

    /// The current document; an empty one when no registry exists yet.
    public func load() throws -> RegistryDocument {
        try SecureFiles.ensureDirectory(directory)
        return try read()
    }

    /// Runs `body` on the current document under the registry lock and writes the result
    /// durably when `body` returns (nothing is written when it throws).
    @discardableResult
    public func update<T>(_ body: (inout RegistryDocument) throws -> T) throws -> T {
        try SecureFiles.ensureDirectory(directory)
        let lock = try FileLock(path: path + ".lock")
        defer { withExtendedLifetime(lock) {} }
        var document = try read()
        let original = document
        let result = try body(&document)
        if document != original {
            let data: Data
            do { data = try LanyardJSON.encoder(pretty: true).encode(document) } catch {
                throw StoreError.io(path: path, detail: "cannot encode registry: \(error.localizedDescription)")
            }
            try SecureFiles.atomicWrite(data, to: path, keepPrevious: true)
        }
        return result
    }

    private func read() throws -> RegistryDocument {
        guard let data = try SecureFiles.read(path) else { return RegistryDocument() }
        do {
            return try LanyardJSON.decode(RegistryDocument.self, from: data, source: path)
        } catch {
            if error.detail.contains("is not supported") {
                // A newer Lanyard's registry is not corrupt: leave it alone.
                throw StoreError.corrupt(source: path, detail: error.detail)
            }
            let stamp = RFC3339.string(from: Date()).replacingOccurrences(of: ":", with: "")
            let moved = SecureFiles.moveAside(path, suffix: "corrupt-\(stamp)")
            throw RegistryError.corrupt(path: path, movedTo: moved, detail: error.detail)
        }
    }
}
