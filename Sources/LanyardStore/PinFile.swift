import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport
import LanyardSystem

/// `.lanyard` files pin a slot to a directory tree: the nearest one walking up from the working
/// directory wins. The file holds the slot name on its first non-comment line.
package enum PinFile {
    package static let name = ".lanyard"

    /// The largest pin file read; a pin holds one slot name and comments.
    package static let maxBytes = 64 * 1024

    /// The outcome of looking for a pin: the one that applies, and the pins passed over on the way
    /// up because they could have been planted by someone else (each with the reason).
    package struct Lookup: Sendable {
        package var pin: (path: String, name: String)?
        package var ignored: [(path: String, reason: String)] = []
    }

    /// The nearest pin at or above `directory`: its path and the raw slot name it holds.
    package static func nearest(from directory: String) -> (path: String, name: String)? { find(from: directory).pin }

    /// The nearest trustworthy pin at or above `directory`. A pin is passed over (and reported in
    /// `ignored`) when it is not a regular file (a FIFO would block, `/dev/zero` never ends), is
    /// larger than ``maxBytes``, is owned by someone other than `uid` or root, or sits in a folder
    /// anyone may write to without the sticky bit: any of these lets another user choose which of
    /// your accounts a command uses. Only the first 4 KiB are read.
    package static func find(from directory: String, uid: uid_t = getuid()) -> Lookup {
        var lookup = Lookup()
        var dir = URL(fileURLWithPath: directory).standardizedFileURL.path
        while true {
            let candidate = (dir == "/" ? "" : dir) + "/" + name
            switch read(candidate, folder: dir.isEmpty ? "/" : dir, uid: uid) {
            case .none: break
            case .some(.success(let text)):
                lookup.pin = (candidate, slotName(in: text))
                return lookup
            case .some(.failure(let refusal)):
                lookup.ignored.append((candidate, refusal.reason))
            }
            if dir == "/" || dir.isEmpty { return lookup }
            dir = PathText.parent(of: dir)
        }
    }

    /// Pins found by ``scan(under:uid:maxDepth:maxFolders:)``.
    package struct Scan: Sendable {
        /// Each trustworthy pin found (path, raw slot name), in path order.
        package var pins: [(path: String, name: String)] = []
        /// Whether the walk stopped at its folder budget before seeing every folder.
        package var stoppedEarly = false
    }

    /// Folder names the scan never enters: build output and dependency trees hold no pins of
    /// their own and can hold many thousands of folders.
    static let unscannedFolders: Set<String> = ["node_modules", "target", "vendor", "__pycache__"]

    /// Looks for pins in `roots` and the folders below them, down to `maxDepth` levels, visiting
    /// at most `maxFolders` folders in all (breadth first, so the shallow ones are seen first).
    /// Hidden folders, symbolic links and ``unscannedFolders`` are not entered; pins that
    /// ``find(from:uid:)`` would pass over are left out.
    package static func scan(
        under roots: [String],
        uid: uid_t = getuid(),
        maxDepth: Int = 4,
        maxFolders: Int = 4000
    ) -> Scan {
        var result = Scan()
        var seen = Set<String>()
        var queue: [(path: String, depth: Int)] = []
        for root in roots {
            let path = URL(fileURLWithPath: root).standardizedFileURL.path
            if seen.insert(path).inserted { queue.append((path, 0)) }
        }
        var next = 0
        while next < queue.count {
            if next == maxFolders {
                result.stoppedEarly = true
                break
            }
            let (folder, depth) = queue[next]
            next += 1
            guard let dir = opendir(folder) else { continue }
            defer { closedir(dir) }
            let prefix = folder == "/" ? "" : folder
            while let entry = readdir(dir) {
                let name = String(nulTerminatedTuple: entry.pointee.d_name)
                let path = prefix + "/" + name
                var type = entry.pointee.d_type
                if type == UInt8(DT_UNKNOWN) {
                    var info = stat()
                    guard lstat(path, &info) == 0 else { continue }
                    type =
                        info.st_mode & S_IFMT == S_IFDIR
                        ? UInt8(DT_DIR) : info.st_mode & S_IFMT == S_IFREG ? UInt8(DT_REG) : UInt8(DT_UNKNOWN)
                }
                if name == Self.name, type == UInt8(DT_REG),
                    case .success(let text)? = read(path, folder: folder, uid: uid)
                {
                    result.pins.append((path, slotName(in: text)))
                } else if type == UInt8(DT_DIR), depth < maxDepth, !name.hasPrefix("."),
                    !unscannedFolders.contains(name),
                    seen.insert(path).inserted
                {
                    queue.append((path, depth + 1))
                }
            }
        }
        result.pins.sort { $0.path < $1.path }
        return result
    }

    /// The raw slot name a pin's text holds: its first line that is neither blank nor a comment,
    /// trimmed ("" when there is none). Checking it is ``Slot``'s job.
    package static func slotName(in text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingSpaces() }.first { !$0.isEmpty && !$0.hasPrefix("#") }
            ?? ""
    }

    struct Refusal: Error { let reason: String }

    /// The pin's text, a refusal, or nil when there is no pin at `path`.
    static func read(_ path: String, folder: String, uid: uid_t) -> Result<String, Refusal>? {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            return .failure(Refusal(reason: "cannot be read (\(SystemCallError.reason()))"))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .failure(Refusal(reason: "cannot be examined")) }
        guard info.st_mode & S_IFMT == S_IFREG else { return .failure(Refusal(reason: "is not a regular file")) }
        guard info.st_uid == uid || info.st_uid == 0 else {
            return .failure(Refusal(reason: "belongs to uid \(info.st_uid), not to you"))
        }
        guard info.st_size <= maxBytes else {
            return .failure(Refusal(reason: "is \(info.st_size) bytes; a pin holds one slot name"))
        }
        var folderInfo = stat()
        if stat(folder, &folderInfo) == 0, folderInfo.st_mode & S_IWOTH != 0, folderInfo.st_mode & S_ISVTX == 0 {
            return .failure(Refusal(reason: "is in \(folder), which anyone may write to"))
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n >= 0 else { return .failure(Refusal(reason: "cannot be read (\(SystemCallError.reason()))")) }
        return .success(String(decoding: buffer[0..<n], as: UTF8.self))
    }

    /// Writes `directory/.lanyard` naming `slot` (mode 0644: it is not secret and may be committed).
    package static func write(_ slot: Slot, in directory: String) throws(StoreError) -> String {
        let path = directory + "/" + name
        let text = "# Lanyard account for this directory tree (see `lanyard which`)\n\(slot.name)\n"
        guard
            FileManager.default.createFile(
                atPath: path,
                contents: Data(text.utf8),
                attributes: [.posixPermissions: 0o644]
            )
        else {
            throw .io(path: path, detail: "cannot write pin file")
        }
        return path
    }

    /// Removes `directory/.lanyard`; false when there was none.
    package static func remove(in directory: String) throws(StoreError) -> Bool {
        let path = directory + "/" + name
        if unlink(path) == 0 { return true }
        if errno == ENOENT { return false }
        throw .io(path: path, detail: SystemCallError.reason())
    }
}
