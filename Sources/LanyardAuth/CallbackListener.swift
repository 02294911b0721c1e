import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport

/// The loopback HTTP listener a browser sign-in's redirect lands on (RFC 8252 §7.3): sockets on
/// 127.0.0.1 and ::1 (the same port on both, as a browser may resolve `localhost` to either) that
/// read small requests within limits of size and time, several connections at once, and answer
/// each with a small page. Every call here blocks: callers run them on ``BlockingExecutor``, and
/// ``stop()`` (from any thread) wakes a wait at once, so a cancelled sign-in never leaves a
/// thread behind or the port bound.
///
/// Connections are read side by side by one thread (``next()`` polls them all), so a connection
/// that sends nothing, or slowly, never holds the callback out: each has
/// ``requestReadSeconds`` to send its request's head, and at most ``maximumOpenConnections`` are
/// open at once; a connection beyond that closes the oldest one still waiting for its request.
package final class CallbackListener: Sendable {
    /// The port bound.
    package let port: UInt16
    /// The listening sockets: 127.0.0.1, and ::1 unless this machine has no IPv6.
    private let sockets: [Int32]
    /// A pipe (read end, write end) written by ``stop()``: polled beside the sockets, so a wait
    /// ends when it is.
    private let wake: [Int32]
    private let closed = Locked(false)
    /// The connections accepted and not handed out yet; only ``next()`` (one call at a time) and
    /// ``close()`` touch it.
    private let connections = Locked(Connections())

    /// The most bytes of a request's line and headers read; a browser's redirect is well under it.
    package static let maximumRequestBytes = 16_384
    /// How long a connection may take to send its request's head, from its accept. A browser sends
    /// it at once; a connection that sends nothing (a preconnect, another program) is closed then.
    package static let requestReadSeconds: Double = 2
    /// The most connections open at once that the listener has not handed out.
    package static let maximumOpenConnections = 16
    /// How many connections may wait in the kernel to be accepted.
    static let backlog: Int32 = 128

    private init(sockets: [Int32], wake: [Int32], port: UInt16) {
        self.sockets = sockets
        self.wake = wake
        self.port = port
    }

    deinit { close() }

    /// Listens on 127.0.0.1 and ::1 at the first of `ports` that is free on both (0: any free
    /// port). A port another program holds on either address is taken: sharing it would let that
    /// program receive the callback of a browser that tries the other address first. A machine
    /// without IPv6 on loopback is served on 127.0.0.1 alone. Every port taken:
    /// ``AuthError/callbackPortInUse(ports:)``, naming them.
    package static func bind(ports: [UInt16]) throws(AuthError) -> CallbackListener {
        for port in ports {
            // Port 0: the system picks one free on 127.0.0.1; should ::1 have it taken, pick again.
            for _ in 0..<(port == 0 ? 8 : 1) {
                guard let (sockets, bound) = try listenOnBoth(port) else { continue }
                var pipeEnds: [Int32] = [-1, -1]
                guard pipe(&pipeEnds) == 0 else {
                    let error = errno
                    for fd in sockets { Glibc.close(fd) }
                    throw .networkFailure("callback listener: pipe: \(systemMessage(error))")
                }
                for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
                _ = fcntl(pipeEnds[1], F_SETFL, O_NONBLOCK)
                return CallbackListener(sockets: sockets, wake: pipeEnds, port: bound)
            }
        }
        throw .callbackPortInUse(ports: ports)
    }

    /// Listening sockets on 127.0.0.1:`port` and [::1]:`port` (only the first when this machine
    /// has no IPv6) and the port bound; nil when either address has the port taken.
    private static func listenOnBoth(_ port: UInt16) throws(AuthError) -> ([Int32], UInt16)? {
        guard case .listening(let v4) = try listenSocket(ipv6: false, port: port) else { return nil }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(v4, $0, &length) }
        }
        let bound = UInt16(bigEndian: actual.sin_port)
        let v6: Listening
        do { v6 = try listenSocket(ipv6: true, port: bound) } catch {
            Glibc.close(v4)
            throw error
        }
        switch v6 {
        case .listening(let fd): return ([v4, fd], bound)
        case .noIPv6: return ([v4], bound)
        case .taken:
            Glibc.close(v4)
            return nil
        }
    }

    private enum Listening {
        case listening(Int32)
        case taken, noIPv6
    }

    /// A non-blocking socket listening on the loopback address of one family at `port`.
    private static func listenSocket(ipv6: Bool, port: UInt16) throws(AuthError) -> Listening {
        let name = ipv6 ? "[::1]:\(port)" : "127.0.0.1:\(port)"
        let fd = Glibc.socket(
            ipv6 ? AF_INET6 : AF_INET,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
            0
        )
        guard fd >= 0 else {
            let error = errno
            if ipv6 && error == EAFNOSUPPORT { return .noIPv6 }
            throw .networkFailure("callback listener: socket for \(name): \(systemMessage(error))")
        }
        // Lets a new sign-in bind the port while the last one's connections are in TIME_WAIT;
        // it never lets two listeners share it.
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound: Int32
        if ipv6 {
            // ::1 only: 127.0.0.1 has a socket of its own.
            _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = in6addr_loopback
            bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        // EADDRINUSE from listen: another socket bound the same address with SO_REUSEADDR and
        // listened first.
        let error = bound != 0 ? errno : (listen(fd, backlog) != 0 ? errno : 0)
        guard error != 0 else { return .listening(fd) }
        Glibc.close(fd)
        if error == EADDRINUSE { return .taken }
        // No ::1 here (IPv6 disabled): 127.0.0.1 alone, which every browser reaches `localhost` by.
        if ipv6 && (error == EADDRNOTAVAIL || error == EAFNOSUPPORT) { return .noIPv6 }
        throw .networkFailure("callback listener: cannot listen on \(name): \(systemMessage(error))")
    }

    /// Wakes a ``next()`` waiting on another thread, which then throws `CancellationError`; so
    /// does every later call. Safe from any thread, any number of times.
    package func stop() {
        closed.withLock { closed in
            guard !closed else { return }
            var one: UInt8 = 1
            _ = write(wake[1], &one, 1)
        }
    }

    /// Closes the sockets and the connections not handed out (the port is free again once this
    /// returns). Called once no ``next()`` runs: a descriptor closed under a waiting thread could
    /// be reused by another file.
    package func close() {
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            for fd in sockets { Glibc.close(fd) }
            for end in wake { Glibc.close(end) }
            connections.withLock { $0.closeAll() }
        }
    }

    /// Waits for the next request read whole. Connections are accepted and read side by side,
    /// each within ``requestReadSeconds`` and ``maximumRequestBytes``: one that sends nothing in
    /// time, too much, or not HTTP is answered 400 (when that can be sent at once) and closed.
    /// Throws `CancellationError` once ``stop()`` was called.
    package func next() throws -> CallbackConnection {
        // Accepting stops for a moment when it fails for want of descriptors, instead of spinning.
        var acceptResumes: ContinuousClock.Instant?
        while true {
            let before = ContinuousClock.now
            if let resumes = acceptResumes, resumes <= before { acceptResumes = nil }
            let accepting = acceptResumes == nil
            let (reading, timeout) = connections.withLock {
                ($0.reading.map(\.fd), $0.pollTimeout(now: before, alsoAt: acceptResumes))
            }
            var fds = [pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)]
            if accepting { fds += sockets.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) } }
            fds += reading.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let n = poll(&fds, nfds_t(fds.count), timeout)
            if n < 0 {
                let error = errno
                if error == EINTR { continue }
                throw AuthError.networkFailure("callback listener: poll: \(systemMessage(error))")
            }
            if fds[0].revents != 0 { throw CancellationError() }
            let now = ContinuousClock.now
            let listening = accepting ? fds[1...sockets.count].filter { $0.revents != 0 }.map(\.fd) : []
            let readable = Set(fds.dropFirst(accepting ? 1 + sockets.count : 1).filter { $0.revents != 0 }.map(\.fd))
            let ready = connections.withLock { connections -> Ready? in
                for socket in listening where !accept(from: socket, into: &connections, now: now) {
                    acceptResumes = now + .milliseconds(100)
                }
                // Read what came before judging deadlines: a thread that ran late must not
                // refuse a request that arrived in time.
                connections.read(readable)
                connections.expire(now: now)
                return connections.ready.isEmpty ? nil : connections.ready.removeFirst()
            }
            if let ready { return CallbackConnection(fd: ready.fd, request: ready.request) }
        }
    }

    /// Accepts the connections waiting on `socket`; false when accepting failed for another reason
    /// than none waiting (out of descriptors, most likely).
    private func accept(from socket: Int32, into connections: inout Connections, now: ContinuousClock.Instant) -> Bool {
        // Bounded, so a flood of connections cannot keep this loop from the ones it holds.
        for _ in 0..<256 {
            let fd = Glibc.accept(socket, nil, nil)
            if fd < 0 {
                switch errno {
                case EAGAIN, EWOULDBLOCK: return true
                case EINTR, ECONNABORTED: continue
                default: return false
                }
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            // The connection stays blocking for the answer, sent once it is handed out; this bounds that send.
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            connections.admit(fd, deadline: now + .milliseconds(Int64(Self.requestReadSeconds * 1000)))
        }
        return true
    }
}

/// A request read whole, its connection not handed out yet.
private struct Ready: Sendable {
    let fd: Int32
    let request: CallbackRequest
}

/// A connection still sending its request's head.
private struct Reading: Sendable {
    let fd: Int32
    let deadline: ContinuousClock.Instant
    var bytes: [UInt8] = []
}

/// The connections a ``CallbackListener`` accepted and has not handed out, at most
/// ``CallbackListener/maximumOpenConnections``.
private struct Connections: Sendable {
    /// Oldest first.
    var reading: [Reading] = []
    /// First come, first handed out.
    var ready: [Ready] = []

    /// Takes a new connection and reads what it sent already (a browser's request comes with the
    /// connection). At the limit, the oldest connection still reading makes room: one that held
    /// its place longest is the likeliest idle, and the newest may be the browser's callback. With
    /// only requests read whole ahead of it, the new connection is closed.
    mutating func admit(_ fd: Int32, deadline: ContinuousClock.Instant) {
        if reading.count + ready.count >= CallbackListener.maximumOpenConnections {
            guard !reading.isEmpty else {
                Glibc.close(fd)
                return
            }
            Glibc.close(reading.removeFirst().fd)
        }
        reading.append(Reading(fd: fd, deadline: deadline))
        read([fd])
    }

    /// Reads what the connections in `readable` sent, moving each whose head is complete to
    /// ``ready``, and closing each that ended, sent too much, or sent no HTTP request.
    mutating func read(_ readable: Set<Int32>) {
        guard !readable.isEmpty else { return }
        var still: [Reading] = []
        for var connection in reading {
            guard readable.contains(connection.fd) else {
                still.append(connection)
                continue
            }
            switch Self.readAvailable(&connection) {
            case .more: still.append(connection)
            case .ended: Glibc.close(connection.fd)
            case .refused: CallbackConnection.answerAtOnce(connection.fd, status: 400, page: .badRequest)
            case .request(let request): ready.append(Ready(fd: connection.fd, request: request))
            }
        }
        reading = still
    }

    private enum Outcome {
        case more, ended, refused
        case request(CallbackRequest)
    }

    /// Reads without waiting until nothing more is there, the head is complete, or it is too long.
    private static func readAvailable(_ connection: inout Reading) -> Outcome {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n < 0 {
                let error = errno
                if error == EINTR { continue }
                return error == EAGAIN || error == EWOULDBLOCK ? .more : .ended
            }
            guard n > 0 else { return .ended }
            let searchFrom = max(0, connection.bytes.count - 3)
            connection.bytes += chunk[..<n]
            guard connection.bytes.count <= CallbackListener.maximumRequestBytes else { return .refused }
            if CallbackRequest.headersEnded(connection.bytes, from: searchFrom) {
                return CallbackRequest(head: connection.bytes).map { .request($0) } ?? .refused
            }
        }
    }

    /// Answers 400 to the connections whose time to send their head is up, and closes them.
    mutating func expire(now: ContinuousClock.Instant) {
        reading.removeAll { connection in
            guard connection.deadline <= now else { return false }
            CallbackConnection.answerAtOnce(connection.fd, status: 400, page: .badRequest)
            return true
        }
    }

    /// How long a poll may wait: not at all while a request is ready, otherwise until the first
    /// deadline (or `alsoAt`), or for ever (-1).
    func pollTimeout(now: ContinuousClock.Instant, alsoAt: ContinuousClock.Instant?) -> Int32 {
        guard ready.isEmpty else { return 0 }
        guard let first = (reading.map(\.deadline) + (alsoAt.map { [$0] } ?? [])).min() else { return -1 }
        guard first > now else { return 0 }
        let (seconds, attoseconds) = (first - now).components
        // Rounded up, so the poll does not end just before the deadline and spin.
        return Int32(min(seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1, Int64(Int32.max)))
    }

    mutating func closeAll() {
        for connection in reading { Glibc.close(connection.fd) }
        for connection in ready { Glibc.close(connection.fd) }
        reading = []
        ready = []
    }
}

/// One request the listener read, with its connection open for the answer.
package final class CallbackConnection: Sendable {
    private let fd: Int32
    package let request: CallbackRequest?
    private let answered = Locked(false)

    init(fd: Int32, request: CallbackRequest?) {
        self.fd = fd
        self.request = request
    }

    deinit { respond(status: 500, page: .failed("Lanyard stopped before it could answer.")) }

    /// Answers with `page` and closes the connection (once; later calls do nothing). Blocking,
    /// bounded by the send timeout set when the connection was accepted.
    package func respond(status: Int, page: CallbackPage) {
        guard
            answered.withLock({ answered in
                defer { answered = true }
                return !answered
            })
        else { return }
        var out = Self.response(status: status, page: page)
        while !out.isEmpty {
            let n = out.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            out.removeFirst(n)
        }
        shutdown(fd, Int32(SHUT_WR))
        Glibc.close(fd)
    }

    /// Answers what fits in the socket's buffer without waiting (a small page always does, unless
    /// the peer is gone) and closes `fd`: for connections refused while others are read.
    static func answerAtOnce(_ fd: Int32, status: Int, page: CallbackPage) {
        let out = response(status: status, page: page)
        _ = out.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        shutdown(fd, Int32(SHUT_WR))
        Glibc.close(fd)
    }

    static func response(status: Int, page: CallbackPage) -> [UInt8] {
        let body = Array(page.html.utf8)
        let reason = [200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"][status] ?? "Error"
        let head =
            "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/html; "
            + "charset=utf-8\r\nContent-Length: \(body.count)\r\n"
            + "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }
}

/// A request's method, path and query parameters.
package struct CallbackRequest: Sendable, Equatable {
    package var method: String
    package var path: String
    package var query: [String: String]

    /// Whether `bytes` hold the blank line that ends a request's headers, looking from `start`
    /// (where the last search left off, so a head that comes a byte at a time costs no more).
    static func headersEnded(_ bytes: [UInt8], from start: Int = 0) -> Bool {
        bytes.count >= 4
            && (start..<(bytes.count - 3)).contains { i in
                bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10
            }
    }

    /// Parses `METHOD TARGET HTTP/1.x` from the head; nil when it is not that.
    init?(head: [UInt8]) {
        guard let end = head.firstIndex(of: 13) else { return nil }
        let parts = String(decoding: head[..<end], as: UTF8.self).split(
            separator: " ",
            omittingEmptySubsequences: false
        )
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/") else { return nil }
        method = String(parts[0])
        let target = parts[1].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        path = String(target[0])
        query = target.count > 1 ? Self.parameters(String(target[1])) : [:]
    }

    package init(method: String = "GET", path: String, query: [String: String]) {
        self.method = method
        self.path = path
        self.query = query
    }

    /// `a=1&b=x%20y` as a dictionary (`+` is a space, as in forms); the first of repeated names wins.
    package static func parameters(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                String(s).replacing("+", with: " ").percentDecoded()
            }
            let name = decode(kv[0])
            if out[name] == nil { out[name] = kv.count > 1 ? decode(kv[1]) : "" }
        }
        return out
    }
}

/// The pages the listener answers a browser with. They never repeat text from the request.
package enum CallbackPage: Sendable {
    case signedIn
    case stateMismatch
    case notFound
    case badRequest
    case failed(String)

    var html: String {
        let (title, text): (String, String)
        switch self {
        case .signedIn:
            (title, text) = ("Signed in", "Lanyard has the sign-in. You can close this tab and return to the terminal.")
        case .stateMismatch:
            (title, text) = (
                "Sign-in not accepted",
                "This address does not belong to the sign-in Lanyard is waiting for, so nothing changed. "
                    + "Start from the link the terminal shows."
            )
        case .notFound: (title, text) = ("Not found", "Lanyard's sign-in listens only for its callback here.")
        case .badRequest: (title, text) = ("Bad request", "Lanyard could not read this request.")
        case .failed(let message): (title, text) = ("Sign-in failed", message)
        }
        return "<!doctype html>\n<html><head><meta "
            + "charset=\"utf-8\"><title>\(Self.escaped(title)) - Lanyard</title></head>"
            + "<body><h1>\(Self.escaped(title))</h1><p>\(Self.escaped(text))</p></body></html>\n"
    }

    static func escaped(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }
}
