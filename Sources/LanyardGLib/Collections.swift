// GLib strings, hash tables and lists, to and from Swift values.

import CLibsecret

extension String {
    /// A C string from GLib; "" for NULL (GLib headers carry no nullability, so Swift sees every
    /// pointer as optional).
    package init(glib pointer: UnsafePointer<CChar>?) {
        self = pointer.map { String(cString: $0) } ?? ""
    }

    /// A newly allocated C string from GLib, which this frees with `g_free`; nil for NULL.
    package init?(takingGLib pointer: UnsafeMutablePointer<CChar>?) {
        guard let pointer else { return nil }
        defer { g_free(pointer) }
        self = String(cString: pointer)
    }
}

/// Runs `body` with a new `GHashTable<utf8, utf8>` holding `pairs`, and frees it afterwards.
/// - Returns: nil only when GLib cannot allocate the table.
package func withStringTable<R, E: Error>(
    _ pairs: [String: String],
    _ body: (OpaquePointer) throws(E) -> R
) throws(E) -> R? {
    // g_hash_table_new_full only fails when memory runs out (GLib aborts first).
    guard let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free) else { return nil }
    defer { g_hash_table_unref(table) }
    for (key, value) in pairs {
        g_hash_table_insert(table, g_strdup(key), g_strdup(value))
    }
    return try body(table)
}

/// Runs `body` with a new `GHashTable<utf8, int>` holding `pairs` (values packed into pointers
/// like `GINT_TO_POINTER`), and frees it afterwards.
/// - Returns: nil only when GLib cannot allocate the table.
package func withIntegerTable<R, E: Error>(
    _ pairs: [String: Int],
    _ body: (OpaquePointer) throws(E) -> R
) throws(E) -> R? {
    guard let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, nil) else { return nil }
    defer { g_hash_table_unref(table) }
    for (key, value) in pairs {
        g_hash_table_insert(table, g_strdup(key), UnsafeMutableRawPointer(bitPattern: value))
    }
    return try body(table)
}

/// The pairs of a `GHashTable<utf8, utf8>`, whose reference this takes over and releases.
package func takeStringTable(_ table: OpaquePointer?) -> [String: String] {
    guard let table else { return [:] }
    defer { g_hash_table_unref(table) }
    var result: [String: String] = [:]
    var iter = GHashTableIter()
    g_hash_table_iter_init(&iter, table)
    var key: gpointer?
    var value: gpointer?
    while g_hash_table_iter_next(&iter, &key, &value) != 0 {
        if let key, let value {
            result[String(cString: key.assumingMemoryBound(to: CChar.self))] =
                String(cString: value.assumingMemoryBound(to: CChar.self))
        }
    }
    return result
}

/// The elements of a `GList`, which this frees (the elements themselves are not touched: the
/// references they hold pass to the caller).
package func takeList(_ list: UnsafeMutablePointer<GList>?) -> [OpaquePointer] {
    var elements: [OpaquePointer] = []
    var node = list
    while let current = node {
        if let data = current.pointee.data { elements.append(OpaquePointer(data)) }
        node = current.pointee.next
    }
    g_list_free(list)
    return elements
}

/// The strings of a NULL-terminated `gchar **` of `count` entries, which this frees (`g_strfreev`).
func takeStringVector(_ vector: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?, count: gsize) -> [String] {
    guard let vector else { return [] }
    defer { g_strfreev(vector) }
    return (0..<Int(count)).compactMap { vector[$0].map { String(cString: $0) } }
}
