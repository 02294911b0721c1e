import FoundationEssentials
import Glibc
import LanyardCore

/// What an interrupted durable write leaves next to the file it was replacing: GLib's temporary
/// (`FILE.` and six letters or digits, from `g_file_set_contents_full`), or the hard link made to
/// keep the previous generation (`FILE.prev.tmp`). Every write of these files holds the file's
/// lock from before the temporary is made until after it is renamed into place, so a temporary
/// found while that lock is free belongs to a write that was killed: nothing will ever rename it.
public enum LeftoverTemporaries {
    /// The files of the data folder that are replaced durably, each with the lock its writers hold.
    static func guarded(_ paths: Paths) -> [(file: String, lock: String)] {
        let fileStore = EncryptedFileStore(paths: paths)
        let storeLock = fileStore.storePath + ".lock"
        return [(paths.registryFile, paths.registryFile + ".lock"), (fileStore.storePath, storeLock),
                (fileStore.plainIdentityPath, storeLock), (fileStore.protectedIdentityPath, storeLock)]
    }

    /// The leftovers in the data folder now, by path: temporaries of the guarded files whose lock
    /// nobody holds. Reads only (a lock file that does not exist is free: writers create it).
    public static func find(_ paths: Paths) -> [String] {
        candidates(paths).filter { lockIsFree($0.lock) }.map(\.path)
    }

    /// Removes the leftovers, each while holding its file's lock (so a write that starts meanwhile
    /// waits); a temporary whose lock is held is a write in progress and stays. Returns the paths
    /// removed.
    public static func remove(_ paths: Paths) -> [String] {
        var removed: [String] = []
        for (lockPath, group) in Dictionary(grouping: candidates(paths), by: \.lock) {
            guard (try? FileLock.tryLock(path: lockPath)).flatMap({ $0 }) != nil else { continue }
            // (The lock is held until the end of this iteration.)
            for candidate in group.sorted(by: { $0.path < $1.path }) where unlink(candidate.path) == 0 {
                removed.append(candidate.path)
            }
        }
        return removed.sorted()
    }

    /// Temporaries of the guarded files, whatever their locks.
    static func candidates(_ paths: Paths) -> [(path: String, lock: String)] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: paths.dataDirectory) else { return [] }
        var found: [(path: String, lock: String)] = []
        for (file, lock) in guarded(paths) {
            let base = PathText.lastComponent(of: file) + "."
            for name in names where name.hasPrefix(base) && isTemporarySuffix(name.dropFirst(base.count)) {
                found.append((paths.dataDirectory + "/" + name, lock))
            }
        }
        return found.sorted { $0.path < $1.path }
    }

    /// GLib's mkstemp template (six letters or digits) or the previous generation's link.
    static func isTemporarySuffix(_ suffix: Substring) -> Bool {
        if suffix == "prev.tmp" { return true }
        return suffix.utf8.count == 6 && suffix.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
        }
    }

    /// Whether nobody holds the lock at `path`, without creating it.
    static func lockIsFree(_ path: String) -> Bool {
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return errno == ENOENT }
        defer { close(fd) }
        return flock(fd, LOCK_EX | LOCK_NB) == 0  // released by close
    }
}
