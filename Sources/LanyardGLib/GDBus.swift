// D-Bus calls through GDBus, with Swift values in and out.

import CLibsecret

/// A D-Bus argument (a `GVariant` built when the call is made).
package indirect enum DBusValue: Sendable, Equatable {
    /// `s`
    case string(String)
    /// `y`
    case byte(UInt8)
    /// `i`
    case int32(Int32)
    /// `u`
    case uint32(UInt32)
    /// `as`
    case stringArray([String])
    /// `v`
    case variant(DBusValue)
    /// `a{sv}`, in this order.
    case dictionary([Entry])

    /// One `{sv}` entry of a dictionary.
    package struct Entry: Sendable, Equatable {
        /// The key.
        package var key: String
        /// The value, boxed in a variant.
        package var value: DBusValue

        /// An entry `key` → `<value>`.
        package init(_ key: String, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// A new floating `GVariant` holding this value (the call sinks it).
    fileprivate func makeVariant() -> OpaquePointer? {
        switch self {
        case .string(let s): return g_variant_new_string(s)
        case .byte(let b): return g_variant_new_byte(b)
        case .int32(let i): return g_variant_new_int32(i)
        case .uint32(let u): return g_variant_new_uint32(u)
        case .stringArray(let strings):
            // g_variant_new_strv copies the strings.
            var copies: [UnsafePointer<gchar>?] = strings.map { UnsafePointer(g_strdup($0)) }
            defer { for copy in copies { g_free(UnsafeMutableRawPointer(mutating: copy)) } }
            return copies.withUnsafeMutableBufferPointer { g_variant_new_strv($0.baseAddress, gssize($0.count)) }
        case .variant(let inner): return g_variant_new_variant(inner.makeVariant())
        case .dictionary(let entries):
            let entryType = g_variant_type_new("{sv}")
            defer { g_variant_type_free(entryType) }
            var children: [OpaquePointer?] = entries.map {
                g_variant_new_dict_entry(g_variant_new_string($0.key), g_variant_new_variant($0.value.makeVariant()))
            }
            return children.withUnsafeMutableBufferPointer {
                g_variant_new_array(entryType, $0.baseAddress, gsize($0.count))
            }
        }
    }
}

/// Direct D-Bus calls on the session bus connection (the one libsecret uses too), for what
/// libsecret's stable API does not offer (bus name owner, aliases, a fresh Locked property) and
/// for desktop notifications. `@unchecked`: it holds one immutable reference to a
/// GDBusConnection, which GIO makes thread-safe.
package final class GDBusClient: @unchecked Sendable {
    // GDBusConnection is thread-safe; this class only holds one reference to it.
    private let connection: GObjectReference

    private init(connection: GObjectReference) { self.connection = connection }

    /// Connects to the session bus, or reuses GIO's shared connection (the one libsecret uses).
    /// The connection is told not to end the process when the bus goes away, which is GIO's
    /// default for the shared connection and would kill a long-running agent.
    /// - Parameter deadline: bounds the connection; nil waits as long as GIO does.
    package static func sessionBus(_ deadline: Deadline?) throws(GLibCall.Failure) -> GDBusClient {
        let connection = try GLibCall.pointer { g_bus_get_sync(G_BUS_TYPE_SESSION, deadline?.cancellable, $0) }
        g_dbus_connection_set_exit_on_close(connection, 0)
        return GDBusClient(connection: GObjectReference(adopting: connection))
    }

    private var pointer: OpaquePointer { connection.pointer }

    /// True once the connection is closed (the bus went away).
    package var isClosed: Bool { g_dbus_connection_is_closed(pointer) != 0 }

    /// Calls `method` with `arguments` and returns the reply tuple's children as Swift values.
    /// - Parameters:
    ///   - timeoutMilliseconds: the reply timeout; nil for what is left of `deadline`.
    ///   - deadline: cancels the call when it runs out; nil for no cancellation (then give a timeout).
    package func call(
        destination: String,
        path: String,
        interface: String,
        method: String,
        arguments: [DBusValue],
        timeoutMilliseconds: Int32? = nil,
        deadline: Deadline?
    ) throws(GLibCall.Failure) -> [GValueTree] {
        var children: [OpaquePointer?] = arguments.map { $0.makeVariant() }
        // The tuple sinks the floating children; the call sinks the floating tuple.
        let parameters = children.withUnsafeMutableBufferPointer {
            g_variant_new_tuple($0.baseAddress, gsize($0.count))
        }
        let timeout = timeoutMilliseconds ?? deadline?.remainingMilliseconds ?? -1
        let reply = try GLibCall.pointer {
            g_dbus_connection_call_sync(
                pointer,
                destination,
                path,
                interface,
                method,
                parameters,
                nil,
                G_DBUS_CALL_FLAGS_NONE,
                timeout,
                deadline?.cancellable,
                $0
            )
        }
        defer { g_variant_unref(reply) }
        return (0..<g_variant_n_children(reply)).map { GValueTree(g_variant_get_child_value(reply, $0)) }
    }

    /// The unique name owning `name`, or nil when nobody owns it.
    package func nameOwner(_ name: String, deadline: Deadline) throws(GLibCall.Failure) -> String? {
        do {
            let reply = try call(
                destination: "org.freedesktop.DBus",
                path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus",
                method: "GetNameOwner",
                arguments: [.string(name)],
                deadline: deadline
            )
            return reply.first?.string
        } catch .error(let e) where e.domain == .dbus && e.code == Int32(G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue) {
            return nil
        }
    }

    /// The process id of the connection owning `name` (the bus daemon knows it from the socket).
    package func processID(of name: String, deadline: Deadline) throws(GLibCall.Failure) -> UInt32? {
        let reply = try call(
            destination: "org.freedesktop.DBus",
            path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus",
            method: "GetConnectionUnixProcessID",
            arguments: [.string(name)],
            deadline: deadline
        )
        return reply.first?.uint32
    }

    /// True when the bus can start `name` on demand (a .service file in its service directories).
    package func isActivatable(_ name: String, deadline: Deadline) throws(GLibCall.Failure) -> Bool {
        let reply = try call(
            destination: "org.freedesktop.DBus",
            path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus",
            method: "ListActivatableNames",
            arguments: [],
            deadline: deadline
        )
        return reply.first?.array?.contains { $0.string == name } ?? false
    }

    /// Reads one property with org.freedesktop.DBus.Properties.Get (never a cached value).
    package func property(
        destination: String,
        path: String,
        interface: String,
        name: String,
        deadline: Deadline
    ) throws(GLibCall.Failure) -> GValueTree? {
        try call(
            destination: destination,
            path: path,
            interface: "org.freedesktop.DBus.Properties",
            method: "Get",
            arguments: [.string(interface), .string(name)],
            deadline: deadline
        ).first
    }
}

/// A D-Bus reply value copied into Swift: only the shapes Lanyard reads (strings, object paths,
/// booleans, arrays, boxed variants).
package enum GValueTree: Sendable, Equatable {
    /// `s`, `o` or `g`.
    case string(String)
    /// `b`
    case bool(Bool)
    /// `u`
    case uint32(UInt32)
    /// An array, a tuple or a dictionary entry (key and value).
    case array([GValueTree])
    /// Any other type, by its type string.
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
        case "u":
            self = .uint32(g_variant_get_uint32(variant))
        case "v":
            self = GValueTree(g_variant_get_variant(variant))
        case "a", "(", "{":  // a dictionary entry is a pair, like a tuple
            self = .array(
                (0..<g_variant_n_children(variant)).map { GValueTree(g_variant_get_child_value(variant, $0)) }
            )
        default:
            self = .other(type)
        }
    }

    /// The string, for `.string`.
    package var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    /// The boolean, for `.bool`.
    package var bool: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    /// The number, for `.uint32`.
    package var uint32: UInt32? {
        if case .uint32(let u) = self { return u }
        return nil
    }
    /// The elements, for `.array`.
    package var array: [GValueTree]? {
        if case .array(let a) = self { return a }
        return nil
    }
}
