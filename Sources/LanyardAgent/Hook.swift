import Dispatch
import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport
import LanyardSystem

/// Runs the configured hook (`/bin/sh -c CMD`) with one event as a JSON line on stdin. The hook
/// runs in the background; ``waitForAll(timeout:)`` lets `--once` wait before exiting.
package final class EventHook: Sendable {
    package let command: String
    private let group = DispatchGroup()

    package init(command: String) { self.command = command }

    package func run(_ event: JSONValue) {
        let input = Array((event.serialized(pretty: false) + "\n").utf8)
        guard let pipe = try? closeOnExecPipe() else { return }
        var env = ProcessInfo.processInfo.environment
        env["LANYARD_EVENT"] = event["event"]?.string
        env["LANYARD_SLOT"] = event["slot"]?.string
        var spawn = Spawn("/bin/sh", arguments: ["-c", command], environment: env)
        spawn.stdin = .descriptor(pipe.read)
        spawn.stdout = .null
        let started = try? spawn.start()
        close(pipe.read)
        guard let pid = started else {
            close(pipe.write)
            return
        }
        let writeEnd = pipe.write
        let child = pid
        group.enter()
        BlockingExecutor.shared.submit { [group] in
            // A hook that does not read its input (EPIPE) is not an error of the agent's.
            try? writeAll(writeEnd, Array(input))
            close(writeEnd)
            _ = try? waitForExit(child)
            group.leave()
        }
    }

    /// Waits for running hooks, at most `timeout` seconds.
    package func waitForAll(timeout: TimeInterval) {
        _ = group.wait(timeout: .now() + timeout)
    }
}
