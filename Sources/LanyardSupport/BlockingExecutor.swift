#if canImport(Glibc)
import Glibc
#endif

/// The one place where blocking work runs: libsecret's D-Bus calls, libcurl (etcd, the fleet),
/// `flock`, file I/O that can stall, waiting for a child process. Swift's cooperative thread pool
/// has one thread per core (two on the machines Lanyard is tested on), and a task that blocks one
/// of them stalls every other task; so async code never calls a blocking function itself: it
/// hands the call to this executor through ``run(_:)`` and suspends until it is done.
///
/// Threads of its own (like swift-nio's `NIOThreadPool`): started on demand, up to
/// ``maximumThreads``, and ended after ``idleSeconds`` without work. The bound is generous on
/// purpose: blocking work can wait on other blocking work (a `flock` held by a refresh that still
/// has etcd calls to make), so the pool must not run out of threads while that holder needs one.
/// Work beyond the bound queues in order.
package final class BlockingExecutor: @unchecked Sendable {
    /// The process's executor.
    package static let shared = BlockingExecutor()

    package let maximumThreads: Int
    package let idleSeconds: Int

    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var queue: [() -> Void] = []
    private var head = 0
    private var threads = 0
    private var idle = 0

    package init(maximumThreads: Int = 64, idleSeconds: Int = 10) {
        self.maximumThreads = maximumThreads
        self.idleSeconds = idleSeconds
        pthread_mutex_init(&mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(&condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Runs `body` on one of the executor's threads and returns its result; the calling task
    /// suspends meanwhile (its cooperative thread is free for other tasks). `body` must not
    /// await: it is the blocking part.
    package func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            submit {
                do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
            }
        }
    }

    /// ``run(_:)`` for work that cannot fail.
    package func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            submit { continuation.resume(returning: body()) }
        }
    }

    /// ``run(_:)`` on a thread of its own, outside the bound, for work that blocks for as long as
    /// something outside this process decides: a listener waiting for a browser, the wait for a
    /// child to end, a whole command. Queued behind the bound, such work could wait for threads
    /// that wait for it (the callback a sign-in's own command waits for), and holding pooled
    /// threads it would shrink the pool for everything else.
    package func runOnOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            submitOnOwnThread {
                do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
            }
        }
    }

    /// ``runOnOwnThread(_:)`` for work that cannot fail.
    package func runOnOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            submitOnOwnThread { continuation.resume(returning: body()) }
        }
    }

    /// ``submit(_:)`` on a thread of its own, outside the bound (see ``runOnOwnThread(_:)``; when
    /// no thread can be started, the work goes to the pool).
    package func submitOnOwnThread(_ work: @escaping @Sendable () -> Void) {
        final class Box: @unchecked Sendable {
            let work: @Sendable () -> Void
            init(_ work: @escaping @Sendable () -> Void) { self.work = work }
        }
        let box = Unmanaged.passRetained(Box(work))
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let made = pthread_create(&thread, &attributes, { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().work()
            return nil
        }, box.toOpaque())
        pthread_attr_destroy(&attributes)
        if made != 0 { submit(box.takeRetainedValue().work) }
    }

    /// Queues `work`, starting a thread when more work waits than threads are idle (an idle
    /// thread woken for earlier work is not free for this one) and the bound allows.
    package func submit(_ work: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(&mutex)
        queue.append(work)
        let start = queue.count - head > idle && threads < maximumThreads
        if start { threads += 1 }
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
        if start { startThread() }
    }

    /// Threads running now (for tests and diagnostics).
    package var threadCount: Int {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return threads
    }

    private func startThread() {
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let made = pthread_create(&thread, &attributes, { raw in
            let executor = Unmanaged<BlockingExecutor>.fromOpaque(raw!).takeRetainedValue()
            executor.work()
            return nil
        }, box.toOpaque())
        pthread_attr_destroy(&attributes)
        if made != 0 {
            // No thread (the process is out of them): run the work here rather than lose it.
            box.release()
            pthread_mutex_lock(&mutex)
            threads -= 1
            pthread_mutex_unlock(&mutex)
            while let next = take(wait: false) { next() }
        }
    }

    private func work() {
        while let next = take(wait: true) { next() }
    }

    /// The next piece of work; with `wait`, waits up to ``idleSeconds`` for one, then ends the
    /// thread (nil). The caller holds no lock.
    private func take(wait: Bool) -> (() -> Void)? {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while head == queue.count {
            guard wait else { return nil }
            var deadline = timespec()
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            deadline.tv_sec += idleSeconds
            idle += 1
            let waited = pthread_cond_timedwait(&condition, &mutex, &deadline)
            idle -= 1
            if waited == ETIMEDOUT && head == queue.count {
                threads -= 1
                return nil
            }
        }
        let next = queue[head]
        head += 1
        if head > 64 && head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
        return next
    }
}
