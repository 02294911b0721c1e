import Foundation
import LanyardFleet
import LanyardSupport
import LanyardTestSupport
import Testing

/// `MemoryEtcd`'s watch, which the fast tests of the follower and the lock rely on, against what
/// the gateway client does on a real etcd (EtcdGatewayClientTests): every change under the
/// prefix from the start revision on, in order, on the watching thread; returns when cancelled
/// or when `onEvents` says so; throws for a compacted start revision and for a broken stream.
@Suite struct MemoryEtcdWatchTests {
    /// Watches `prefix` from `start` on a thread of its own, started at once, until `enough` events
    /// came, the watch ends, or its handle is cancelled; the events seen.
    static func watch(
        _ kv: MemoryEtcd,
        _ prefix: String,
        from start: Int64,
        handle: (any EtcdWatchHandle)? = nil,
        until enough: Int = .max
    ) -> WorkOnItsOwnThread<[EtcdWatchEvent]> {
        WorkOnItsOwnThread {
            var seen: [EtcdWatchEvent] = []
            try kv.watch(prefix: prefix, startRevision: start, handle: handle) { events, _ in
                seen += events
                return seen.count < enough
            }
            return seen
        }
    }

    /// ``watch(_:_:from:handle:until:)``, awaited to its end.
    static func collect(
        _ kv: MemoryEtcd,
        _ prefix: String,
        from start: Int64,
        handle: (any EtcdWatchHandle)? = nil,
        until enough: Int = .max
    ) async throws -> [EtcdWatchEvent] {
        try await watch(kv, prefix, from: start, handle: handle, until: enough).value
    }

    @Test func anOlderStartRevisionReplaysEveryChangeUnderThePrefixInOrder() async throws {
        let kv = MemoryEtcd()
        let first = try kv.putInTest("a/1", value: [1])
        try kv.putInTest("b/1", value: [2])
        try kv.putInTest("a/2", value: [3])
        try kv.putInTest("a/1", value: [4])
        try kv.deleteInTest("a/2")
        let events = try await Self.collect(kv, "a/", from: first, until: 4)
        #expect(events.map(\.kind) == [.put, .put, .put, .delete])
        #expect(events.map(\.kv.key) == ["a/1", "a/2", "a/1", "a/2"])
        #expect(events.map(\.kv.modRevision) == [first, first + 2, first + 3, first + 4])
        #expect(events[2].previous?.value == [1] && events[2].kv.version == 2)
        #expect(events[3].kv.value.isEmpty && events[3].previous?.value == [3])
    }

    @Test func aChangeMadeWhileItWaitsArrives() async throws {
        let kv = MemoryEtcd()
        let start = try kv.rangeInTest("k/").revision + 1
        let watching = Self.watch(kv, "k/", from: start, until: 1)
        #expect(await kv.watching(1))
        try kv.putInTest("k/x", value: [1])
        #expect(try await watching.value.map(\.kv.key) == ["k/x"])
        #expect(kv.activeWatches == 0)
    }

    @Test func cancellingEndsAWaitingWatch() async throws {
        let kv = MemoryEtcd()
        let handle = kv.makeWatchHandle()
        let watching = Self.watch(kv, "k/", from: 0, handle: handle)
        #expect(await kv.watching(1))
        handle.cancel()
        #expect(try await watching.value.isEmpty)
        #expect(kv.activeWatches == 0)
    }

    @Test func aCompactedStartRevisionThrows() async throws {
        let kv = MemoryEtcd()
        let old = try kv.putInTest("k/x", value: [1])
        let later = try kv.putInTest("k/x", value: [2])
        kv.compact(revision: later)
        await #expect(throws: EtcdError.compacted(revision: later)) {
            _ = try await Self.collect(kv, "k/", from: old)
        }
        #expect(try await Self.collect(kv, "k/", from: later, until: 1).map(\.kv.value) == [[2]])
    }

    @Test func aFailedStreamThrowsUntilTheFaultIsCleared() async throws {
        let kv = MemoryEtcd()
        let watching = Self.watch(kv, "k/", from: 0)
        #expect(await kv.watching(1))
        kv.failWatches()
        await #expect(throws: EtcdError.self) { _ = try await watching.value }
        await #expect(throws: EtcdError.self) { _ = try await Self.collect(kv, "k/", from: 0) }
        kv.clearFaults()
        let start = try kv.putInTest("k/x", value: [1])
        #expect(try await Self.collect(kv, "k/", from: start, until: 1).map(\.kv.key) == ["k/x"])
    }
}
