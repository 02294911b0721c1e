import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program with posix_spawn and collects what it prints: what `Process` and `Pipe` did, for
/// code that links FoundationEssentials only. Standard input is always /dev/null.
package enum Subprocess {
    /// Where a child's standard output or error goes.
    package enum Output: Sendable {
        /// The parent's own stream.
        case inherit
        /// /dev/null.
        case discard
        /// A pipe whose bytes end up in ``Result``.
        case capture
    }

    package struct Result: Sendable {
        /// The exit status, or 128 + the signal that ended the child.
        package var status: Int32
        package var stdout: [UInt8]
        package var stderr: [UInt8]
    }

    /// The program could not be started; the message names it and the system's reason.
    package struct LaunchError: LocalizedError {
        package let program: String
        package let code: Int32
        package var errorDescription: String? { "cannot run \(program): \(String(cString: strerror(code)))" }
    }

    /// Runs `executable` (an absolute path, not looked up in PATH) with `arguments` after argv[0],
    /// waits for it when `wait` is true and returns its status and captured output. `environment`
    /// nil passes the parent's environment on.
    @discardableResult
    package static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                           stdout: Output = .inherit, stderr: Output = .inherit, wait: Bool = true) throws(LaunchError) -> Result {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)

        // Read ends stay with the parent; write ends go to the child and are closed after the spawn.
        var pipes: [(fd: Int32, readEnd: Int32)] = []
        var writeEnds: [Int32] = []
        defer { for p in pipes { close(p.readEnd) } }
        for (fd, output) in [(Int32(1), stdout), (Int32(2), stderr)] {
            switch output {
            case .inherit: break
            case .discard: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0)
            case .capture:
                var ends: [Int32] = [-1, -1]
                // Close-on-exec so other children spawned meanwhile do not inherit them (pipe2 is not
                // in the Glibc module).
                guard pipe(&ends) == 0 else {
                    writeEnds.forEach { close($0) }
                    throw LaunchError(program: executable, code: errno)
                }
                _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
                _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
                posix_spawn_file_actions_adddup2(&actions, ends[1], fd)
                pipes.append((fd, ends[0]))
                writeEnds.append(ends[1])
            }
        }

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            argv.forEach { free($0) }
            envp?.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = envp.map { envp in posix_spawn(&pid, executable, &actions, nil, argv, envp) }
            ?? posix_spawn(&pid, executable, &actions, nil, argv, environ)
        writeEnds.forEach { close($0) }
        guard spawned == 0 else { throw LaunchError(program: executable, code: spawned) }

        var result = Result(status: 0, stdout: [], stderr: [])
        // Both pipes are drained together so a child that fills one while we wait on the other
        // cannot block.
        var open = pipes
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while !open.isEmpty {
            var polled = open.map { pollfd(fd: $0.readEnd, events: Int16(POLLIN), revents: 0) }
            if poll(&polled, nfds_t(polled.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            for (i, entry) in polled.enumerated().reversed() where entry.revents != 0 {
                let n = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    if open[i].fd == 1 { result.stdout += buffer[..<n] } else { result.stderr += buffer[..<n] }
                } else if n == 0 || errno != EINTR {
                    open.remove(at: i)
                }
            }
        }
        guard wait else { return result }
        result.status = exitCode(ofWaitStatus: (try? waitForExit(pid)) ?? 0)
        return result
    }
}
