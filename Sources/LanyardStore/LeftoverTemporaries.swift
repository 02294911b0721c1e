import FoundationEssentials
import Glibc
import LanyardSupport

/// What an interrupted durable write leaves next to the file it was replacing: GLib's temporary
/// (`FILE.` and six letters or digits, from `g_file_set_contents_full`), or the hard link made to
/// keep the previous generation (`FILE.prev.tmp`). Every write of these files holds the file's
/// lock from before the temporary is made until after it is renamed into place, so a temporary
/// found while that lock is free belongs to a write that was killed: nothing will ever rename it.
package enum LeftoverTemporaries {
    /// The files of the data folder that are replaced durably, each with the lock its writers hold.
    static func guarded(_ paths: Paths) -> [(file: String, lock: String)] {
        let fileStore = EncryptedFileStore(paths: paths)
        let storeLock = fileStore.storePath + ".lock"
        return [
            (paths.registryFile, paths.registryFile + ".lock"), (fileStore.storePath, storeLock),
            (fileStore.plainIdentityPath, storeLock), (fileStore.protectedIdentityPath, storeLock),
            (fileStore.sealedIdentityPath, storeLock),
        ]
    }

    /// The leftovers in the data folder now, by path: temporaries of the guarded files whose lock
    /// nobody holds. Reads only (a lock file that does not exist is free: writers create it).
    package static func find(_ paths: Paths) -> [String] {
        var found: [String] = []
        for (lockPath, group) in Dictionary(grouping: candidates(paths), by: \.lock) {
            // Checked again while holding the lock: a write that was running when the folder was
            // listed has renamed its temporary by the time its lock is free.
            withLockIfFree(lockPath) { found += group.map(\.path).filter { access($0, F_OK) == 0 } }
        }
        return found.sorted()
    }

    /// Removes the leftovers, each while holding its file's lock (so a write that starts meanwhile
    /// waits); a temporary whose lock is held is a write in progress and stays. Returns the paths
    /// removed.
    package static func remove(_ paths: Paths) -> [String] {
        var removed: [String] = []
        for (lockPath, group) in Dictionary(grouping: candidates(paths), by: \.lock) {
            guard let held = (try? FileLock.tryLock(path: lockPath)) ?? nil else { continue }
            for candidate in group.sorted(by: { $0.path < $1.path }) where unlink(candidate.path) == 0 {
                removed.append(candidate.path)
            }
            withExtendedLifetime(held) {}  // released only once this file's leftovers are gone
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
        return suffix.utf8.count == 6
            && suffix.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            }
    }

    /// Runs `body` holding the lock at `path` when nobody else holds it, without creating the
    /// lock file (when there is none, no write is running: writers create it before a temporary).
    static func withLockIfFree(_ path: String, _ body: () -> Void) {
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { body() }
            return
        }
        defer { close(fd) }  // releases the lock
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { body() }
    }
}
