// Swift wrappers over libsecret for SecretServiceStore. Internal; libsecret's calls and types stay
// in this file, and everything else of GLib and GIO (errors, hash tables, GDBus, deadlines) comes
// from LanyardGLib. Every blocking call takes the operation's Deadline.

import CLibsecret
import FoundationEssentials
import Glibc
import LanyardCore
import LanyardGLib
import LanyardSupport

/// Why a keyring call failed, before SecretServiceStore turns it into a StoreError.
enum KeyringFailure: Error {
    /// No session bus to talk to; the text says why, with GIO's error when it reported one.
    case noBus(String, GLibError? = nil)
    /// libsecret (loaded on first use) is not installed or lacks a function.
    case noLibrary(String)
    /// The bus is there but nothing provides (or can start) the Secret Service (the bus's error,
    /// when it reported one).
    case noService(String, GLibError? = nil)
    /// The operation's deadline passed.
    case timedOut
    /// libsecret, GIO or the service reported an error.
    case glib(GLibError)
    /// libsecret failed without an error (it refuses attributes a schema lacks that way).
    case refused(String)
}

extension KeyringFailure {
    /// Maps a GLib call failure; cancellation is always our deadline firing.
    init(_ failure: GLibCall.Failure, refused what: @autoclosure () -> String) {
        switch failure {
        case .error(let e) where e.isCancelled: self = .timedOut
        case .error(let e): self = .glib(e)
        case .refused: self = .refused(what())
        }
    }
}

/// Runs a GLib call, turning its failure into a KeyringFailure.
private func keyring<T>(
    _ what: @autoclosure () -> String,
    _ body: () throws(GLibCall.Failure) -> T
) throws(KeyringFailure) -> T {
    do { return try body() } catch { throw KeyringFailure(error, refused: what()) }
}

extension GLibError {
    /// True when libsecret reports a locked collection or item.
    var isLocked: Bool { domain == .secret && code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) }

    /// True when the object (item or collection) does not exist. gnome-keyring answers calls on a
    /// missing object with UnknownMethod "Object does not exist at path …".
    var isNoSuchObject: Bool {
        (domain == .secret && code == Int32(SECRET_ERROR_NO_SUCH_OBJECT.rawValue)) || isUnknownDBusObject
    }
}

// MARK: - Schema

/// The item schema `dev.lanyard.Credential`, built once with `secret_schema_newv` (the variadic
/// constructors cannot be called from Swift) and kept for the life of the process.
final class LanyardSchema: @unchecked Sendable {
    // SecretSchema is immutable once built; libsecret only reads it.
    private static let shared = LanyardSchema()

    static var name: String { SecretServiceStore.schemaName }
    static let attributeNames: Set<String> = ["slot", "provider", "account-id"]

    private let pointer: OpaquePointer?

    private init() {
        // Values are SecretSchemaAttributeType packed into pointers (GINT_TO_POINTER); STRING is 0.
        let types = LanyardSchema.attributeNames.map { ($0, Int(SECRET_SCHEMA_ATTRIBUTE_STRING.rawValue)) }
        // SECRET_SCHEMA_NONE: items carry `xdg:schema` and searches match on it.
        pointer =
            withIntegerTable(Dictionary(uniqueKeysWithValues: types)) { table in
                secret_schema_newv(LanyardSchema.name, SECRET_SCHEMA_NONE, table)
            } ?? nil
    }

    /// The schema to pass to libsecret.
    static func schema() throws(KeyringFailure) -> OpaquePointer {
        guard let pointer = shared.pointer else { throw .refused("building schema \(name)") }
        return pointer
    }

    /// Checks attribute names before libsecret sees them, because libsecret answers a bad name
    /// with an empty result and no error.
    static func validate(_ attributes: [String: String]) throws(KeyringFailure) {
        if let bad = attributes.keys.first(where: { !attributeNames.contains($0) }) {
            throw .refused("attribute \(bad) is not part of schema \(name)")
        }
    }
}

/// Runs `body` with a GHashTable of validated schema attributes.
private func withAttributes<R>(
    _ attributes: [String: String],
    _ body: (OpaquePointer, OpaquePointer) throws(KeyringFailure) -> R
)
    throws(KeyringFailure) -> R
{
    try LanyardSchema.validate(attributes)
    let schema = try LanyardSchema.schema()
    guard let result = try withStringTable(attributes, { table throws(KeyringFailure) in try body(table, schema) })
    else {
        throw .refused("allocating an attribute table")
    }
    return result
}

// MARK: - Process-wide connection

/// The Secret Service connection of this process. libsecret and GIO keep one session-bus
/// connection and one service object per process, so this is process-wide too.
final class KeyringConnection: @unchecked Sendable {
    // All mutable state is guarded by `lock`.
    static let shared = KeyringConnection()

    private let lock = TimedLock()
    private var service: GObjectReference?
    /// The unique bus name that owned the service when `service` was made.
    private var owner: String?

    /// Why libsecret cannot be loaded (it is loaded on first use), or nil once it is.
    static func missingLibraryReason() -> String? { LazyLibraries.loadFailure() }

    /// The bus name libsecret talks to (it honours SECRET_SERVICE_BUS_NAME, so do we).
    static var busName: String {
        guard let raw = getenv("SECRET_SERVICE_BUS_NAME"), raw.pointee != 0 else { return "org.freedesktop.secrets" }
        return String(cString: raw)
    }

    /// Why there is no session bus to connect to, or nil when there is one.
    ///
    /// GIO connects to `DBUS_SESSION_BUS_ADDRESS`, else to `$XDG_RUNTIME_DIR/bus`, else it tries
    /// to autolaunch a bus through X11 (`dbus-launch --autolaunch`), which can hang or leave a
    /// stray daemon. We check the first two ourselves and never let GIO get to the third.
    static func missingBusReason(_ env: (String) -> String? = { getenv($0).map { String(cString: $0) } }) -> String? {
        if let address = env("DBUS_SESSION_BUS_ADDRESS") {
            return address.isEmpty ? "DBUS_SESSION_BUS_ADDRESS is set but empty" : nil
        }
        func nonEmpty(_ key: String) -> String? { env(key).flatMap { $0.isEmpty ? nil : $0 } }
        // GLib's g_get_user_runtime_dir(): XDG_RUNTIME_DIR, else the user cache directory.
        let runtime =
            nonEmpty("XDG_RUNTIME_DIR") ?? nonEmpty("XDG_CACHE_HOME")
            ?? ((nonEmpty("HOME") ?? PathText.passwordDatabaseHome()) + "/.cache")
        let socket = runtime + "/bus"
        if access(socket, F_OK) == 0 { return nil }
        return "DBUS_SESSION_BUS_ADDRESS is not set and \(socket) does not exist"
    }

    /// The service, connected and with a session open.
    ///
    /// The first call in a process lets libsecret find the service: its proxy set-up asks the bus
    /// who owns the name (starting an activatable service), so a check of ours would be a second
    /// round trip for the same answer. Later calls check who owns the name first (one round trip
    /// to the bus daemon, not to the service), so a stopped service is reported at once and a
    /// restarted one gets a new connection: libsecret's cached one would still hold a session
    /// with the old process.
    func service(_ deadline: Deadline) throws(KeyringFailure) -> KeyringService {
        if let reason = KeyringConnection.missingBusReason() { throw .noBus(reason) }
        if let reason = KeyringConnection.missingLibraryReason() { throw .noLibrary(reason) }
        StartupTrace.mark("dlopen")
        let bus: GDBusClient
        do {
            bus = try GDBusClient.sessionBus(deadline)
        } catch {
            let failure = KeyringFailure(error, refused: "connecting to the session bus")
            if case .glib(let e) = failure { throw .noBus("cannot connect to the session bus: \(e)", e) }
            throw failure
        }
        let name = KeyringConnection.busName
        let nobody = KeyringFailure.noService("nothing owns \(name) and the bus cannot start it")

        guard lock.lock(within: deadline.remaining) else { throw .timedOut }
        defer { lock.unlock() }
        if let service, let owner {
            let currentOwner = try keyring("GetNameOwner") { () throws(GLibCall.Failure) in
                try bus.nameOwner(name, deadline: deadline)
            }
            if owner == currentOwner { return KeyringService(service: service, bus: bus, busName: name) }
            if currentOwner == nil {
                let activatable = try keyring("ListActivatableNames") { () throws(GLibCall.Failure) in
                    try bus.isActivatable(name, deadline: deadline)
                }
                if !activatable { throw nobody }
            }
            // The service was restarted: drop libsecret's cached service and open a new one.
            self.service = nil
            self.owner = nil
            secret_service_disconnect()
        }
        let fresh: GObjectReference
        do {
            fresh = try keyring("secret_service_get_sync") { () throws(GLibCall.Failure) in
                GObjectReference(
                    adopting: try GLibCall.pointer {
                        secret_service_get_sync(SECRET_SERVICE_OPEN_SESSION, deadline.cancellable, $0)
                    }
                )
            }
        } catch {
            // Nobody owns the name and the bus could not start a service for it.
            if case .glib(let e) = error, e.isNoOwner {
                throw .noService("nothing owns \(name) and the bus cannot start it", e)
            }
            throw error
        }
        // The owner the proxy found (or the bus started for it).
        guard
            let ownerName = g_dbus_proxy_get_name_owner(
                UnsafeMutableRawPointer(fresh.pointer).assumingMemoryBound(to: GDBusProxy.self)
            )
        else { throw nobody }
        defer { g_free(ownerName) }
        service = fresh
        owner = String(cString: ownerName)
        return KeyringService(service: fresh, bus: bus, busName: name)
    }
}

// MARK: - Service

/// One reference to libsecret's service object plus the bus it lives on.
/// `@unchecked`: it holds only immutable references to GIO proxies, which GIO makes thread-safe.
final class KeyringService: @unchecked Sendable {
    // libsecret's sync calls may be made from any thread; this class only holds references.
    private let reference: GObjectReference
    let bus: GDBusClient
    let busName: String

    init(service: GObjectReference, bus: GDBusClient, busName: String) {
        reference = service
        self.bus = bus
        self.busName = busName
    }

    private var service: OpaquePointer { reference.pointer }

    /// Items of schema dev.lanyard.Credential matching `attributes` in every collection, locked
    /// ones included (secrets not loaded).
    func search(_ attributes: [String: String], deadline: Deadline) throws(KeyringFailure) -> [KeyringItem] {
        // NULL without an error is an empty result here (attributes are validated first).
        // No SECRET_SEARCH_UNLOCK (it may prompt) and no SECRET_SEARCH_LOAD_SECRETS (libsecret
        // loads those without our cancellable).
        let list = try withAttributes(attributes) { table, schema throws(KeyringFailure) in
            try keyring("search") { () throws(GLibCall.Failure) in
                try GLibCall.optionalPointer {
                    secret_service_search_sync(service, schema, table, SECRET_SEARCH_ALL, deadline.cancellable, $0)
                }
            }
        }
        // The items' references now belong to the KeyringItems.
        return takeList(list).map { KeyringItem(adopting: $0) }
    }

    /// Items of any schema (or none) matching `attributes` in every collection, locked ones
    /// included: another program's items (``RustKeyringEntry``), so no schema checks the names.
    func searchUnchecked(_ attributes: [String: String], deadline: Deadline) throws(KeyringFailure) -> [KeyringItem] {
        let list =
            try withStringTable(attributes) { table throws(KeyringFailure) in
                try keyring("search") { () throws(GLibCall.Failure) in
                    try GLibCall.optionalPointer {
                        secret_service_search_sync(service, nil, table, SECRET_SEARCH_ALL, deadline.cancellable, $0)
                    }
                }
            } ?? nil
        return takeList(list).map { KeyringItem(adopting: $0) }
    }

    /// Stores `secret` as a new item with exactly `attributes` and no schema (no `xdg:schema`
    /// attribute), replacing an item of that collection with the same attributes.
    func storeUnchecked(
        attributes: [String: String],
        collectionPath: String,
        label: String,
        secret: Data,
        contentType: String,
        deadline: Deadline
    ) throws(KeyringFailure) {
        let value = try makeSecretValue(secret, contentType: contentType)
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        let stored: Bool? = try withStringTable(attributes) { table throws(KeyringFailure) in
            try keyring("store an item in \(collectionPath)") { () throws(GLibCall.Failure) in
                try GLibCall.bool {
                    secret_service_store_sync(
                        service,
                        nil,
                        table,
                        collectionPath,
                        label,
                        value,
                        deadline.cancellable,
                        $0
                    )
                }
            }
            return true
        }
        if stored == nil { throw .refused("allocating an attribute table") }
    }

    /// Object paths of the items of schema dev.lanyard.Credential matching `attributes` in every
    /// collection, unlocked and locked apart: one SearchItems call, and no item proxies made (each
    /// proxy costs a property load and signal subscriptions on the bus).
    func searchPaths(
        _ attributes: [String: String],
        deadline: Deadline
    ) throws(KeyringFailure) -> (unlocked: [String], locked: [String]) {
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        defer {
            g_strfreev(unlocked)
            g_strfreev(locked)
        }
        try withAttributes(attributes) { table, schema throws(KeyringFailure) in
            try keyring("search") { () throws(GLibCall.Failure) in
                try GLibCall.bool {
                    secret_service_search_for_dbus_paths_sync(
                        service,
                        schema,
                        table,
                        deadline.cancellable,
                        &unlocked,
                        &locked,
                        $0
                    )
                }
            }
        }
        return (strings(unlocked), strings(locked))
    }

    /// The attributes of the item at `path` (one Properties.Get), or nil when the item no longer
    /// exists (another process deleted it since it was found).
    func attributes(ofItem path: String, deadline: Deadline) throws(KeyringFailure) -> [String: String]? {
        let value: GValueTree?
        do {
            value = try bus.property(
                destination: busName,
                path: path,
                interface: "org.freedesktop.Secret.Item",
                name: "Attributes",
                deadline: deadline
            )
        } catch .error(let error) where error.isNoSuchObject {
            return nil
        } catch {
            throw KeyringFailure(error, refused: "Attributes of \(path)")
        }
        var attributes: [String: String] = [:]
        for entry in value?.array ?? [] {
            if let pair = entry.array, pair.count == 2, let key = pair[0].string, let text = pair[1].string {
                attributes[key] = text
            }
        }
        return attributes
    }

    /// The strings of a NULL-terminated `gchar **` (not freed here).
    private func strings(_ vector: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
        guard let vector else { return [] }
        var result: [String] = []
        var index = 0
        while let string = vector[index] {
            result.append(String(cString: string))
            index += 1
        }
        return result
    }

    /// Loads the secret of the item at `path` through the open session (one GetSecret call) and
    /// hands its bytes to `body` without copying them; libsecret wipes them afterwards.
    func withSecret<R>(ofItem path: String, deadline: Deadline, _ body: (Data) -> R) throws(KeyringFailure) -> R {
        let value = try keyring("load secret of \(path)") { () throws(GLibCall.Failure) in
            try GLibCall.pointer {
                secret_service_get_secret_for_dbus_path_sync(service, path, deadline.cancellable, $0)
            }
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length: gsize = 0
        guard let bytes = secret_value_get(value, &length) else { return body(Data()) }
        return body(Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: bytes), count: Int(length), deallocator: .none))
    }

    /// The name of the program that owns the service (`gnome-keyring-d`, `keepassxc`, …), from
    /// the bus daemon's record of the owner's process; nil when the bus does not say.
    func ownerProcessName(deadline: Deadline) -> String? {
        guard let pid = try? bus.processID(of: busName, deadline: deadline), pid > 0,
            let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)
        else { return nil }
        let name = comm.trimmingWhitespaceAndNewlines()
        return name.isEmpty ? nil : name
    }

    /// The object path an alias (`default`, `login`, `session`) points to, or nil when unset.
    func readAlias(_ alias: String, deadline: Deadline) throws(KeyringFailure) -> String? {
        let reply = try keyring("ReadAlias") { () throws(GLibCall.Failure) in
            try bus.call(
                destination: busName,
                path: "/org/freedesktop/secrets",
                interface: "org.freedesktop.Secret.Service",
                method: "ReadAlias",
                arguments: [.string(alias)],
                deadline: deadline
            )
        }
        guard let path = reply.first?.string, path != "/" else { return nil }
        return path
    }

    /// The collection's Locked property, read fresh from the service.
    func isLocked(collection path: String, deadline: Deadline) throws(KeyringFailure) -> Bool {
        let value = try keyring("Locked") { () throws(GLibCall.Failure) in
            try bus.property(
                destination: busName,
                path: path,
                interface: "org.freedesktop.Secret.Collection",
                name: "Locked",
                deadline: deadline
            )
        }
        guard let locked = value?.bool else {
            throw .refused("collection \(path) has no boolean Locked property")
        }
        return locked
    }

    /// Stores `secret` as a new item in the collection at `collectionPath`, replacing an item of
    /// that collection with exactly the same attributes.
    func store(
        attributes: [String: String],
        collectionPath: String,
        label: String,
        secret: Data,
        contentType: String,
        deadline: Deadline
    ) throws(KeyringFailure) {
        let value = try makeSecretValue(secret, contentType: contentType)
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        try withAttributes(attributes) { table, schema throws(KeyringFailure) in
            try keyring("store an item in \(collectionPath)") { () throws(GLibCall.Failure) in
                try GLibCall.bool {
                    secret_service_store_sync(
                        service,
                        schema,
                        table,
                        collectionPath,
                        label,
                        value,
                        deadline.cancellable,
                        $0
                    )
                }
            }
        }
    }
}

/// A SecretValue holding a copy of `secret` (libsecret keeps it in non-pageable memory).
private func makeSecretValue(_ secret: Data, contentType: String) throws(KeyringFailure) -> OpaquePointer {
    let value = secret.withUnsafeBytes { bytes in
        // secret_value_new copies the bytes.
        secret_value_new(bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count, contentType)
    }
    guard let value else { throw .refused("allocating a secret value") }
    return value
}

// MARK: - Item

/// One reference to a SecretItem proxy, with the properties read when it was loaded.
/// `@unchecked`: immutable after loading; the proxy is a GIO object, which GIO makes thread-safe.
final class KeyringItem: @unchecked Sendable {
    private let reference: GObjectReference

    /// Takes over a reference the caller owned.
    init(adopting item: OpaquePointer) { reference = GObjectReference(adopting: item) }

    private var item: OpaquePointer { reference.pointer }

    /// The item's D-Bus object path, `<collection path>/<id>`.
    var path: String { reference.proxyObjectPath }
    var isLocked: Bool { secret_item_get_locked(item) != 0 }
    /// Seconds since 1970 of the last change.
    var modified: UInt64 { UInt64(secret_item_get_modified(item)) }

    var label: String { String(takingGLib: secret_item_get_label(item)) ?? "" }

    /// The item's attributes (including `xdg:schema`).
    var attributes: [String: String] { takeStringTable(secret_item_get_attributes(item)) }

    /// Loads the secret and hands its bytes to `body` without copying them; the bytes are only
    /// valid inside `body` and are wiped by libsecret afterwards.
    func withSecret<R>(deadline: Deadline, _ body: (Data) -> R) throws(KeyringFailure) -> R {
        try keyring("load secret of \(path)") { () throws(GLibCall.Failure) in
            try GLibCall.bool { secret_item_load_secret_sync(item, deadline.cancellable, $0) }
        }
        guard let value = secret_item_get_secret(item) else {
            throw .refused("the service returned no secret for \(path)")
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length: gsize = 0
        guard let bytes = secret_value_get(value, &length) else { return body(Data()) }
        let data = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: bytes), count: Int(length), deallocator: .none)
        return body(data)
    }

    func setSecret(_ secret: Data, contentType: String, deadline: Deadline) throws(KeyringFailure) {
        let value = try makeSecretValue(secret, contentType: contentType)
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        try keyring("set secret of \(path)") { () throws(GLibCall.Failure) in
            try GLibCall.bool { secret_item_set_secret_sync(item, value, deadline.cancellable, $0) }
        }
    }

    func setAttributes(_ attributes: [String: String], deadline: Deadline) throws(KeyringFailure) {
        try withAttributes(attributes) { table, schema throws(KeyringFailure) in
            try keyring("set attributes of \(path)") { () throws(GLibCall.Failure) in
                try GLibCall.bool { secret_item_set_attributes_sync(item, schema, table, deadline.cancellable, $0) }
            }
        }
    }

    func setLabel(_ label: String, deadline: Deadline) throws(KeyringFailure) {
        try keyring("set label of \(path)") { () throws(GLibCall.Failure) in
            try GLibCall.bool { secret_item_set_label_sync(item, label, deadline.cancellable, $0) }
        }
    }

    func delete(deadline: Deadline) throws(KeyringFailure) {
        try keyring("delete \(path)") { () throws(GLibCall.Failure) in
            try GLibCall.bool { secret_item_delete_sync(item, deadline.cancellable, $0) }
        }
    }
}
