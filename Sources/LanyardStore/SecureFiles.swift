import FoundationEssentials
import Glibc
import LanyardCore
import LanyardGLib
import LanyardSupport
import LanyardSystem

/// File-system rules for everything Lanyard writes: folders 0700, files 0600, no symlinks, nothing
/// owned by another user, and durable atomic replacement.
package enum SecureFiles {
    /// Creates `path` (and missing parents) and checks it is a real folder owned by this user,
    /// tightening its mode to 0700.
    package static func ensureDirectory(_ path: String) throws(StoreError) {
        var st = stat()
        if lstat(path, &st) != 0 {
            guard errno == ENOENT else { throw .systemCall("lstat", path: path) }
            let parent = PathText.parent(of: path)
            if !parent.isEmpty, parent != path, access(parent, F_OK) != 0 {
                // Parents follow the XDG convention (0700 is right for them too).
                do {
                    try FileManager.default.createDirectory(
                        atPath: parent,
                        withIntermediateDirectories: true,
                        attributes: [.posixPermissions: 0o700]
                    )
                } catch {
                    throw .io(path: parent, detail: "cannot create folder: \(error.userFacingDescription)")
                }
            }
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                throw .systemCall("mkdir", path: path, doing: "cannot create folder")
            }
            guard lstat(path, &st) == 0 else { throw .systemCall("lstat", path: path) }
        }
        try checkOwnership(path, st, expectDirectory: true)
        if st.st_mode & 0o077 != 0 { chmod(path, 0o700) }
    }

    /// Checks an existing path is a regular file owned by this user and not a symlink.
    /// - Returns: false when the file does not exist.
    @discardableResult
    package static func checkFile(_ path: String) throws(StoreError) -> Bool {
        var st = stat()
        if lstat(path, &st) != 0 {
            if errno == ENOENT { return false }
            throw .systemCall("lstat", path: path)
        }
        try checkOwnership(path, st, expectDirectory: false)
        return true
    }

    private static func checkOwnership(_ path: String, _ st: stat, expectDirectory: Bool) throws(StoreError) {
        let type = st.st_mode & S_IFMT
        if type == S_IFLNK { throw .unsafePath(path: path, reason: "it is a symbolic link") }
        if expectDirectory && type != S_IFDIR { throw .unsafePath(path: path, reason: "it is not a folder") }
        if !expectDirectory && type != S_IFREG { throw .unsafePath(path: path, reason: "it is not a regular file") }
        if st.st_uid != geteuid() {
            throw .unsafePath(path: path, reason: "it is owned by uid \(st.st_uid), not by you (uid \(geteuid()))")
        }
    }

    /// Reads a file after checking it; nil when it does not exist.
    /// - Parameter mapped: map the file instead of copying it, so only the pages a reader touches
    ///   are read (safe for files that are only ever replaced by rename, never rewritten in place).
    package static func read(_ path: String, mapped: Bool = false) throws(StoreError) -> Data? {
        guard try checkFile(path) else { return nil }
        do { return try Data(contentsOf: URL(fileURLWithPath: path), options: mapped ? .alwaysMapped : []) } catch {
            throw .io(path: path, detail: "cannot read: \(error.userFacingDescription)")
        }
    }

    /// Reads a file the user edits (config.ini), which may be a symbolic link into a dotfiles
    /// folder: a link is followed when the link itself is owned by this user and the file it leads
    /// to is a regular file owned by this user and writable by no one else (group or others).
    /// Anything else is read by ``read(_:mapped:)``'s rules. Nil when the file does not exist.
    package static func readUserFile(_ path: String) throws(StoreError) -> Data? {
        var link = stat()
        guard lstat(path, &link) == 0, (link.st_mode & S_IFMT) == S_IFLNK else { return try read(path) }
        guard link.st_uid == geteuid() else {
            throw .unsafePath(
                path: path,
                reason: "it is a symbolic link owned by uid \(link.st_uid), not by you (uid \(geteuid()))"
            )
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT {
                throw .unsafePath(path: path, reason: "it is a symbolic link to a file that does not exist")
            }
            throw .systemCall("open", path: path)
        }
        defer { close(fd) }
        var target = stat()
        guard fstat(fd, &target) == 0 else { throw .systemCall("fstat", path: path) }
        guard (target.st_mode & S_IFMT) == S_IFREG else {
            throw .unsafePath(path: path, reason: "it is a symbolic link to something that is not a regular file")
        }
        guard target.st_uid == geteuid() else {
            throw .unsafePath(
                path: path,
                reason: "it links to a file owned by uid \(target.st_uid), not by you (uid \(geteuid()))"
            )
        }
        guard target.st_mode & 0o022 == 0 else {
            throw .unsafePath(path: path, reason: "it links to a file that others can write (chmod go-w it)")
        }
        do { return Data(try readToEnd(fd)) } catch {
            throw .io(path: path, detail: "cannot read: \(error.reason)", cause: ErrorCause(error))
        }
    }

    /// Reads a file holding a secret the user put there (LANYARD_PASSPHRASE_FILE, `[fleet]
    /// password-file`), as ssh reads a private key: a symbolic link (systemd credentials, a
    /// secrets folder) is followed when it is yours, and the file must be a regular file (or a
    /// pipe: `LANYARD_PASSPHRASE_FILE=<(pass show lanyard)`) of yours that neither group nor others
    /// can read or write; anything else is refused (``StoreError/unsafePath(path:reason:)``) with
    /// the `chmod 600` that fixes it, before a byte is read. Nil when the file does not exist.
    package static func readSecretFile(_ path: String) throws(StoreError) -> Data? {
        let shown = TerminalText.escaped(path)
        var link = stat()
        guard lstat(path, &link) == 0 else {
            if errno == ENOENT { return nil }
            throw .systemCall("lstat", path: shown)
        }
        if (link.st_mode & S_IFMT) == S_IFLNK && link.st_uid != geteuid() {
            throw .unsafePath(
                path: shown,
                reason: "it is a symbolic link owned by uid \(link.st_uid), not by you (uid \(geteuid()))"
            )
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw .systemCall("open", path: shown, doing: "cannot read")
        }
        defer { close(fd) }
        var target = stat()
        guard fstat(fd, &target) == 0 else { throw .systemCall("fstat", path: shown) }
        let type = target.st_mode & S_IFMT
        guard type == S_IFREG || type == S_IFIFO else {
            throw .unsafePath(path: shown, reason: "it is not a regular file or a pipe")
        }
        // A pipe's writer may not have written yet: wait for it (opened non-blocking only so
        // that opening a named pipe without a writer does not hang before the checks).
        if type == S_IFIFO { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) }
        guard target.st_uid == geteuid() else {
            throw .unsafePath(path: shown, reason: "it is owned by uid \(target.st_uid), not by you (uid \(geteuid()))")
        }
        let mode = target.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw .unsafePath(
                path: shown,
                reason: "it holds a secret and its mode is 0\(String(mode, radix: 8)), so group or others can "
                    + "get at it; run `chmod 600 \(shown)`"
            )
        }
        do { return Data(try readToEnd(fd)) } catch {
            throw .io(path: shown, detail: "cannot read: \(error.reason)", cause: ErrorCause(error))
        }
    }

    /// Replaces `path` with `data` durably: temp file in the same folder, fsync, rename, fsync of
    /// the folder (GLib's `g_file_set_contents_full` with CONSISTENT|DURABLE, through LanyardGLib's
    /// `DurableFile`), mode 0600.
    /// - Parameter keepPrevious: hard-link the current generation to `path.prev` first, so one bad
    ///   write can always be undone by hand.
    package static func atomicWrite(_ data: Data, to path: String, keepPrevious: Bool = false) throws(StoreError) {
        let exists = try checkFile(path)
        if keepPrevious && exists { linkPrevious(path) }
        do { try DurableFile.replace(path, with: data, mode: 0o600) } catch {
            throw .io(
                path: path,
                detail: error.message(or: "write failed"),
                cause: error.glibError.map(ErrorCause.init)
            )
        }
    }

    /// Replaces `path` with the complete file `source` (already written durably beside it):
    /// rename, then fsync of the folder. A reader sees the old or the new file.
    /// - Parameter keepPrevious: hard-link the current generation to `path.prev` first.
    /// - Throws: when the rename fails (nothing changed then). Once renamed, a failing folder fsync
    ///   is not reported: the new file is in place, only its durability across a power cut is not
    ///   known, exactly as after a crash just before that fsync.
    package static func replace(_ path: String, withFile source: String, keepPrevious: Bool = false) throws(StoreError)
    {
        guard try checkFile(source) else {
            throw .io(path: source, detail: "cannot move into place: it does not exist")
        }
        let exists = try checkFile(path)
        if keepPrevious && exists { linkPrevious(path) }
        guard rename(source, path) == 0 else {
            let moved = PathText.lastComponent(of: source)
            throw .systemCall("rename", path: path, doing: "cannot move \(moved) into place")
        }
        syncDirectory(PathText.parent(of: path))
    }

    /// Creates `path`, which must not exist, with `data` in place (no temporary file; mode 0600),
    /// fsyncs it and its folder. For files whose existence and completeness are told apart by
    /// other means (a ``RegistryTransaction``'s `.incoming` files); a failure removes it again.
    package static func writeNew(_ data: Data, to path: String) throws(StoreError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .systemCall("open", path: path, doing: "cannot create") }
        let failure: StoreError? = data.withUnsafeBytes { raw -> StoreError? in
            var offset = 0
            while offset < raw.count, let base = raw.baseAddress {
                let n = write(fd, base + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return .systemCall("write", path: path, doing: "cannot write")
                }
                offset += n
            }
            while fsync(fd) != 0 {
                if errno != EINTR { return .systemCall("fsync", path: path, doing: "cannot fsync") }
            }
            return nil
        }
        close(fd)
        if let failure {
            unlink(path)
            throw failure
        }
        syncDirectory(PathText.parent(of: path))
    }

    /// Removes `path` (absent is fine) and makes the removal durable (fsync of its folder).
    package static func removeDurably(_ path: String) throws(StoreError) {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw .systemCall("unlink", path: path, doing: "cannot remove")
        }
        syncDirectory(PathText.parent(of: path))
    }

    /// fsync(2) of a folder, so the names created, renamed or removed in it survive a power cut.
    /// Best effort: a folder that cannot be opened or synced is left as it is.
    package static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        while fsync(fd) != 0 && errno == EINTR {}
        close(fd)
    }

    /// Hard-links `path` to `path.prev` (through `path.prev.tmp`), keeping the generation about to
    /// be replaced.
    private static func linkPrevious(_ path: String) {
        let prev = path + ".prev"
        let tmp = prev + ".tmp"
        unlink(tmp)
        if link(path, tmp) == 0 {
            // rename(2) does nothing when both names are links to one file (the previous write
            // failed after linking it), leaving tmp behind: it goes either way.
            _ = rename(tmp, prev)
            unlink(tmp)
        }
    }

    /// Moves a file that failed to parse aside, next to itself, and returns where it went.
    package static func moveAside(_ path: String, suffix: String) -> String {
        var target = path + "." + suffix
        var n = 1
        while access(target, F_OK) == 0 {
            n += 1
            target = path + "." + suffix + "-\(n)"
        }
        return rename(path, target) == 0 ? target : path
    }
}

/// An advisory lock (`flock`) on a lock file, held until released or the process dies — so a
/// `kill -9` never leaves a stale lock behind.
package final class FileLock: Sendable {
    private let fd: Int32

    /// Blocks until the exclusive lock on `path` is held. The file is created 0600.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    package init(path: String) throws(StoreError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .systemCall("open", path: path, doing: "cannot open lock file") }
        while flock(fd, LOCK_EX) != 0 {
            if errno == EINTR { continue }
            let failure = StoreError.systemCall("flock", path: path, doing: "cannot lock")
            close(fd)
            throw failure
        }
        self.fd = fd
    }

    /// Takes the lock only if nobody holds it; nil when it is taken.
    package static func tryLock(path: String) throws(StoreError) -> FileLock? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .systemCall("open", path: path, doing: "cannot open lock file") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            close(fd)
            return nil
        }
        return FileLock(fd: fd)
    }

    /// Takes over `fd`, a lock another process holds and handed down (flock locks belong to the
    /// open file description, which parent and child share): the lock is already held.
    package init(inheritedLockedFD fd: Int32) throws(StoreError) {
        // Same description: this returns at once when the lock really is ours, and fails on a
        // descriptor that is not open.
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            throw .systemCall("flock", path: "fd \(fd)", doing: "not a held lock")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        self.fd = fd
    }

    private init(fd: Int32) { self.fd = fd }

    /// The descriptor, to hand the held lock to a child process.
    package var descriptor: Int32 { fd }

    deinit { close(fd) }  // closing the last descriptor of the description releases the flock
}

extension FileLock {
    /// The slot's refresh lock (`$XDG_DATA_HOME/lanyard/locks/SLOT.lock`), waited for here. Every
    /// operation that reads a slot's credential and writes it back, or moves or deletes it, holds
    /// it: a refresh, rename, removal, sign-out or migration of the same slot never interleave.
    package static func slot(_ slot: Slot, paths: Paths) throws -> FileLock {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        try SecureFiles.ensureDirectory(paths.lockDirectory)
        return try FileLock(path: slotPath(slot, paths: paths))
    }

    /// Where the slot's lock file is.
    package static func slotPath(_ slot: Slot, paths: Paths) -> String {
        paths.lockDirectory + "/" + slot.name + ".lock"
    }

    /// The slot's sign-in lock (`locks/SLOT.signin.lock`), held for the whole of one sign-in so a
    /// second one into the same slot is refused instead of racing it; the holder's pid is written
    /// in the file. Throws `RegistryError.signInInProgress` naming that pid when it is taken.
    package static func signIn(_ slot: Slot, paths: Paths) throws -> FileLock {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        try SecureFiles.ensureDirectory(paths.lockDirectory)
        let path = paths.lockDirectory + "/" + slot.name + ".signin.lock"
        guard let lock = try FileLock.tryLock(path: path) else {
            let text = (try? SecureFiles.read(path)).flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) } ?? ""
            throw RegistryError.signInInProgress(slot, pid: Int32(text.trimmingWhitespaceAndNewlines()))
        }
        let pid = Array("\(getpid())\n".utf8)
        if ftruncate(lock.descriptor, 0) == 0 {
            _ = pid.withUnsafeBytes { pwrite(lock.descriptor, $0.baseAddress, $0.count, 0) }
        }
        return lock
    }
}
