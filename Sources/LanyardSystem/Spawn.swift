import Glibc

/// How to start one program: the only place posix_spawn is set up. Every child Lanyard starts (a
/// captured helper, the refresh worker, the agent's hook, `exec`'s command) is one of these.
package struct Spawn: Sendable {
    /// Where one of the child's standard streams comes from or goes to.
    package enum Stream: Sendable {
        /// The parent's own.
        case inherit
        /// /dev/null.
        case null
        /// This descriptor of the parent's (the child gets a copy; the parent keeps and closes it).
        case descriptor(Int32)
    }

    /// The program, an absolute path (``searchPath(_:_:)`` finds one by name).
    package var executable: String
    /// The whole argv, argv[0] first.
    package var argv: [String]
    /// nil passes the parent's environment on.
    package var environment: [String: String]?
    package var stdin: Stream = .null
    package var stdout: Stream = .inherit
    package var stderr: Stream = .inherit
    /// Parent descriptors the child gets at the given numbers; they may be close-on-exec here.
    package var handOff: [(parent: Int32, child: Int32)] = []
    /// Parent descriptors to close in the child (the other ends of its pipes).
    package var closeInChild: [Int32] = []
    /// A session of its own (setsid), out of reach of the terminal's Ctrl-C.
    package var newSession = false
    /// Whether the child gets the core-file limit the user gave Lanyard (see
    /// ``ProcessHardening/withInheritedCoreLimit(_:)``): for programs run for the user.
    package var userCoreLimit = false

    package init(_ executable: String, arguments: [String] = [], environment: [String: String]? = nil) {
        self.executable = executable
        argv = [executable] + arguments
        self.environment = environment
    }

    /// Starts the child with default handling of the signals Lanyard ignores or handles (INT,
    /// QUIT, TERM, HUP, PIPE) and an empty signal mask, whatever this process's own are.
    /// - Returns: its process id.
    package func start() throws(SystemCallError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (fd, stream, mode) in [(Int32(0), stdin, O_RDONLY), (1, stdout, O_WRONLY), (2, stderr, O_WRONLY)] {
            switch stream {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", mode, 0)
            case .descriptor(let parent): posix_spawn_file_actions_adddup2(&actions, parent, fd)
            }
        }
        for fd in closeInChild { posix_spawn_file_actions_addclose(&actions, fd) }
        // dup2 makes a descriptor without close-on-exec (for the same open file description, so a
        // lock stays the very lock); dup2 onto itself clears the flag in the child only.
        for (parent, child) in handOff { posix_spawn_file_actions_adddup2(&actions, parent, child) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE] { sigaddset(&defaults, sig) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        // POSIX_SPAWN_SETSID is glibc's 0x80 (not imported).
        let flags = Int32(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK) | (newSession ? 0x80 : 0)
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let cArgv = argv.map { strdup($0) } + [nil]
        let cEnvironment = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            for pointer in cArgv { free(pointer) }
            for pointer in cEnvironment ?? [] { free(pointer) }
        }
        var pid: pid_t = 0
        let spawn = {
            cEnvironment.map { posix_spawn(&pid, executable, &actions, &attributes, cArgv, $0) }
                ?? posix_spawn(&pid, executable, &actions, &attributes, cArgv, environ)
        }
        let failed = userCoreLimit ? ProcessHardening.withInheritedCoreLimit(spawn) : spawn()
        guard failed == 0 else { throw SystemCallError("posix_spawn", executable, errno: failed) }
        return pid
    }

    /// The first executable `name` in the colon-separated `path` (as a shell looks it up).
    package static func searchPath(_ name: String, _ path: String) -> String? {
        path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }
}

/// A pipe whose two ends are close-on-exec, so children spawned meanwhile do not inherit them
/// (``Spawn`` hands the child its end explicitly). pipe2 is not in the Glibc module.
package func closeOnExecPipe() throws(SystemCallError) -> (read: Int32, write: Int32) {
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { throw SystemCallError("pipe") }
    _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
    _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
    return (ends[0], ends[1])
}
