import Foundation
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardAuth
@testable import LanyardCore
@testable import LanyardStore

/// usage.json, the usage every Lanyard program shares: newer figures win to the millisecond,
/// the file stays bounded, and a damaged one is replaced by the next write.
@Suite struct UsageStateTests {
    func report(_ used: Double) -> UsageReport {
        UsageReport(
            plan: Plan(rawValue: "plus"),
            primary: UsageWindow(usedPercent: used, windowSeconds: 18000, resetsAt: nil)
        )
    }

    @Test func newerFiguresWinToTheMillisecond() throws {
        let paths = Paths(environment: TestHome().environment)
        let slot = try Slot("work")
        let first = Date(timeIntervalSince1970: 1_800_000_000.250)
        try UsageState.record(report(20), slot: slot, at: first, paths: paths)
        // Later in the same second: newer, so it replaces the first.
        try UsageState.record(report(30), slot: slot, at: first + 0.5, paths: paths)
        var entry = try #require(UsageState.load(paths).slots[slot])
        #expect(entry.report.primary?.usedPercent == 30)
        #expect(abs(entry.fetchedAt.timeIntervalSince1970 - 1_800_000_000.750) < 0.0005)
        // Earlier figures (a slow request answered last) do not replace newer ones.
        try UsageState.record(report(10), slot: slot, at: first + 0.25, paths: paths)
        entry = try #require(UsageState.load(paths).slots[slot])
        #expect(entry.report.primary?.usedPercent == 30)
        #expect(permissionBits(UsageState.path(paths)) == 0o600)
    }

    @Test func theFileKeepsTheNewestSlotsUpToItsCapacity() throws {
        let paths = Paths(environment: TestHome().environment)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        for n in 0..<(UsageState.capacity + 10) {
            try UsageState.record(
                report(Double(n % 100)),
                slot: try Slot("slot\(n)"),
                at: start + Double(n),
                paths: paths
            )
        }
        let kept = UsageState.load(paths).slots
        #expect(kept.count == UsageState.capacity)
        #expect((0..<10).allSatisfy { kept[try! Slot("slot\($0)")] == nil }, "the oldest went first")
        #expect(kept[try Slot("slot\(UsageState.capacity + 9)")] != nil)
    }

    @Test func aDamagedFileReadsEmptyAndIsReplaced() throws {
        let paths = Paths(environment: TestHome().environment)
        try SecureFiles.ensureDirectory(paths.stateDirectory)
        try Data("{\"version\": 1, \"slots\": {".utf8).write(to: URL(fileURLWithPath: UsageState.path(paths)))
        #expect(UsageState.load(paths).slots.isEmpty)
        try UsageState.record(report(42), slot: try Slot("work"), at: Date(), paths: paths)
        #expect(UsageState.load(paths).slots[try Slot("work")]?.report.primary?.usedPercent == 42)
    }
}
