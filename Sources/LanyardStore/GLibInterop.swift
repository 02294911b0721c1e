// Thin Swift wrappers over the GLib / GIO C API used by the Secret Service backend.
// Nothing here is public, and no C type leaves this file or SecretServiceLibsecret.swift.

import CLibsecret
import Dispatch
import Foundation

// MARK: - Errors

/// A `GError` copied into Swift (the C error is freed right away).
struct GLibError: Error, Sendable, CustomStringConvertible {
    enum Domain: Sendable, Equatable {
        case io, dbus, secret, other(String)
    }

    let domain: Domain
    let code: Int32
    /// The error text. GLib, GDBus and libsecret messages name methods and object paths, never secrets.
    let message: String
    /// The D-Bus error name (`org.freedesktop.DBus.Error.ServiceUnknown`, …) when the error came from a peer.
    let remoteName: String?

    /// Takes ownership of `error` and frees it.
    init(consuming error: UnsafeMutablePointer<GError>) {
        let quark = error.pointee.domain
        if quark == g_io_error_quark() {
            domain = .io
        } else if quark == g_dbus_error_quark() {
            domain = .dbus
        } else if quark == secret_error_get_quark() {
            domain = .secret
        } else {
            domain = .other(g_quark_to_string(quark).map { String(cString: $0) } ?? "unknown")
        }
        code = error.pointee.code
        if let remote = g_dbus_error_get_remote_error(error) {
            remoteName = String(cString: remote)
            g_free(remote)
        } else {
            remoteName = nil
        }
        // Drop GDBus's "GDBus.Error:org.….Name: " prefix; the name is kept in `remoteName`.
        g_dbus_error_strip_remote_error(error)
        message = error.pointee.message.map { String(cString: $0) } ?? "no message"
        g_error_free(error)
    }

    var isCancelled: Bool { domain == .io && code == Int32(G_IO_ERROR_CANCELLED.rawValue) }

    /// True when the peer is gone or the bus could not route to it: the service stopped, crashed
    /// or was never there.
    var isServiceGone: Bool {
        switch domain {
        case .dbus:
            return [G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER, G_DBUS_ERROR_NO_REPLY,
                    G_DBUS_ERROR_DISCONNECTED, G_DBUS_ERROR_NO_SERVER, G_DBUS_ERROR_SPAWN_EXEC_FAILED,
                    G_DBUS_ERROR_SPAWN_FORK_FAILED, G_DBUS_ERROR_SPAWN_CHILD_EXITED,
                    G_DBUS_ERROR_SPAWN_CHILD_SIGNALED, G_DBUS_ERROR_SPAWN_FAILED,
                    G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND, G_DBUS_ERROR_SPAWN_SERVICE_INVALID,
                    G_DBUS_ERROR_SPAWN_FILE_INVALID]
                .contains { Int32($0.rawValue) == code }
        case .io:
            return [G_IO_ERROR_CLOSED, G_IO_ERROR_CONNECTION_CLOSED, G_IO_ERROR_BROKEN_PIPE,
                    G_IO_ERROR_CONNECTION_REFUSED, G_IO_ERROR_NOT_FOUND]
                .contains { Int32($0.rawValue) == code }
        default:
            return false
        }
    }

    var isLocked: Bool { domain == .secret && code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) }
    /// True when the object (item or collection) does not exist. gnome-keyring answers calls on a
    /// missing object with UnknownMethod "Object does not exist at path …".
    var isNoSuchObject: Bool {
        switch domain {
        case .secret: return code == Int32(SECRET_ERROR_NO_SUCH_OBJECT.rawValue)
        case .dbus:
            return [G_DBUS_ERROR_UNKNOWN_OBJECT, G_DBUS_ERROR_UNKNOWN_METHOD, G_DBUS_ERROR_UNKNOWN_INTERFACE,
                    G_DBUS_ERROR_UNKNOWN_PROPERTY].contains { Int32($0.rawValue) == code }
        default: return false
        }
    }

    var description: String { remoteName.map { "\(message) (\($0))" } ?? message }
}

/// Runs a GLib call that reports failure through a `GError **`. A call that fails without setting
/// the error (libsecret does this when it refuses attributes, after a g_critical) is reported as
/// `refused`, never as success or "not found".
enum GLibCall {
    enum Failure: Error {
        case error(GLibError)
        case refused
    }

    /// For calls returning a pointer: NULL means failure.
    static func pointer<T>(_ body: (UnsafeMutablePointer<UnsafeMutablePointer<GError>?>) -> T?) throws(Failure) -> T {
        var error: UnsafeMutablePointer<GError>?
        let result = body(&error)
        // libsecret and GIO never return a value together with an error.
        if let error { throw .error(GLibError(consuming: error)) }
        guard let result else { throw .refused }
        return result
    }

    /// For calls returning a pointer where NULL without an error is a legitimate "nothing"
    /// (an empty GList, an unset alias).
    static func optionalPointer<T>(_ body: (UnsafeMutablePointer<UnsafeMutablePointer<GError>?>) -> T?) throws(Failure) -> T? {
        var error: UnsafeMutablePointer<GError>?
        let result = body(&error)
        if let error { throw .error(GLibError(consuming: error)) }
        return result
    }

    /// For calls returning gboolean.
    static func bool(_ body: (UnsafeMutablePointer<UnsafeMutablePointer<GError>?>) -> gboolean) throws(Failure) {
        var error: UnsafeMutablePointer<GError>?
        let ok = body(&error)
        if let error { throw .error(GLibError(consuming: error)) }
        if ok == 0 { throw .refused }
    }
}

// MARK: - Strings and hash tables

extension String {
    /// A C string from GLib; "" for NULL (GLib headers carry no nullability, so Swift sees every
    /// pointer as optional).
    init(glib pointer: UnsafePointer<CChar>?) {
        self = pointer.map { String(cString: $0) } ?? ""
    }
}

/// Runs `body` with a new `GHashTable<utf8, utf8>` holding `pairs`, and frees it afterwards.
func withStringTable<R, E: Error>(_ pairs: [String: String], _ body: (OpaquePointer) throws(E) -> R) throws(E) -> R? {
    // g_hash_table_new_full only fails when memory runs out (GLib aborts first).
    guard let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free) else { return nil }
    defer { g_hash_table_unref(table) }
    for (key, value) in pairs {
        g_hash_table_insert(table, g_strdup(key), g_strdup(value))
    }
    return try body(table)
}

// MARK: - Deadlines

/// Owns one `GCancellable` reference; shared between an operation and its timer so the timer can
/// never touch a freed object.
final class CancellableBox: @unchecked Sendable {
    // GCancellable is documented thread-safe: cancel from one thread while another waits on it.
    let pointer: UnsafeMutablePointer<GCancellable>

    /// nil only if GLib cannot allocate (it aborts on out-of-memory before that happens).
    init?() {
        guard let pointer = g_cancellable_new() else { return nil }
        self.pointer = pointer
    }

    deinit { g_object_unref(pointer) }

    func cancel() { g_cancellable_cancel(pointer) }
    var isCancelled: Bool { g_cancellable_is_cancelled(pointer) != 0 }
}

/// A time limit for one store operation: a `GCancellable` that a timer on a private queue cancels
/// when the time is up. Every blocking GLib call of the operation gets `cancellable`, so one
/// deadline bounds the whole operation, however many D-Bus calls it makes.
final class Deadline: @unchecked Sendable {
    // The timer queue is overcommitting (a serial queue of its own), so it fires even when every
    // cooperative-pool thread is blocked in a keyring call.
    private static let timerQueue = DispatchQueue(label: "dev.lanyard.secret-service.deadline")

    let seconds: TimeInterval
    let end: DispatchTime
    private let box: CancellableBox
    private let timer: DispatchSourceTimer

    init(seconds: TimeInterval) throws(KeyringFailure) {
        guard let box = CancellableBox() else { throw .refused("allocating a GCancellable") }
        self.box = box
        self.seconds = seconds
        end = .now() + max(0, seconds)
        timer = DispatchSource.makeTimerSource(queue: Deadline.timerQueue)
        timer.schedule(deadline: end)
        timer.setEventHandler { [box] in box.cancel() }
        timer.resume()
    }

    deinit { timer.cancel() }

    /// The cancellable to pass to GLib calls. Valid while `self` lives.
    var cancellable: UnsafeMutablePointer<GCancellable> { box.pointer }
    /// True once the time is up.
    var expired: Bool { box.isCancelled || DispatchTime.now() >= end }
    /// Seconds left (0 when expired).
    var remaining: TimeInterval {
        let now = DispatchTime.now()
        guard now < end else { return 0 }
        return Double(end.uptimeNanoseconds - now.uptimeNanoseconds) / 1e9
    }
    /// What is left, for D-Bus calls that also take a millisecond timeout (at least 1 ms).
    var remainingMilliseconds: Int32 { Int32(clamping: max(1, Int((remaining * 1000).rounded(.up)))) }
}

// MARK: - GDBus

/// Direct D-Bus calls on the session bus connection that libsecret uses, for the few things
/// libsecret's stable API does not offer (bus name owner, aliases, a fresh Locked property).
final class GDBusClient: @unchecked Sendable {
    // GDBusConnection is thread-safe; this class only holds one reference to it.
    private let connection: OpaquePointer

    private init(connection: OpaquePointer) { self.connection = connection }
    deinit { g_object_unref(UnsafeMutableRawPointer(connection)) }

    /// Connects to the session bus, or reuses GIO's shared connection (the one libsecret uses).
    /// The connection is told not to end the process when the bus goes away, which is GIO's
    /// default for the shared connection and would kill a long-running agent.
    static func sessionBus(_ deadline: Deadline) throws(GLibCall.Failure) -> GDBusClient {
        let connection = try GLibCall.pointer { g_bus_get_sync(G_BUS_TYPE_SESSION, deadline.cancellable, $0) }
        g_dbus_connection_set_exit_on_close(connection, 0)
        return GDBusClient(connection: connection)
    }

    var isClosed: Bool { g_dbus_connection_is_closed(connection) != 0 }

    /// Calls `method` with string arguments and returns the reply tuple's children as Swift values.
    func call(destination: String, path: String, interface: String, method: String, arguments: [String],
              deadline: Deadline) throws(GLibCall.Failure) -> [GValueTree] {
        var children: [OpaquePointer?] = arguments.map { g_variant_new_string($0) }
        // The tuple sinks the floating children; the call sinks the floating tuple.
        let parameters = children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
        let reply = try GLibCall.pointer {
            g_dbus_connection_call_sync(connection, destination, path, interface, method, parameters, nil,
                                        G_DBUS_CALL_FLAGS_NONE, deadline.remainingMilliseconds,
                                        deadline.cancellable, $0)
        }
        defer { g_variant_unref(reply) }
        return (0..<g_variant_n_children(reply)).map { GValueTree(g_variant_get_child_value(reply, $0)) }
    }

    /// The unique name owning `name`, or nil when nobody owns it.
    func nameOwner(_ name: String, deadline: Deadline) throws(GLibCall.Failure) -> String? {
        do {
            let reply = try call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                 interface: "org.freedesktop.DBus", method: "GetNameOwner", arguments: [name],
                                 deadline: deadline)
            return reply.first?.string
        } catch .error(let e) where e.domain == .dbus && e.code == Int32(G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue) {
            return nil
        }
    }

    /// True when the bus can start `name` on demand (a .service file in its service directories).
    func isActivatable(_ name: String, deadline: Deadline) throws(GLibCall.Failure) -> Bool {
        let reply = try call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                             interface: "org.freedesktop.DBus", method: "ListActivatableNames", arguments: [],
                             deadline: deadline)
        return reply.first?.array?.contains { $0.string == name } ?? false
    }

    /// Reads one property with org.freedesktop.DBus.Properties.Get (never a cached value).
    func property(destination: String, path: String, interface: String, name: String,
                  deadline: Deadline) throws(GLibCall.Failure) -> GValueTree? {
        try call(destination: destination, path: path, interface: "org.freedesktop.DBus.Properties",
                 method: "Get", arguments: [interface, name], deadline: deadline).first
    }
}

/// A GVariant copied into Swift: only the shapes the backend reads (strings, object paths,
/// booleans, arrays, boxed variants).
enum GValueTree: Sendable, Equatable {
    case string(String)
    case bool(Bool)
    case array([GValueTree])
    case other(String)

    /// Takes ownership of `variant` (a full reference) and releases it.
    init(_ variant: OpaquePointer?) {
        guard let variant else {
            self = .other("NULL")
            return
        }
        defer { g_variant_unref(variant) }
        let type = String(glib: g_variant_get_type_string(variant))
        switch type.first {
        case "s", "o", "g":
            self = .string(String(glib: g_variant_get_string(variant, nil)))
        case "b":
            self = .bool(g_variant_get_boolean(variant) != 0)
        case "v":
            self = GValueTree(g_variant_get_variant(variant))
        case "a", "(":
            self = .array((0..<g_variant_n_children(variant)).map { GValueTree(g_variant_get_child_value(variant, $0)) })
        default:
            self = .other(type)
        }
    }

    var string: String? { if case .string(let s) = self { return s }; return nil }
    var bool: Bool? { if case .bool(let b) = self { return b }; return nil }
    var array: [GValueTree]? { if case .array(let a) = self { return a }; return nil }
}
