import CLibsecret
import CLibsecretLoader
import Foundation

/// Desktop notifications through `org.freedesktop.Notifications` on the session bus (GDBus).
/// Every failure (no bus, no notification service, a slow one) is reported, never thrown: the
/// agent works the same without a desktop.
public struct DesktopNotifier: Sendable {
    public var timeoutMilliseconds: Int32 = 2000

    public init() {}

    /// Sends one notification.
    /// - Returns: nil when the service took it, else why not.
    @discardableResult
    public func notify(summary: String, body: String, urgency: UInt8 = 1) -> String? {
        var loadError: UnsafePointer<CChar>?
        guard lanyard_libsecret_load(&loadError) != 0 else { return loadError.map { String(cString: $0) } ?? "cannot load GIO" }
        var error: UnsafeMutablePointer<GError>?
        guard let connection = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            return Self.take(error) ?? "no session bus"
        }
        defer { g_object_unref(UnsafeMutableRawPointer(connection)) }
        let entryType = g_variant_type_new("{sv}")
        defer { g_variant_type_free(entryType) }
        var hint: [OpaquePointer?] = [g_variant_new_dict_entry(g_variant_new_string("urgency"), g_variant_new_variant(g_variant_new_byte(urgency)))]
        let hints = hint.withUnsafeMutableBufferPointer { g_variant_new_array(entryType, $0.baseAddress, 1) }
        var children: [OpaquePointer?] = [
            g_variant_new_string("Lanyard"), g_variant_new_uint32(0), g_variant_new_string("dialog-password"),
            g_variant_new_string(summary), g_variant_new_string(body), g_variant_new_strv(nil, 0), hints, g_variant_new_int32(-1),
        ]
        let parameters = children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
        let reply = g_dbus_connection_call_sync(connection, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                                                "org.freedesktop.Notifications", "Notify", parameters, nil,
                                                G_DBUS_CALL_FLAGS_NONE, timeoutMilliseconds, nil, &error)
        guard let reply else { return Self.take(error) ?? "Notify failed" }
        g_variant_unref(reply)
        return nil
    }

    private static func take(_ error: UnsafeMutablePointer<GError>?) -> String? {
        guard let error else { return nil }
        defer { g_error_free(error) }
        return String(cString: error.pointee.message)
    }
}
