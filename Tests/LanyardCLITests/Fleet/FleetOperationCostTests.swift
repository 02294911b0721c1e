import Foundation
import LanyardTestSupport
import Testing

/// The structure of one due `token` on a shared slot, counted by the binaries themselves
/// (`LANYARD_TRACE_STARTUP=1` prints each process's executor hops and registry and store reads):
/// the command and its refresh worker together. Bounds, not timings: a hop or a read added to the
/// path by accident fails here, whatever the machine's speed.
@Suite(.serialized) struct FleetOperationCostTests {
    /// The counts of every process of one run, summed: `hops`, `registry_reads`, `store_reads`.
    static func counts(_ stderr: String) -> (processes: Int, hops: Int, registry: Int, store: Int) {
        var total = (processes: 0, hops: 0, registry: 0, store: 0)
        for line in stderr.split(separator: "\n") where line.hasPrefix("counts: ") {
            var fields: [String: Int] = [:]
            for pair in line.dropFirst("counts: ".count).split(separator: " ") {
                let parts = pair.split(separator: "=")
                if parts.count == 2, let n = Int(parts[1]) { fields[String(parts[0])] = n }
            }
            total.processes += 1
            total.hops += fields["hops"] ?? 0
            total.registry += fields["registry_reads"] ?? 0
            total.store += fields["store_reads"] ?? 0
        }
        return total
    }

    @Test func aDueSharedTokenHopsAndReadsAFixedNumberOfTimes() async throws {
        let h = try await FleetHarness(machines: 2, refresh: FleetAttackTests.due, lifetime: 100)
        let m2 = h.machines[1]
        let run = try m2.home.run(["token", "work"], extraEnvironment: ["LANYARD_TRACE_STARTUP": "1"])
        #expect(run.status == 0, "\(run.stderr)")
        let counts = Self.counts(run.stderr)
        for line in run.stderr.split(separator: "\n") where line.hasPrefix("counts: ") { print("  \(line)") }
        print(
            "one due shared token: \(counts.processes) processes, \(counts.hops) executor hops, "
                + "\(counts.registry) registry reads, \(counts.store) store reads"
        )
        #expect(counts.processes == 2, "the command and its refresh worker each report: \(run.stderr)")
        // The command: one hop (its whole refresh), the registry read to resolve the slot and once
        // for its record, the store once before the lock, once under it and once for the worker's
        // result. The worker: one hop for its refresh, one for the provider's transfer and one for
        // the fleet lock's lease keep-alive; the registry once under the lock and once to record
        // the new tokens; the store once under the lock and once for this machine's fleet key.
        // (Before the refresh was one synchronous core: 17 hops, 5 registry and 7 store reads.)
        #expect(counts.hops <= 4, "\(run.stderr)")
        #expect(counts.registry <= 4, "\(run.stderr)")
        #expect(counts.store <= 5, "\(run.stderr)")
        try await h.expectNoReuse()
    }
}
