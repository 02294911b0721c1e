import Glibc

/// A system call that failed: which call, on what, and its errno, described once
/// (`open /path: Permission denied`) instead of `strerror` text composed at each call site.
package struct SystemCallError: Error, Equatable, Sendable, CustomStringConvertible {
    package let call: String
    package let target: String?
    package let errno: Int32

    package init(_ call: String, _ target: String? = nil, errno: Int32 = Glibc.errno) {
        self.call = call
        self.target = target
        self.errno = errno
    }

    /// The C library's text for the errno (`No such file or directory`).
    package var reason: String { Self.reason(errno) }

    package var description: String { "\(call)\(target.map { " \($0)" } ?? ""): \(reason)" }

    /// The C library's text for `code` (by default the errno just set), for messages that say
    /// the call in their own words.
    package static func reason(_ code: Int32 = Glibc.errno) -> String { String(cString: strerror(code)) }
}

/// Runs `call` again while it fails with EINTR (a signal arrived), for the calls that return -1
/// and set errno; returns the first other result.
@inline(__always)
package func retryingOnInterrupt<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let result = call()
        if result >= 0 || errno != EINTR { return result }
    }
}

/// Writes all of `bytes` to `fd`, across short writes and interruptions.
package func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemCallError) {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { raw in
            retryingOnInterrupt { Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset) }
        }
        if n < 0 { throw SystemCallError("write") }
        offset += n
    }
}

/// Waits for `pid` to end, across interruptions; its raw wait status.
package func waitForExit(_ pid: pid_t) throws(SystemCallError) -> Int32 {
    var status: Int32 = 0
    if retryingOnInterrupt({ waitpid(pid, &status, 0) }) < 0 { throw SystemCallError("waitpid") }
    return status
}

/// A shell's view of a raw wait status: the exit code, or 128 + the signal that ended the process
/// (Swift does not import WIFEXITED, WEXITSTATUS and WTERMSIG).
package func exitCode(ofWaitStatus status: Int32) -> Int32 {
    (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}

/// Reads `fd` to its end, across interruptions.
package func readToEnd(_ fd: Int32) throws(SystemCallError) -> [UInt8] {
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 16_384)
    while true {
        let n = retryingOnInterrupt { read(fd, &buffer, buffer.count) }
        if n == 0 { return output }
        if n < 0 { throw SystemCallError("read") }
        output.append(contentsOf: buffer[0..<n])
    }
}
