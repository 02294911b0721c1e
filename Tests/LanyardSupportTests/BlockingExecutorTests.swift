import Foundation
import LanyardSupport
import Testing

/// The blocking executor: blocking work runs on threads of its own, never on the cooperative
/// pool, and work that waits on other work still finishes (the pool grows while work waits).
@Suite struct BlockingExecutorTests {
    /// Work on a thread of its own runs while every pooled thread is taken by work waiting for it
    /// (a sign-in's command waiting for the callback its listener would accept).
    /// Threads started from a libdispatch thread (which blocks nearly every signal) block none,
    /// pooled or of their own: a child they start can be ended with SIGTERM.
    @Test func itsThreadsBlockNoSignal() async {
        let executor = BlockingExecutor(maximumThreads: 2, idleSeconds: 1)
        func termBlocked(ownThread: Bool) async -> (dispatch: Bool, executor: Bool) {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    var mask = sigset_t()
                    pthread_sigmask(SIG_SETMASK, nil, &mask)
                    let dispatchBlocks = sigismember(&mask, SIGTERM) == 1
                    let probe: @Sendable () -> Void = {
                        var mine = sigset_t()
                        pthread_sigmask(SIG_SETMASK, nil, &mine)
                        continuation.resume(returning: (dispatchBlocks, sigismember(&mine, SIGTERM) == 1))
                    }
                    if ownThread { executor.submitOnOwnThread(probe) } else { executor.submit(probe) }
                }
            }
        }
        for ownThread in [false, true] {
            let blocked = await termBlocked(ownThread: ownThread)
            #expect(
                blocked.executor == false,
                "own thread: \(ownThread); libdispatch's blocks SIGTERM: \(blocked.dispatch)"
            )
        }
    }

    @Test func workOnItsOwnThreadRunsWhenThePoolIsFull() async {
        let executor = BlockingExecutor(maximumThreads: 1, idleSeconds: 1)
        let released = DispatchSemaphore(value: 0)
        async let waiter: Void = executor.run { released.wait() }
        let answer = await executor.run(.ownThread) { () -> Int in
            released.signal()
            return 42
        }
        await waiter
        #expect(answer == 42)
    }

    /// Sixteen pieces of work that each wait until all sixteen have started: they finish only if
    /// each got a thread of its own, which no two-thread cooperative pool could give.
    @Test func workThatWaitsOnOtherWorkFinishes() async throws {
        let executor = BlockingExecutor(maximumThreads: 32, idleSeconds: 1)
        let count = 16
        let started = Locked(0)
        let allStarted = DispatchSemaphore(value: 0)
        try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<count {
                group.addTask {
                    await executor.run {
                        if started.withLock({
                            $0 += 1
                            return $0
                        }) == count {
                            for _ in 0..<count { allStarted.signal() }
                        }
                        allStarted.wait()
                        return i
                    }
                }
            }
            var seen = Set<Int>()
            for try await i in group { seen.insert(i) }
            #expect(seen == Set(0..<count))
        }
        #expect(executor.threadCount <= 32)
    }

    @Test func errorsAndResultsComeBack() async throws {
        struct Failure: Error, Equatable {}
        let executor = BlockingExecutor(maximumThreads: 2, idleSeconds: 1)
        #expect(await executor.run { 41 + 1 } == 42)
        await #expect(throws: Failure()) { try await executor.run { () throws -> Int in throw Failure() } }
        // Past the bound, work queues and still runs, in order of submission.
        let order = Locked<[Int]>([])
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<20 { group.addTask { await executor.run { order.withLock { $0.append(i) } } } }
        }
        #expect(order.withLock { $0 }.sorted() == Array(0..<20))
    }

    /// Work still queued when its task is cancelled never runs, and the task gets
    /// `CancellationError` at once; work a thread has taken runs to its end.
    @Test func queuedWorkOfACancelledTaskIsDropped() async throws {
        let executor = BlockingExecutor(maximumThreads: 1, idleSeconds: 1)
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let ran = Locked(false)
        let holder = Task {
            try await executor.run { () throws -> Int in
                started.signal()
                release.wait()
                return 1
            }
        }
        await executor.run(.ownThread) { started.wait() }  // the one pooled thread is busy now
        // A throwing body: the run that can end with CancellationError.
        let queued = Task {
            try await executor.run { () throws -> Int in
                ran.withLock { $0 = true }
                return 2
            }
        }
        queued.cancel()
        await #expect(throws: CancellationError.self) { try await queued.value }
        release.signal()
        #expect(try await holder.value == 1)  // taken before the cancellation: it finished
        // The queue moves on past the dropped work.
        #expect(await executor.run { 3 } == 3)
        #expect(ran.withLock { $0 } == false)
    }

    /// Work that has run is let go at once: the queue keeps neither it nor what it captured (a
    /// test harness whose deinit ends the processes it started stayed alive after its test).
    @Test func finishedWorkIsLetGo() async {
        final class Captured: Sendable {}
        let executor = BlockingExecutor(maximumThreads: 1, idleSeconds: 1)
        weak var captured: Captured?
        do {
            let object = Captured()
            captured = object
            await executor.run { _ = object }
        }
        // One thread: it takes the next work only once it has let go of the last.
        await executor.run {}
        #expect(captured == nil)
    }
}
