import FoundationEssentials
import Glibc
import LanyardCore
import LanyardStore
import LanyardSupport

/// What this machine knows of one shared slot, in `$XDG_DATA_HOME/lanyard/fleet/SLOT.json`
/// (0600): the fleet it is shared in, the etcd revision its local copy came from, the highest
/// generation it has seen (a value from etcd is adopted only above it: nothing older comes back),
/// whether the slot was handed over (unshared, its live credential kept by another machine),
/// and whether the local copy is newer than
/// etcd's (a refresh whose fleet write failed, or a sign-in made while the fleet was unreachable)
/// and waits to be written there.
///
/// Changed only under the slot's refresh lock, so each slot's file has one writer at a time.
package struct SharedSlotState: Equatable, Sendable, JSONDocument {
    package var fleet: String
    package var revision: Int64
    package var uploadPending: Bool
    /// The local copy waiting to be written is a new sign-in: it replaces whatever the fleet holds
    /// (the fleet's copy may be a session that died), not only the revision it came from.
    package var signInPending: Bool
    /// The highest generation of the slot's value seen here (0: none yet).
    package var generation: Int64
    /// The machine that kept the live credential when the slot was unshared (nil: still shared).
    package var handedOverTo: String?
    /// The highest generation a member signed that this machine has seen without adopting it
    /// (a value that named a membership it could not verify): evidence that a newer value exists,
    /// so an older one put back later is refused like any rollback.
    package var evidence: Int64 = 0
    /// The member that wrote the value the local copy came from (nil: unknown, or this machine).
    package var writer: String?

    package init(
        fleet: String,
        revision: Int64,
        generation: Int64,
        uploadPending: Bool = false,
        signInPending: Bool = false,
        handedOverTo: String? = nil
    ) {
        self.fleet = fleet
        self.revision = revision
        self.generation = generation
        self.uploadPending = uploadPending
        self.signInPending = signInPending
        self.handedOverTo = handedOverTo
    }

    package init(json: JSONFields) throws(JSONShapeError) {
        fleet = try json.string("fleet")
        guard let r = Int64(try json.string("revision")), r >= 0 else {
            throw JSONShapeError(path: json.path + ".revision", problem: "is not a revision")
        }
        revision = r
        uploadPending = try json.optionalBool("upload_pending") ?? false
        signInPending = try json.optionalBool("sign_in_pending") ?? false
        generation =
            try json.optionalString("generation").map { text throws(JSONShapeError) in
                guard let g = Int64(text), g >= 0 else {
                    throw JSONShapeError(path: json.path + ".generation", problem: "is not a generation")
                }
                return g
            } ?? 0
        handedOverTo = try json.optionalString("handed_over_to")
        writer = try json.optionalString("writer")
        evidence =
            try json.optionalString("evidence").map { text throws(JSONShapeError) in
                guard let g = Int64(text), g >= 0 else {
                    throw JSONShapeError(path: json.path + ".evidence", problem: "is not a generation")
                }
                return g
            } ?? 0
    }

    package var json: JSONValue {
        .object([
            "fleet": .string(fleet), "revision": .string(String(revision)), "upload_pending": .bool(uploadPending),
            "sign_in_pending": .bool(signInPending), "generation": .string(String(generation)),
            "handed_over_to": .optional(handedOverTo),
            "evidence": evidence > generation ? .string(String(evidence)) : .null,
            "writer": .optional(writer),
        ]).droppingNulls
    }

    package static func folder(_ paths: Paths) -> String { paths.dataDirectory + "/fleet" }
    static func path(_ slot: Slot, _ paths: Paths) -> String { folder(paths) + "/" + slot.name + ".json" }

    /// The slot's state, nil when it is not shared. A file that does not decode is an error (the
    /// slot stays shared: treating it as local could burn the fleet's refresh token).
    package static func load(_ slot: Slot, paths: Paths) throws -> SharedSlotState? {
        let path = path(slot, paths)
        guard let data = try SecureFiles.read(path) else { return nil }
        do { return try decode(data, source: path) } catch {
            throw StoreError.corrupt(source: path, detail: error.detail)
        }
    }

    package func save(_ slot: Slot, paths: Paths) throws {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        try SecureFiles.ensureDirectory(Self.folder(paths))
        try SecureFiles.atomicWrite(jsonData(), to: Self.path(slot, paths))
    }

    package static func remove(_ slot: Slot, paths: Paths) throws {
        let path = path(slot, paths)
        if access(path, F_OK) == 0 { try SecureFiles.removeDurably(path) }
    }

    /// Every shared slot this machine knows of.
    package static func all(paths: Paths) -> [(Slot, SharedSlotState)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder(paths))) ?? []
        return names.sorted().compactMap { name -> (Slot, SharedSlotState)? in
            guard name.hasSuffix(".json"), let slot = try? Slot(String(name.dropLast(5))),
                let state = try? load(slot, paths: paths)
            else { return nil }
            return (slot, state)
        }
    }
}

extension SharedSlotState {
    /// The slot's state, nil when it is not shared or its file does not decode (for reports).
    package static func loadIfReadable(_ slot: Slot, paths: Paths) -> SharedSlotState? {
        (try? load(slot, paths: paths)) ?? nil
    }
}

extension SharedSlotState {
    /// Each shared slot's fleet, read only when the fleet folder exists (`list` pays nothing
    /// without a fleet).
    package static func fleets(paths: Paths) -> [Slot: String] {
        guard access(folder(paths), F_OK) == 0 else { return [:] }
        return Dictionary(all(paths: paths).map { ($0.0, $0.1.fleet) }, uniquingKeysWith: { a, _ in a })
    }
}
