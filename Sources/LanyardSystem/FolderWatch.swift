import FoundationEssentials
import Glibc

/// Wakes on changes in one folder (a file written, created, removed or renamed in or out, so an
/// atomic replacement too), by inotify. Without inotify, waits simply time out.
package final class FolderWatch {
    package let fd: Int32

    /// Watches `directory`, which must exist.
    package init(directory: String) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if fd >= 0 {
            let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE)
            if inotify_add_watch(fd, directory, mask) < 0 {
                Glibc.close(fd)
                self.fd = -1
                return
            }
        }
        self.fd = fd
    }

    /// Empties the queue of events.
    package func drain() { Self.drain(fd) }

    /// Empties the queue of events of a watch's `fd` (for a thread that holds only the descriptor).
    package static func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while read(fd, &buffer, buffer.count) > 0 {}
    }

    /// Waits until the folder changes or `timeout` seconds pass; true on a change.
    package func wait(timeout: TimeInterval) -> Bool {
        guard fd >= 0 else {
            usleep(UInt32(min(timeout, 60) * 1_000_000))
            return false
        }
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        let n = poll(&fds, 1, Int32(max(1, timeout * 1000)))
        if n > 0 {
            drain()
            return true
        }
        return false
    }

    package func close() { if fd >= 0 { Glibc.close(fd) } }
}
