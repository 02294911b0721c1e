import Glibc

/// A thread of Lanyard's own: detached, and with no signal blocked. A new thread takes the signal
/// mask of the thread that made it, and a thread libdispatch runs blocks nearly every signal; a
/// child started from such a thread by anything but `Spawn` (which resets the mask) would keep
/// them blocked, and `timeout` could not end it with SIGTERM. Lanyard's threads start with none
/// blocked, as a process's main thread does.
package enum DetachedThread {
    /// Runs `body` on a new thread; false when no thread could be started (the process is out of
    /// them), and then `body` has not run.
    package static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        final class Box: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let box = Unmanaged.passRetained(Box(body))
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let made = pthread_create(
            &thread,
            &attributes,
            { raw in
                var none = sigset_t()
                sigemptyset(&none)
                pthread_sigmask(SIG_SETMASK, &none, nil)
                Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
                return nil
            },
            box.toOpaque()
        )
        pthread_attr_destroy(&attributes)
        if made != 0 { box.release() }
        return made == 0
    }
}
