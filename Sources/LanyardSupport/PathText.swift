#if canImport(Glibc)
import Glibc
#endif

/// File-path string operations that NSString offered (`deletingLastPathComponent`,
/// `lastPathComponent`) and the user's home folder that `NSHomeDirectory` gave, for code that
/// links FoundationEssentials only.
package enum PathText {
    /// `path` without its last component, as NSString's `deletingLastPathComponent`:
    /// "/a/b/c" → "/a/b", "/a" → "/", "a" → "", "/a/b/" → "/a".
    package static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        if slash == trimmed.startIndex { return "/" }
        var parent = trimmed[..<slash]
        while parent.count > 1, parent.hasSuffix("/") { parent.removeLast() }
        return String(parent)
    }

    /// The last component of `path`, as NSString's `lastPathComponent`: "/a/b/" → "b", "/" → "/".
    package static func lastComponent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        if trimmed == "/" { return "/" }
        guard let slash = trimmed.lastIndex(of: "/") else { return String(trimmed) }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// The home folder of the user running the process from the password database (for when
    /// `HOME` is unset or empty), or "/" when there is none.
    package static func passwordDatabaseHome() -> String {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(getuid(), &entry, &buffer, buffer.count, &result) == 0, result != nil, let dir = entry.pw_dir
        else {
            return "/"
        }
        let home = String(cString: dir)
        return home.isEmpty ? "/" : home
    }
}
