import Glibc
import LanyardStore
import LanyardSupport
import LanyardSystem

/// One `lanyard tray` per user session: a write lock on `$XDG_RUNTIME_DIR/lanyard/tray.lock`
/// (`$XDG_DATA_HOME/lanyard/run/tray.lock` without XDG_RUNTIME_DIR), held for the tray's
/// lifetime. lanyard-tray.service and the XDG autostart entry may both be enabled, or the user may
/// start the tray twice: the second finds the lock taken and ends before it shows an icon.
///
/// A lock file rather than a well-known D-Bus name: it is taken before the bus is touched (the
/// tray may wait minutes for a tray host), needs no second bus connection, and the kernel drops it
/// whatever way the tray ends, `kill -9` included. XDG_RUNTIME_DIR belongs to the user's login and
/// goes with it, as a session's tray does.
///
/// A POSIX record lock (`fcntl` F_SETLK) rather than `flock`: F_GETLK names the process that holds
/// it, so "already running (pid N)" needs no pid written into the file (and no window between
/// locking and writing it in which a second tray would read nothing). Its pitfall, that closing
/// any descriptor of the file releases it, does not apply: nothing else in the process opens this
/// file. It is not inherited across fork, so a terminal the tray started does not keep it.
package final class TrayInstanceLock: Sendable {
    private let fd: Int32

    /// The lock file.
    package static func path(_ paths: Paths) -> String { paths.runtimeDirectory + "/tray.lock" }

    /// What ``acquire(paths:)`` found.
    package enum Outcome: Sendable {
        /// This process holds it now, until the returned lock is released.
        case acquired(TrayInstanceLock)
        /// Another tray holds it; its pid when the kernel can tell (0 in another pid namespace).
        case held(by: pid_t)
    }

    private init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    /// Takes the lock, or says which process holds it. The folder is created 0700 when missing.
    package static func acquire(paths: Paths) throws -> Outcome {
        try SecureFiles.ensureDirectory(paths.runtimeDirectory)
        let path = path(paths)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw StoreError.io(path: path, detail: "cannot open lock file: \(SystemCallError.reason())")
        }
        var whole = flock()
        whole.l_type = Int16(F_WRLCK)
        whole.l_whence = Int16(SEEK_SET)
        // The holder may end between a refused F_SETLK and F_GETLK: then try again.
        while true {
            var request = whole
            if fcntl(fd, F_SETLK, &request) == 0 { return .acquired(TrayInstanceLock(fd: fd)) }
            guard errno == EAGAIN || errno == EACCES || errno == EINTR else {
                let reason = SystemCallError.reason()
                close(fd)
                throw StoreError.io(path: path, detail: "cannot lock: \(reason)")
            }
            var probe = whole
            guard fcntl(fd, F_GETLK, &probe) == 0 else {
                let reason = SystemCallError.reason()
                close(fd)
                throw StoreError.io(path: path, detail: "cannot ask who holds the lock: \(reason)")
            }
            if probe.l_type != Int16(F_UNLCK) {
                close(fd)
                return .held(by: probe.l_pid)
            }
        }
    }
}
