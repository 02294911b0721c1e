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
        package var errorDescription: String? { "cannot run \(program): \(SystemCallError.reason(code))" }
    }

    /// Runs `executable` (an absolute path, not looked up in PATH) with `arguments` after argv[0],
    /// waits for it when `wait` is true and returns its status and captured output. `environment`
    /// nil passes the parent's environment on.
    @discardableResult
    package static func run(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        stdout: Output = .inherit,
        stderr: Output = .inherit,
        wait: Bool = true
    ) throws(LaunchError) -> Result {
        var spawn = Spawn(executable, arguments: arguments, environment: environment)
        // Read ends stay with the parent; write ends go to the child and are closed after the spawn.
        var pipes: [(fd: Int32, readEnd: Int32)] = []
        var writeEnds: [Int32] = []
        defer { for p in pipes { close(p.readEnd) } }
        for (fd, output) in [(Int32(1), stdout), (Int32(2), stderr)] {
            let stream: Spawn.Stream
            switch output {
            case .inherit: stream = .inherit
            case .discard: stream = .null
            case .capture:
                let ends: (read: Int32, write: Int32)
                do { ends = try closeOnExecPipe() } catch {
                    for writeEnd in writeEnds { close(writeEnd) }
                    throw LaunchError(program: executable, code: error.errno)
                }
                pipes.append((fd, ends.read))
                writeEnds.append(ends.write)
                stream = .descriptor(ends.write)
            }
            if fd == 1 { spawn.stdout = stream } else { spawn.stderr = stream }
        }
        let pid: pid_t
        do { pid = try spawn.start() } catch {
            for writeEnd in writeEnds { close(writeEnd) }
            throw LaunchError(program: executable, code: error.errno)
        }
        for writeEnd in writeEnds { close(writeEnd) }

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
