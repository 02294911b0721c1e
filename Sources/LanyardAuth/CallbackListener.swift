import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport

/// The loopback HTTP listener a browser sign-in's redirect lands on (RFC 8252 §7.3): sockets on
/// 127.0.0.1 and ::1 (the same port on both, as a browser may resolve `localhost` to either) that
/// read one small request at a time, within limits of size and time, and answer it with a small
/// page. Every call here blocks: callers run them on ``BlockingExecutor``, and ``stop()`` (from
/// any thread) wakes a wait at once, so a cancelled sign-in never leaves a thread behind or the
/// port bound.
package final class CallbackListener: Sendable {
    /// The port bound.
    package let port: UInt16
    /// The listening sockets: 127.0.0.1, and ::1 unless this machine has no IPv6.
    private let sockets: [Int32]
    /// A pipe (read end, write end) written by ``stop()``: polled beside the sockets, so a wait
    /// ends when it is.
    private let wake: [Int32]
    private let closed = Locked(false)

    /// The most bytes of a request's line and headers read; a browser's redirect is well under it.
    package static let maximumRequestBytes = 16_384
    /// How long one connection may take to send its request.
    package static let requestReadSeconds: Double = 10

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
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(v4, $0, &length) } }
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

    private enum Listening { case listening(Int32), taken, noIPv6 }

    /// A non-blocking socket listening on the loopback address of one family at `port`.
    private static func listenSocket(ipv6: Bool, port: UInt16) throws(AuthError) -> Listening {
        let name = ipv6 ? "[::1]:\(port)" : "127.0.0.1:\(port)"
        let fd = Glibc.socket(ipv6 ? AF_INET6 : AF_INET,
                              Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
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
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        // EADDRINUSE from listen: another socket bound the same address with SO_REUSEADDR and
        // listened first.
        let error = bound != 0 ? errno : (listen(fd, 16) != 0 ? errno : 0)
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

    /// Closes the sockets (the port is free again once this returns). Called once no ``next()``
    /// runs: a descriptor closed under a waiting thread could be reused by another file.
    package func close() {
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            for fd in sockets { Glibc.close(fd) }
            for end in wake { Glibc.close(end) }
        }
    }

    /// Waits for the next connection and reads its request. A connection that sends nothing
    /// readable in time, too much, or not HTTP is answered 400 (when it can be) and skipped.
    /// Throws `CancellationError` once ``stop()`` was called.
    package func next() throws -> CallbackConnection {
        while true {
            guard let socket = waitAcceptable() else { throw CancellationError() }
            let connection = accept(socket, nil, nil)
            if connection < 0 { continue }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            _ = setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            if let request = readRequest(connection) {
                return CallbackConnection(fd: connection, request: request)
            }
            CallbackConnection(fd: connection, request: nil).respond(status: 400, page: .badRequest)
        }
    }

    /// The listening socket with a connection waiting; nil once ``stop()`` was called.
    private func waitAcceptable() -> Int32? {
        var fds = [pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)] + sockets.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while true {
            let n = poll(&fds, nfds_t(fds.count), -1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || fds[0].revents != 0 { return nil }
            if let ready = fds.dropFirst().first(where: { $0.revents != 0 }) { return ready.fd }
        }
    }

    /// Whether `fd` became readable (false: ``stop()`` was called, or `timeout` ms passed).
    private func waitReadable(_ fd: Int32, timeout: Int32) -> Bool {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)]
        while true {
            let n = poll(&fds, 2, timeout)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || fds[1].revents != 0 { return false }
            return true
        }
    }

    /// The request's line and query, read up to the blank line that ends its headers, within
    /// ``maximumRequestBytes`` and ``requestReadSeconds``; nil when it did not come so.
    private func readRequest(_ fd: Int32) -> CallbackRequest? {
        var bytes: [UInt8] = []
        let deadline = Date() + Self.requestReadSeconds
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !CallbackRequest.headersEnded(bytes) {
            let left = deadline.timeIntervalSinceNow
            guard left > 0, waitReadable(fd, timeout: Int32(left * 1000) + 1) else { return nil }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            bytes += chunk[..<n]
            guard bytes.count <= Self.maximumRequestBytes else { return nil }
        }
        return CallbackRequest(head: bytes)
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
        guard answered.withLock({ answered in defer { answered = true }; return !answered }) else { return }
        let body = Array(page.html.utf8)
        let reason = [200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"][status] ?? "Error"
        let head = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(body.count)\r\n"
            + "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
        var out = Array(head.utf8) + body
        while !out.isEmpty {
            let n = out.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            out.removeFirst(n)
        }
        shutdown(fd, Int32(SHUT_WR))
        Glibc.close(fd)
    }
}

/// A request's method, path and query parameters.
package struct CallbackRequest: Sendable, Equatable {
    package var method: String
    package var path: String
    package var query: [String: String]

    static func headersEnded(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 4 && bytes.indices.dropLast(3).contains { i in
            bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10
        }
    }

    /// Parses `METHOD TARGET HTTP/1.x` from the head; nil when it is not that.
    init?(head: [UInt8]) {
        guard let end = head.firstIndex(of: 13) else { return nil }
        let parts = String(decoding: head[..<end], as: UTF8.self).split(separator: " ", omittingEmptySubsequences: false)
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
        case .signedIn: (title, text) = ("Signed in", "Lanyard has the sign-in. You can close this tab and return to the terminal.")
        case .stateMismatch:
            (title, text) = ("Sign-in not accepted", "This address does not belong to the sign-in Lanyard is waiting for, so nothing changed. "
                + "Start from the link the terminal shows.")
        case .notFound: (title, text) = ("Not found", "Lanyard's sign-in listens only for its callback here.")
        case .badRequest: (title, text) = ("Bad request", "Lanyard could not read this request.")
        case .failed(let message): (title, text) = ("Sign-in failed", message)
        }
        return "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>\(Self.escaped(title)) - Lanyard</title></head>"
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
