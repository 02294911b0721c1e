// GObject references and the lazy loading of GIO, GObject and libsecret.

import CLazyLibraries
import CLibsecret

/// Loads libsecret, GIO and GObject on first use (see Sources/CLazyLibraries).
package enum LazyLibraries {
    /// Loads them on first use; nil once they are loaded, else why they cannot be.
    package static func loadFailure() -> String? {
        var error: UnsafePointer<CChar>?
        guard lanyard_libsecret_load(&error) == 0 else { return nil }
        // The loader always says why; the fallback only guards against a NULL.
        return error.map { String(cString: $0) } ?? "cannot load libsecret"
    }

    /// Loads GLib, GIO's D-Bus service side and libsecret (with GIO and GObject) on first use, as
    /// the desktop's D-Bus objects (CStatusNotifier) need them; nil once they are loaded, else why
    /// they cannot be.
    package static func desktopLoadFailure() -> String? {
        for load in [lanyard_glib_load, lanyard_gio_load, lanyard_libsecret_load] {
            var error: UnsafePointer<CChar>?
            if load(&error) == 0 { return error.map { String(cString: $0) } ?? "cannot load GIO" }
        }
        return nil
    }
}

/// Owns one reference to a GObject (a libsecret service or item, a D-Bus connection) and
/// releases it when dropped. `@unchecked`: the pointer never changes, and GObject reference
/// counting is atomic.
package final class GObjectReference: @unchecked Sendable {
    // GObject reference counting is atomic; this class only holds the reference.
    /// The object, valid while `self` lives.
    package let pointer: OpaquePointer

    /// Takes over a reference the caller owned.
    package init(adopting pointer: OpaquePointer) { self.pointer = pointer }

    /// Adds a reference of its own to `pointer`.
    package init(retaining pointer: OpaquePointer) {
        g_object_ref(UnsafeMutableRawPointer(pointer))
        self.pointer = pointer
    }

    deinit { g_object_unref(UnsafeMutableRawPointer(pointer)) }

    /// The D-Bus object path of a `GDBusProxy` (libsecret's items and collections are proxies).
    package var proxyObjectPath: String {
        String(glib: g_dbus_proxy_get_object_path(UnsafeMutablePointer<GDBusProxy>(pointer)))
    }
}
