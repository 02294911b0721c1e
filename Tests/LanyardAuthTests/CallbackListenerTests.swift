import Foundation
import LanyardAuth
import LanyardSupport
import LanyardTestSupport
import Testing

/// The browser sign-in's listener on its own, over real loopback sockets: both loopback
/// addresses, a port another program holds on ::1, and connections that send nothing.
@Suite struct CallbackListenerTests {
    /// A request sent to 127.0.0.1 and one sent to [::1] at the same port both reach the listener.
    @Test func listensOnBothLoopbackAddresses() async throws {
        let listener = try CallbackListener.bind(ports: [0])
        defer { listener.close() }
        let ipv6 = ipv6LoopbackAvailable()
        if !ipv6 {
            print(
                "CallbackListenerTests.listensOnBothLoopbackAddresses: "
                    + "::1 not tried, this machine has no IPv6 on loopback"
            )
        }
        for (family, useIPv6) in [("v4", false), ("v6", true)] where !useIPv6 || ipv6 {
            let client = try await BlockingExecutor.shared.run {
                let fd = try connectLoopback(listener.port, ipv6: useIPv6)
                try sendAll(fd, "GET /\(family)?state=s HTTP/1.1\r\nHost: localhost\r\n\r\n")
                return fd
            }
            defer { close(client) }
            let connection = try await BlockingExecutor.shared.run(.ownThread) { try listener.next() }
            #expect(connection.request == CallbackRequest(path: "/\(family)", query: ["state": "s"]))
            await BlockingExecutor.shared.run { connection.respond(status: 404, page: .notFound) }
            let answer = await BlockingExecutor.shared.run { readUntilClosed(client, within: 60) }
            #expect(String(decoding: answer ?? [], as: UTF8.self).hasPrefix("HTTP/1.1 404 Not Found"))
        }
    }

    /// Another program listening on [::1] at a port makes the port taken, though 127.0.0.1's is
    /// free: sharing it would hand that program the callback of a browser that tries ::1 first.
    /// The listener moves to the next port, leaving nothing on 127.0.0.1 at the first.
    @Test func aPortTakenOnIPv6LoopbackIsTaken() throws {
        guard ipv6LoopbackAvailable() else {
            print("CallbackListenerTests.aPortTakenOnIPv6LoopbackIsTaken skipped: this machine has no IPv6 on loopback")
            return
        }
        let taken = try freeLoopbackPort()
        let next = try freeLoopbackPort()
        let held = try holdIPv6Loopback(taken)
        defer { close(held) }
        #expect(throws: AuthError.callbackPortInUse(ports: [taken])) { try CallbackListener.bind(ports: [taken]) }
        let listener = try CallbackListener.bind(ports: [taken, next])
        defer { listener.close() }
        #expect(listener.port == next)
        #expect(ipv4LoopbackPortIsFree(taken))
    }

    /// More connections than the limit, none sending anything (one half a head), then a request:
    /// the request is handed out at once; the oldest connections beyond the limit were closed to
    /// make room, and the others are answered 400 when their time to send a head is up. Every
    /// connection is in the kernel's queue before `next()` runs, so what it closes is exact.
    @Test func idleConnectionsNeverHoldARequestOut() async throws {
        let listener = try CallbackListener.bind(ports: [0])
        defer { listener.close() }
        let port = listener.port
        let total = 20
        let idle = try await BlockingExecutor.shared.run {
            let fds = try (0..<total).map { _ in try connectLoopback(port) }
            try sendAll(fds[total - 1], "GET /auth/callback?state=slow HTTP/1.1\r\n")
            return fds
        }
        defer { for fd in idle { close(fd) } }
        let browser = try await BlockingExecutor.shared.run {
            let fd = try connectLoopback(port)
            try sendAll(fd, "GET /auth/callback?code=c&state=s HTTP/1.1\r\nHost: localhost\r\n\r\n")
            return fd
        }
        defer { close(browser) }
        let connection = try await BlockingExecutor.shared.run(.ownThread) { try listener.next() }
        #expect(connection.request == CallbackRequest(path: "/auth/callback", query: ["code": "c", "state": "s"]))
        let evicted = total + 1 - CallbackListener.maximumOpenConnections
        #expect(
            idle.map(peerClosed) == Array(repeating: true, count: evicted)
                + Array(repeating: false, count: total - evicted)
        )
        await BlockingExecutor.shared.run { connection.respond(status: 200, page: .signedIn) }
        let page = await BlockingExecutor.shared.run { readUntilClosed(browser, within: 60) }
        #expect(String(decoding: page ?? [], as: UTF8.self).hasPrefix("HTTP/1.1 200 OK"))

        // While the listener waits for another request, the rest run out of time.
        let waiting = WorkOnItsOwnThread { try listener.next() }
        for fd in idle[evicted...] {
            let answer = await BlockingExecutor.shared.run { readUntilClosed(fd, within: 60) }
            #expect(String(decoding: answer ?? [], as: UTF8.self).hasPrefix("HTTP/1.1 400 Bad Request"))
        }
        listener.stop()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
    }
}

// MARK: - Loopback sockets for the listener's tests (blocking: run them on the blocking executor)

struct SocketError: Error, CustomStringConvertible {
    let description: String
    init(_ what: String) { description = "\(what): \(String(cString: strerror(errno)))" }
}

/// Calls `body` with 127.0.0.1:`port` or [::1]:`port` as a `sockaddr`.
private func withLoopbackAddress<T>(ipv6: Bool, port: UInt16, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    if ipv6 {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = port.bigEndian
        address.sin6_addr = in6addr_loopback
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body($0, socklen_t(MemoryLayout<sockaddr_in6>.size))
            }
        }
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

private func streamSocket(ipv6: Bool) throws -> Int32 {
    let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw SocketError("socket") }
    return fd
}

/// Whether this machine has ::1 (IPv6 on loopback); the tests of it skip, saying so, when not.
func ipv6LoopbackAvailable() -> Bool {
    guard let fd = try? streamSocket(ipv6: true) else { return false }
    defer { close(fd) }
    return withLoopbackAddress(ipv6: true, port: 0) { bind(fd, $0, $1) } == 0
}

/// Whether a socket could bind 127.0.0.1:`port` now.
func ipv4LoopbackPortIsFree(_ port: UInt16) -> Bool {
    guard let fd = try? streamSocket(ipv6: false) else { return false }
    defer { close(fd) }
    return withLoopbackAddress(ipv6: false, port: port) { bind(fd, $0, $1) } == 0
}

/// A socket listening on [::1]:`port` alone, as another program would (IPv6 only, no address reuse).
func holdIPv6Loopback(_ port: UInt16) throws -> Int32 {
    let fd = try streamSocket(ipv6: true)
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
    guard withLoopbackAddress(ipv6: true, port: port, { bind(fd, $0, $1) }) == 0, listen(fd, 8) == 0 else {
        let error = SocketError("listen on [::1]:\(port)")
        close(fd)
        throw error
    }
    return fd
}

/// A connection to 127.0.0.1:`port` or [::1]:`port`.
func connectLoopback(_ port: UInt16, ipv6: Bool = false) throws -> Int32 {
    let fd = try streamSocket(ipv6: ipv6)
    guard withLoopbackAddress(ipv6: ipv6, port: port, { connect(fd, $0, $1) }) == 0 else {
        let error = SocketError("connect to port \(port)")
        close(fd)
        throw error
    }
    return fd
}

func sendAll(_ fd: Int32, _ text: String) throws {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard n > 0 else { throw SocketError("send") }
        bytes = bytes.dropFirst(n)
    }
}

/// Everything the peer sends until it closes, waiting at most `seconds` in all; nil when it did
/// not close in time.
func readUntilClosed(_ fd: Int32, within seconds: Double) -> [UInt8]? {
    let deadline = Date() + seconds
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let left = deadline.timeIntervalSinceNow
        guard left > 0 else { return nil }
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        guard poll(&fds, 1, Int32(left * 1000) + 1) > 0 else { continue }
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return bytes }
        bytes += chunk[..<n]
    }
}

/// Whether the peer closed the connection already, without waiting (nothing it sent counts).
func peerClosed(_ fd: Int32) -> Bool {
    var byte: UInt8 = 0
    let n = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
}
