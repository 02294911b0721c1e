// LanyardGLib: the one module that calls GLib and GIO (libsecret's own calls stay in
// LanyardStore/SecretServiceLibsecret.swift). No C type leaves it: its API speaks Swift.
//
// GIO is loaded on first use (CLazyLibraries), so nothing here may call a GIO function on a
// path that plain GLib work (key files, durable writes) can take.

import CLibsecret

// MARK: - Errors

/// A `GError` copied into Swift (the C error is freed right away).
package struct GLibError: Error, Sendable, CustomStringConvertible {
    /// The error domains Lanyard tells apart.
    package enum Domain: Sendable, Equatable {
        /// `G_IO_ERROR` (GIO).
        case io
        /// `G_DBUS_ERROR` (GDBus).
        case dbus
        /// `SECRET_ERROR` (libsecret).
        case secret
        /// Any other domain, by its quark's name (`g-key-file-error-quark`, `g-file-error-quark`, …).
        case other(String)
    }

    /// Where the error comes from.
    package let domain: Domain
    /// The code within `domain`.
    package let code: Int32
    /// The error text. GLib, GDBus and libsecret messages name methods and object paths, never secrets.
    /// GDBus's `GDBus.Error:<name>: ` prefix is removed (the name is in `remoteName`).
    package let message: String
    /// The text exactly as GLib gave it, GDBus's remote-error prefix included.
    package let originalMessage: String
    /// The D-Bus error name (`org.freedesktop.DBus.Error.ServiceUnknown`, …) when the error came from a peer.
    package let remoteName: String?

    /// Takes ownership of `error` and frees it.
    package init(consuming error: UnsafeMutablePointer<GError>) {
        // The domain is told by its quark's name rather than by calling g_io_error_quark() and
        // friends: those live in GIO and libsecret, and calling them would load both (a key-file
        // error must not). A GIO or libsecret domain can only turn up once they are loaded.
        let name = g_quark_to_string(error.pointee.domain).map { String(cString: $0) } ?? "unknown"
        switch name {
        case "g-io-error-quark": domain = .io
        case "g-dbus-error-quark": domain = .dbus
        case "secret-error": domain = .secret
        default: domain = .other(name)
        }
        code = error.pointee.code
        originalMessage = error.pointee.message.map { String(cString: $0) } ?? "no message"
        if case .other = domain {
            remoteName = nil
        } else {
            // Errors of these domains only come from GIO or libsecret, so GIO is loaded.
            if let remote = g_dbus_error_get_remote_error(error) {
                remoteName = String(cString: remote)
                g_free(remote)
            } else {
                remoteName = nil
            }
            g_dbus_error_strip_remote_error(error)
        }
        message = error.pointee.message.map { String(cString: $0) } ?? "no message"
        g_error_free(error)
    }

    /// True when a `GCancellable` stopped the call (for Lanyard: a ``Deadline`` ran out).
    package var isCancelled: Bool { domain == .io && code == Int32(G_IO_ERROR_CANCELLED.rawValue) }

    /// True when the peer is gone or the bus could not route to it: the service stopped, crashed
    /// or was never there.
    package var isServiceGone: Bool {
        switch domain {
        case .dbus:
            return [
                G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER, G_DBUS_ERROR_NO_REPLY,
                G_DBUS_ERROR_DISCONNECTED, G_DBUS_ERROR_NO_SERVER, G_DBUS_ERROR_SPAWN_EXEC_FAILED,
                G_DBUS_ERROR_SPAWN_FORK_FAILED, G_DBUS_ERROR_SPAWN_CHILD_EXITED,
                G_DBUS_ERROR_SPAWN_CHILD_SIGNALED, G_DBUS_ERROR_SPAWN_FAILED,
                G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND, G_DBUS_ERROR_SPAWN_SERVICE_INVALID,
                G_DBUS_ERROR_SPAWN_FILE_INVALID,
            ]
            .contains { Int32($0.rawValue) == code }
        case .io:
            return [
                G_IO_ERROR_CLOSED, G_IO_ERROR_CONNECTION_CLOSED, G_IO_ERROR_BROKEN_PIPE,
                G_IO_ERROR_CONNECTION_REFUSED, G_IO_ERROR_NOT_FOUND,
            ]
            .contains { Int32($0.rawValue) == code }
        default:
            return false
        }
    }

    /// True when nobody owns the bus name called and the bus could not start a service for it.
    package var isNoOwner: Bool {
        domain == .dbus
            && [G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER].contains { Int32($0.rawValue) == code }
    }

    /// True for GDBus's answers about a missing object: unknown object, method, interface or
    /// property (gnome-keyring answers calls on a missing object with UnknownMethod).
    package var isUnknownDBusObject: Bool {
        domain == .dbus
            && [
                G_DBUS_ERROR_UNKNOWN_OBJECT, G_DBUS_ERROR_UNKNOWN_METHOD, G_DBUS_ERROR_UNKNOWN_INTERFACE,
                G_DBUS_ERROR_UNKNOWN_PROPERTY,
            ].contains { Int32($0.rawValue) == code }
    }

    /// The message, followed by the D-Bus error name when there is one.
    package var description: String { remoteName.map { "\(message) (\($0))" } ?? message }
}

// MARK: - Calls

/// Runs a GLib call that reports failure through a `GError **`. A call that fails without setting
/// the error (libsecret does this when it refuses attributes, after a g_critical) is reported as
/// `refused`, never as success or "not found".
package enum GLibCall {
    /// How a call failed.
    package enum Failure: Error {
        /// The call set its `GError`.
        case error(GLibError)
        /// The call failed without saying why.
        case refused
    }

    /// The `GError **` argument a call fills in.
    package typealias ErrorOut = UnsafeMutablePointer<UnsafeMutablePointer<GError>?>

    /// For calls returning a pointer: NULL means failure.
    package static func pointer<T>(_ body: (ErrorOut) -> T?) throws(Failure) -> T {
        var error: UnsafeMutablePointer<GError>?
        let result = body(&error)
        // libsecret and GIO never return a value together with an error.
        if let error { throw .error(GLibError(consuming: error)) }
        guard let result else { throw .refused }
        return result
    }

    /// For calls returning a pointer where NULL without an error is a legitimate "nothing"
    /// (an empty GList, an unset alias).
    package static func optionalPointer<T>(_ body: (ErrorOut) -> T?) throws(Failure) -> T? {
        var error: UnsafeMutablePointer<GError>?
        let result = body(&error)
        if let error { throw .error(GLibError(consuming: error)) }
        return result
    }

    /// For calls returning gboolean.
    package static func bool(_ body: (ErrorOut) -> gboolean) throws(Failure) {
        var error: UnsafeMutablePointer<GError>?
        let ok = body(&error)
        if let error { throw .error(GLibError(consuming: error)) }
        if ok == 0 { throw .refused }
    }
}

extension GLibCall.Failure {
    /// The error the call set; nil when it failed without one.
    package var glibError: GLibError? {
        if case .error(let e) = self { return e }
        return nil
    }

    /// The error's message, or `fallback` for a call that failed without one.
    package func message(or fallback: String) -> String {
        switch self {
        case .error(let e): return e.message
        case .refused: return fallback
        }
    }

    /// The error's message as GLib gave it (GDBus's remote-error prefix kept), or `fallback` for a
    /// call that failed without one.
    package func originalMessage(or fallback: String) -> String {
        switch self {
        case .error(let e): return e.originalMessage
        case .refused: return fallback
        }
    }
}
