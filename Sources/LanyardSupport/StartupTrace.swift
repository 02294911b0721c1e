import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Phase timestamps of one process start, recorded only when `LANYARD_TRACE_STARTUP=1`.
///
/// Each ``mark(_:)`` names the phase that just ended; ``report()`` gives each phase's duration in
/// milliseconds (monotonic clock, from the previous mark), preceded by `pre-main`: the CPU time the
/// process had used when the first mark was taken (exec, dynamic loading and relocation, static
/// initialisers). When tracing is off a mark costs one check of a flag read once with `getenv`.
/// Phase names are static strings: nothing a user typed and never a secret.
package enum StartupTrace {
    /// Whether tracing is on for this process (`LANYARD_TRACE_STARTUP=1`), read once.
    package static let isEnabled: Bool = {
        guard let value = getenv("LANYARD_TRACE_STARTUP") else { return false }
        return value[0] == 0x31 && value[1] == 0  // exactly "1"
    }()

    private static let marks = Mutex<[(StaticString, UInt64)]>([])
    private static let preMainCPU = Mutex<UInt64?>(nil)

    /// Records the end of `phase`; does nothing unless tracing is on.
    @inline(__always)
    package static func mark(_ phase: StaticString) {
        guard isEnabled else { return }
        record(phase)
    }

    /// Starts the trace (call first thing in `main`); does nothing unless tracing is on.
    package static func start() {
        guard isEnabled else { return }
        preMainCPU.withLock { $0 = $0 ?? now(CLOCK_PROCESS_CPUTIME_ID) }
        record("start")
    }

    private static func record(_ phase: StaticString) {
        let time = now(CLOCK_MONOTONIC)
        marks.withLock { $0.append((phase, time)) }
    }

    private static func now(_ clock: clockid_t) -> UInt64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// One line, `startup: pre-main=0.912 parse=0.010 … total=3.456` (milliseconds; `total` is
    /// pre-main plus every phase), or nil when tracing is off or nothing was marked.
    package static func report() -> String? {
        guard isEnabled else { return nil }
        let recorded = marks.withLock { $0 }
        guard let first = recorded.first else { return nil }
        let cpu = preMainCPU.withLock { $0 } ?? 0
        func ms(_ ns: UInt64) -> String {
            let hundredths = (ns + 5_000) / 10_000
            let fraction = hundredths % 100
            return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
        }
        var parts = ["pre-main=\(ms(cpu))"]
        var previous = first.1
        for (phase, time) in recorded.dropFirst() {
            parts.append("\(phase)=\(ms(time &- previous))")
            previous = time
        }
        parts.append("total=\(ms(cpu + (previous &- first.1)))")
        return "startup: " + parts.joined(separator: " ")
    }
}

/// How many times this process went to the blocking executor and read the registry and a
/// credential store: the cost of one operation's structure, reported beside the start-up phases
/// (`LANYARD_TRACE_STARTUP=1`) so that a test or a person can count them across the processes
/// of one command (a `token` and its refresh worker). Counting is one relaxed atomic add, always on.
package enum OperationCounts {
    private static let hops = Atomic<Int>(0)
    private static let registryReads = Atomic<Int>(0)
    private static let storeReads = Atomic<Int>(0)

    /// Work handed to the blocking executor (one hop off the cooperative pool and back).
    @inline(__always) package static func hop() { hops.add(1, ordering: .relaxed) }
    /// The registry file read (whole or one record of it).
    @inline(__always) package static func registryRead() { registryReads.add(1, ordering: .relaxed) }
    /// A credential read from a store (a file decrypted, a keyring item fetched).
    @inline(__always) package static func storeRead() { storeReads.add(1, ordering: .relaxed) }

    /// `counts: hops=3 registry_reads=1 store_reads=1`.
    package static func report() -> String {
        "counts: hops=\(hops.load(ordering: .relaxed)) registry_reads=\(registryReads.load(ordering: .relaxed)) "
            + "store_reads=\(storeReads.load(ordering: .relaxed))"
    }
}
