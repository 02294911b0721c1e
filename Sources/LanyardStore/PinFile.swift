import Foundation
import LanyardCore

/// `.lanyard` files pin a slot to a directory tree: the nearest one walking up from the working
/// directory wins. The file holds the slot name on its first non-comment line.
public enum PinFile {
    public static let name = ".lanyard"

    /// The nearest pin at or above `directory`: its path and the raw slot name it holds.
    public static func nearest(from directory: String) -> (path: String, name: String)? {
        var dir = URL(fileURLWithPath: directory).standardizedFileURL.path
        while true {
            let candidate = (dir == "/" ? "" : dir) + "/" + name
            if let data = FileManager.default.contents(atPath: candidate) {
                let text = String(decoding: data.prefix(4096), as: UTF8.self)
                let line = text.split(whereSeparator: \.isNewline)
                    .map { $0.trimmingSpaces() }
                    .first { !$0.isEmpty && !$0.hasPrefix("#") }
                return (candidate, line ?? "")
            }
            if dir == "/" || dir.isEmpty { return nil }
            dir = (dir as NSString).deletingLastPathComponent
        }
    }

    /// Writes `directory/.lanyard` naming `slot` (mode 0644: it is not secret and may be committed).
    public static func write(_ slot: Slot, in directory: String) throws(StoreError) -> String {
        let path = directory + "/" + name
        let text = "# Lanyard account for this directory tree (see `lanyard which`)\n\(slot.name)\n"
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o644]) else {
            throw .io(path: path, detail: "cannot write pin file")
        }
        return path
    }

    /// Removes `directory/.lanyard`; false when there was none.
    public static func remove(in directory: String) throws(StoreError) -> Bool {
        let path = directory + "/" + name
        if unlink(path) == 0 { return true }
        if errno == ENOENT { return false }
        throw .io(path: path, detail: String(cString: strerror(errno)))
    }
}
