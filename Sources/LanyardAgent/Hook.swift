import FoundationEssentials
import Dispatch
import Glibc
import LanyardCore
import LanyardSystem

/// Runs the configured hook (`/bin/sh -c CMD`) with one event as a JSON line on stdin. The hook
/// runs in the background; ``waitForAll(timeout:)`` lets `--once` wait before exiting.
package final class EventHook: Sendable {
    package let command: String
    private let group = DispatchGroup()

    package init(command: String) { self.command = command }

    package func run(_ event: JSONValue) {
        let input = Array((event.serialized(pretty: false) + "\n").utf8)
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { return }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipe[0], 0)
        posix_spawn_file_actions_addclose(&actions, pipe[1])
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let args = ["/bin/sh", "-c", command]
        var env = ProcessInfo.processInfo.environment
        env["LANYARD_EVENT"] = event["event"]?.string
        env["LANYARD_SLOT"] = event["slot"]?.string
        var pid: pid_t = 0
        let cArgs = args.map { strdup($0) } + [nil]
        let cEnv = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { cArgs.forEach { free($0) }; cEnv.forEach { free($0) } }
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, nil, cArgs, cEnv)
        close(pipe[0])
        guard spawned == 0 else { close(pipe[1]); return }
        let writeEnd = pipe[1]
        let child = pid
        group.enter()
        DispatchQueue.global().async { [group] in
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
