import CProcessControl
import Glibc

/// Keeps a process that holds tokens out of core dumps and out of reach of other processes of the
/// same user (ptrace, /proc/PID/mem and environ): `PR_SET_DUMPABLE` 0 and a core-file limit of 0.
/// The `lanyard` commands apply it first thing; a program embedding LanyardKit decides for itself.
package enum ProcessHardening {
    /// The soft core-file limit the process was started with, for the programs it runs.
    nonisolated(unsafe) private static var inheritedCoreLimit: rlim_t?
    private static let coreResource = __rlimit_resource_t(RLIMIT_CORE.rawValue)

    /// Applies both; returns what could not be done (nil when all was).
    @discardableResult
    package static func apply() -> String? {
        var problems: [String] = []
        if lanyard_set_not_dumpable() != 0 { problems.append("PR_SET_DUMPABLE: " + SystemCallError.reason()) }
        var limit = rlimit()
        if getrlimit(coreResource, &limit) == 0 {
            inheritedCoreLimit = limit.rlim_cur
            limit.rlim_cur = 0
            if setrlimit(coreResource, &limit) != 0 { problems.append("RLIMIT_CORE: " + SystemCallError.reason()) }
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }

    /// Whether this process may be dumped or traced (for doctor and tests).
    package static var isDumpable: Bool { lanyard_dumpable() != 0 }

    /// This process's soft core-file limit in bytes (nil: unlimited).
    package static var coreLimit: UInt64? {
        var limit = rlimit()
        guard getrlimit(coreResource, &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return UInt64(limit.rlim_cur)
    }

    /// Runs `body`, which starts a program for the user (`lanyard exec`), with the core-file limit
    /// this process was given: the user's program gets the limit it would have had without
    /// Lanyard. (Dumpability needs no such care: execve makes the new program dumpable again.)
    package static func withInheritedCoreLimit<T>(_ body: () throws -> T) rethrows -> T {
        guard let inherited = inheritedCoreLimit, inherited != 0 else { return try body() }
        var limit = rlimit()
        getrlimit(coreResource, &limit)
        limit.rlim_cur = inherited
        setrlimit(coreResource, &limit)
        defer {
            limit.rlim_cur = 0
            setrlimit(coreResource, &limit)
        }
        return try body()
    }
}
