// Durable atomic replacement of a file (GLib's g_file_set_contents_full).

import CLibsecret
import FoundationEssentials
import Glibc

/// Whole-file writes that survive a crash or power cut at any moment.
package enum DurableFile {
    /// Replaces `path` with `data`: a temp file in the same folder, fsync, rename, fsync of the
    /// folder (`g_file_set_contents_full` with CONSISTENT|DURABLE); the file gets `mode`.
    /// - Throws: GLib's error, or `refused` when it failed without one.
    package static func replace(_ path: String, with data: Data, mode: Int32 = 0o600) throws(GLibCall.Failure) {
        let flags = GFileSetContentsFlags(
            rawValue: G_FILE_SET_CONTENTS_CONSISTENT.rawValue | G_FILE_SET_CONTENTS_DURABLE.rawValue
        )
        var bytes = [CChar](repeating: 0, count: max(data.count, 1))
        bytes.withUnsafeMutableBytes { _ = data.copyBytes(to: $0) }
        try GLibCall.bool { g_file_set_contents_full(path, bytes, gssize(data.count), flags, mode, $0) }
    }
}
