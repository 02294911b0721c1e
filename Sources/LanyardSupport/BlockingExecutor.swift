#if canImport(Glibc)
import Glibc
#endif

/// The one place where blocking work runs: libsecret's D-Bus calls, libcurl (etcd, the fleet),
/// `flock`, file I/O that can stall, waiting for a child process. Swift's cooperative thread pool
/// has one thread per core (two on the machines Lanyard is tested on), and a task that blocks one
/// of them stalls every other task; so async code never calls a blocking function itself: it
/// hands the call to this executor through ``run(_:_:)-(_,()throws->T)`` and suspends until it is done.
///
/// Threads of its own (like swift-nio's `NIOThreadPool`): started on demand, up to
/// ``maximumThreads``, and ended after ``idleSeconds`` without work. The bound is generous on
/// purpose: blocking work can wait on other blocking work (a `flock` held by a refresh that still
/// has etcd calls to make), so the pool must not run out of threads while that holder needs one.
/// Work beyond the bound queues in order. Work queued in ``Mode/cancellable`` whose task is
/// cancelled before a thread takes it is dropped, and the task gets `CancellationError`; work a
/// thread has taken always runs to its end (it may hold a lock or a token the server just issued).
///
/// Its mutex and condition are allocated once and never move (Swift does not promise a stored
/// property a stable address, which `pthread_cond_wait` needs), as swift-nio's `NIOLock` does.
package final class BlockingExecutor: @unchecked Sendable {
    /// The process's executor.
    package static let shared = BlockingExecutor()

    package let maximumThreads: Int
    package let idleSeconds: Int

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    /// Work waiting for a thread from `head` on; a slot is emptied when its work is taken, so
    /// finished work (and whatever it captured) is not kept until the queue is next compacted.
    private var queue: [Job?] = []
    private var head = 0
    private var threads = 0
    private var idle = 0

    package init(maximumThreads: Int = 64, idleSeconds: Int = 10) {
        self.maximumThreads = maximumThreads
        self.idleSeconds = idleSeconds
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        // Only a test's own executor ends (the shared one lives as long as the process), and only
        // once its threads have (each holds a reference while it runs).
        pthread_cond_destroy(condition)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// One piece of queued work. `state` is read and written under the executor's mutex.
    private final class Job: @unchecked Sendable {
        enum State { case new, queued, running, cancelled }
        var state = State.new
        let work: @Sendable () -> Void
        /// Resumes the waiting task with `CancellationError` (nil: the work cannot be cancelled).
        let cancelled: (@Sendable () -> Void)?
        init(_ work: @escaping @Sendable () -> Void, cancelled: (@Sendable () -> Void)? = nil) {
            self.work = work
            self.cancelled = cancelled
        }
    }

    /// Where a piece of work runs, and what its task's cancellation does to it: the one choice a
    /// caller of ``run(_:_:)-(_,()throws->T)`` makes.
    package enum Mode: Sendable {
        /// On a pooled thread. When the task is cancelled while the work still waits in the queue,
        /// it never runs and `run` throws `CancellationError`; once a thread has taken it, it runs
        /// to its end.
        case cancellable
        /// On a pooled thread, even when its task is cancelled while it waits in the queue: an
        /// account operation's blocking section, which may keep what a server just issued (a
        /// rotated refresh token, a new sign-in) that dropping the work would lose.
        case toCompletion
        /// On a thread of its own, outside the bound, for work that blocks for as long as something
        /// outside this process decides: a listener waiting for a browser, the wait for a child to
        /// end, a whole command. Queued behind the bound, such work could wait for threads that
        /// wait for it (the callback a sign-in's own command waits for), and holding pooled threads
        /// it would shrink the pool for everything else. It starts at once, so it is never dropped.
        case ownThread
    }

    /// Runs `body` on a thread of the executor, as `mode` says, and returns its result; the calling
    /// task suspends meanwhile (its cooperative thread is free for other tasks). `body` must not
    /// await: it is the blocking part.
    package func run<T: Sendable>(
        _ mode: Mode = .cancellable,
        _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        guard mode == .cancellable else {
            return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                start(mode) {
                    do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
                }
            }
        }
        let job = Locked<Job?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                let made = Job(
                    {
                        do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
                    },
                    cancelled: { continuation.resume(throwing: CancellationError()) }
                )
                job.withLock { $0 = made }
                // Cancelled before the handler could see the job: drop it here (enqueue resumes).
                if Task.isCancelled { cancel(made) }
                enqueue(made)
            }
        } onCancel: {
            if let queued = job.withLock({ $0 }) { cancel(queued) }
        }
    }

    /// ``run(_:_:)-(_,()throws->T)`` for work that cannot fail. Having no error to end with, it
    /// always runs: ``Mode/cancellable`` is ``Mode/toCompletion`` here.
    package func run<T: Sendable>(_ mode: Mode = .cancellable, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            start(mode) { continuation.resume(returning: body()) }
        }
    }

    /// Starts `work` where `mode` says, never to be dropped.
    private func start(_ mode: Mode, _ work: @escaping @Sendable () -> Void) {
        if mode == .ownThread { submitOnOwnThread(work) } else { submit(work) }
    }

    /// ``submit(_:)`` on a thread of its own, outside the bound (see ``Mode/ownThread``; when
    /// no thread can be started, the work goes to the pool).
    package func submitOnOwnThread(_ work: @escaping @Sendable () -> Void) {
        OperationCounts.hop()
        if !DetachedThread.start(work) { submit(work) }
    }

    /// Queues `work`, starting a thread when more work waits than threads are idle (an idle
    /// thread woken for earlier work is not free for this one) and the bound allows.
    package func submit(_ work: @escaping @Sendable () -> Void) { enqueue(Job(work)) }

    private func enqueue(_ job: Job) {
        OperationCounts.hop()
        pthread_mutex_lock(mutex)
        if job.state == .cancelled {
            // Its task was cancelled before the work reached the queue.
            pthread_mutex_unlock(mutex)
            job.cancelled?()
            return
        }
        job.state = .queued
        queue.append(job)
        let start = queue.count - head > idle && threads < maximumThreads
        if start { threads += 1 }
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
        if start { startThread() }
    }

    /// Drops `job` if no thread has taken it yet (its task was cancelled).
    private func cancel(_ job: Job) {
        guard job.cancelled != nil else { return }
        pthread_mutex_lock(mutex)
        let state = job.state
        if state == .new || state == .queued { job.state = .cancelled }
        pthread_mutex_unlock(mutex)
        // A new job is resumed by enqueue, which finds it cancelled; a queued one here.
        if state == .queued { job.cancelled?() }
    }

    /// Threads running now (for tests and diagnostics).
    package var threadCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return threads
    }

    private func startThread() {
        if !DetachedThread.start({ [self] in work() }) {
            // No thread (the process is out of them): run the work here rather than lose it.
            pthread_mutex_lock(mutex)
            threads -= 1
            pthread_mutex_unlock(mutex)
            while let next = take(wait: false) { next() }
        }
    }

    private func work() {
        while let next = take(wait: true) { next() }
    }

    /// The next piece of work; with `wait`, waits up to ``idleSeconds`` for one, then ends the
    /// thread (nil). The caller holds no lock.
    private func take(wait: Bool) -> (@Sendable () -> Void)? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            while head == queue.count {
                guard wait else { return nil }
                var deadline = timespec()
                clock_gettime(CLOCK_MONOTONIC, &deadline)
                deadline.tv_sec += idleSeconds
                idle += 1
                let waited = pthread_cond_timedwait(condition, mutex, &deadline)
                idle -= 1
                if waited == ETIMEDOUT && head == queue.count {
                    threads -= 1
                    return nil
                }
            }
            guard let next = queue[head] else { preconditionFailure("work taken twice") }
            queue[head] = nil
            head += 1
            if head > 64 && head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
            // Work whose task was cancelled while it waited is skipped (its task was resumed).
            if next.state == .cancelled { continue }
            next.state = .running
            return next.work
        }
    }
}
