// GLib's key files (GKeyFile): the format of config.ini.

import CLibsecret

/// A parsed key file (`[group]` and `key = value` lines), read-only once loaded.
package final class KeyFile {
    /// Why a text is not a key file.
    package struct ParseError: Error, Sendable {
        /// GLib's message, which quotes the offending line's text (but not its number).
        package var message: String
    }

    private let file: OpaquePointer

    /// An empty key file.
    package init() { file = g_key_file_new() }
    deinit { g_key_file_free(file) }

    /// Parses `text` (comments and blank lines are dropped).
    package func load(_ text: String) throws(ParseError) {
        do {
            try GLibCall.bool { g_key_file_load_from_data(file, text, gsize(text.utf8.count), G_KEY_FILE_NONE, $0) }
        } catch {
            throw ParseError(message: error.message(or: "does not parse"))
        }
    }

    /// The groups, in file order.
    package func groups() -> [String] {
        var count: gsize = 0
        let list = g_key_file_get_groups(file, &count)
        return takeStringVector(list, count: count)
    }

    /// The keys of `group`, in file order; empty when there is no such group.
    package func keys(_ group: String) -> [String] {
        var count: gsize = 0
        let list = g_key_file_get_keys(file, group, &count, nil)
        return takeStringVector(list, count: count)
    }

    /// The value of `key` in `group` (escapes like `\n` decoded), or nil when it is not set.
    package func string(_ group: String, _ key: String) -> String? {
        String(takingGLib: g_key_file_get_string(file, group, key, nil))
    }
}
