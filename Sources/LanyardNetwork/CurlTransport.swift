import CCurl
import Foundation
import LanyardAuth
import LanyardCore
import LanyardSupport

/// HTTP to providers on libcurl (CCurl, the etcd client's shim), one blocking transfer per
/// request on a thread of the blocking executor's own (``BlockingExecutor``), never on the
/// cooperative pool.
///
/// The answer is read as it arrives and capped while it is read: past `maxBodyBytes` (or a
/// `Content-Length` announcing more) the transfer stops at once, so no server can make the
/// process hold more than the limit. URLSession on Linux could not promise that: it hands the body
/// to its delegate through an unbounded queue, and acts on a cancellation only once its busy
/// internal queue gets to it (a 1 GiB answer could still be held whole; the completion-handler
/// form gathered it all before anything could look). Redirects are never followed: a token is
/// not sent on to another origin; the 3xx answer is the result.
package final class CurlTransport: HTTPTransport, Sendable {
    /// Answers longer than this are refused (no provider answer is anywhere near it).
    package let maxBodyBytes: Int
    /// The longest wait for a connection, and for the next byte of the answer.
    package let timeout: TimeInterval
    /// No request outlives this (twice `timeout` unless a test says otherwise).
    let hardLimit: TimeInterval
    /// The most a head (status line and headers) may hold.
    static let maxHeadBytes = 256 << 10

    package convenience init(timeout: TimeInterval = 30, maxBodyBytes: Int = 1 << 20) {
        self.init(timeout: timeout, maxBodyBytes: maxBodyBytes, hardLimit: timeout * 2)
    }

    init(timeout: TimeInterval, maxBodyBytes: Int, hardLimit: TimeInterval) {
        self.timeout = timeout
        self.maxBodyBytes = maxBodyBytes
        self.hardLimit = hardLimit
    }

    package func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try HTTPHeaderRules.check(request.headers.map { ($0.key, $0.value) })
        let host = TerminalText.escaped(request.url.host ?? "server")
        guard let scheme = request.url.scheme?.lowercased(), ["http", "https"].contains(scheme) else {
            throw TransportError(.other, "request to \(host) failed: only http and https URLs are sent")
        }
        var headers = request.headers.filter { $0.key.lowercased() != "user-agent" }.map { ($0.key, $0.value) }
        headers.append(("User-Agent", "lanyard/\(LanyardAuth.version)"))
        let transfer = ProviderTransfer(
            url: request.url.absoluteString,
            method: request.method.uppercased(),
            headers: headers,
            body: [UInt8](request.body ?? Data()),
            host: host,
            maxBodyBytes: maxBodyBytes,
            totalTimeout: min(timeout * 2, hardLimit),
            timeout: timeout
        )
        let call = OneAnswer()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard call.start(continuation) else { return }
                // The transfer blocks its thread (libcurl's own loop) for as long as the server
                // takes: a thread of its own, outside the executor's bound, since the caller may be
                // an operation holding a pooled executor thread while it waits for this answer
                // (a refresh's one hop), and pooled work must never wait for other pooled work.
                BlockingExecutor.shared.submitOnOwnThread { call.finish(Result { try transfer.run() }) }
            }
        } onCancel: {
            transfer.cancel.fire()
            call.finish(.failure(TransportError(.cancelled, "request cancelled")))
        }
    }
}

/// The transport's former name, from when it ran on URLSession; callers still use it.
package typealias URLSessionTransport = CurlTransport

/// One request's continuation, resumed exactly once: by the transfer's end or by the caller's
/// cancellation, whichever comes first (a cancelled transfer ends on its own thread soon after).
private final class OneAnswer: Sendable {
    private let state = Locked<(continuation: CheckedContinuation<HTTPResponse, Error>?, done: Bool)>((nil, false))

    /// False when the call was cancelled before it started (the continuation is resumed here).
    func start(_ continuation: CheckedContinuation<HTTPResponse, Error>) -> Bool {
        let started = state.withLock { state -> Bool in
            guard !state.done else { return false }
            state.continuation = continuation
            return true
        }
        if !started { continuation.resume(throwing: TransportError(.cancelled, "request cancelled")) }
        return started
    }

    func finish(_ result: Result<HTTPResponse, Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<HTTPResponse, Error>? in
            defer { state = (nil, true) }
            return state.done ? nil : state.continuation
        }
        continuation?.resume(with: result)
    }
}

/// A flag that stops a transfer from any thread; the C token is thread-safe.
private final class CurlCancel: @unchecked Sendable {
    let pointer: OpaquePointer

    init() {
        guard let pointer = lanyard_curl_cancel_new() else { fatalError("out of memory for a curl cancel token") }
        self.pointer = pointer
    }

    deinit { lanyard_curl_cancel_free(pointer) }

    func fire() { lanyard_curl_cancel_fire(pointer) }
}

/// One request and what arrives for it. `run` is called once, on the transfer's thread; the
/// callbacks run on that thread too, so the answer needs no lock.
private final class ProviderTransfer: @unchecked Sendable {
    let url: String
    let method: String
    let headerLines: [String]
    let body: [UInt8]
    let host: String
    let maxBodyBytes: Int
    let totalTimeout: TimeInterval
    let timeout: TimeInterval
    let cancel = CurlCancel()

    private var headers: [String: String] = [:]
    private var headBytes = 0
    private var received = Data()
    private var refusal: TransportError?

    init(
        url: String,
        method: String,
        headers: [(String, String)],
        body: [UInt8],
        host: String,
        maxBodyBytes: Int,
        totalTimeout: TimeInterval,
        timeout: TimeInterval
    ) {
        self.url = url
        self.method = method
        // "Name:" alone would remove a header in libcurl; "Name;" sends it empty.
        self.headerLines = headers.map { $0.1.isEmpty ? "\($0.0);" : "\($0.0): \($0.1)" }
        self.body = body
        self.host = host
        self.maxBodyBytes = maxBodyBytes
        self.totalTimeout = totalTimeout
        self.timeout = timeout
    }

    /// A line of the head: a status line starts a new head (after a 100 Continue), a header is
    /// kept by its lower-cased name (repeated ones joined with ", ", as URLSession did). A
    /// Content-Length past the limit stops the transfer before the body.
    func head(_ bytes: UnsafeRawBufferPointer) -> Bool {
        headBytes += bytes.count
        guard headBytes <= CurlTransport.maxHeadBytes else {
            refusal = TransportError(.tooLarge, "\(host) sent a head longer than \(CurlTransport.maxHeadBytes) bytes")
            return false
        }
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            headers = [:]
            return true
        }
        guard let colon = line.firstIndex(of: ":") else { return true }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        headers[name] = headers[name].map { $0 + ", " + value } ?? value
        if name == "content-length", let announced = Int(value), announced > maxBodyBytes {
            refusal = TransportError(.tooLarge, "\(host) announced \(announced) bytes; the limit is \(maxBodyBytes)")
            return false
        }
        return true
    }

    /// A piece of the body; past the limit the transfer stops, nothing more is read.
    func data(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard received.count + bytes.count <= maxBodyBytes else {
            refusal = TransportError(
                .tooLarge,
                "\(host) sent more than \(maxBodyBytes) bytes; the limit is \(maxBodyBytes)"
            )
            received = Data()
            return false
        }
        received.append(contentsOf: bytes)
        return true
    }

    func run() throws -> HTTPResponse {
        var outcome = lanyard_curl_outcome()
        let result = withCStrings([url, method] + headerLines) { strings in
            body.withUnsafeBufferPointer { body in
                Array(strings.dropFirst(2)).withUnsafeBufferPointer { lines in
                    var c = lanyard_curl_request()
                    c.url = strings[0]
                    c.method = strings[1]
                    c.body = body.baseAddress
                    c.body_length = body.count
                    c.headers = lines.baseAddress
                    c.header_count = Int32(lines.count)
                    c.timeout_ms = Self.milliseconds(totalTimeout)
                    c.connect_timeout_ms = Self.milliseconds(timeout)
                    c.idle_timeout_s = max(1, Int(timeout.rounded(.up)))
                    c.on_data = { bytes, length, context in
                        guard let context else { return 0 }
                        let transfer = Unmanaged<ProviderTransfer>.fromOpaque(context).takeUnretainedValue()
                        return transfer.data(UnsafeRawBufferPointer(start: bytes, count: length)) ? 1 : 0
                    }
                    c.on_header = { bytes, length, context in
                        guard let context else { return 0 }
                        let transfer = Unmanaged<ProviderTransfer>.fromOpaque(context).takeUnretainedValue()
                        return transfer.head(UnsafeRawBufferPointer(start: bytes, count: length)) ? 1 : 0
                    }
                    c.context = Unmanaged.passUnretained(self).toOpaque()
                    c.cancel = cancel.pointer
                    return lanyard_curl_post(&c, &outcome)
                }
            }
        }
        // curl's text can quote the server (a certificate's names): escaped.
        let detail = TerminalText.escaped(String(nulTerminatedTuple: outcome.error))
        switch result {
        case LANYARD_CURL_OK:
            return HTTPResponse(status: outcome.http_status, headers: headers, body: received)
        case LANYARD_CURL_STOPPED:
            throw refusal ?? TransportError(.tooLarge, "\(host) sent more than \(maxBodyBytes) bytes")
        case LANYARD_CURL_CANCELLED: throw TransportError(.cancelled, "request cancelled")
        case LANYARD_CURL_TIMED_OUT: throw TransportError(.timedOut, "\(host) did not answer in time")
        case LANYARD_CURL_CONNECT_FAILED:
            if outcome.curl_code == 28 { throw TransportError(.timedOut, "\(host) did not answer in time") }
            throw TransportError(.connectionFailed, "cannot reach \(host): \(detail)")
        case LANYARD_CURL_UNAVAILABLE: throw TransportError(.other, "cannot make HTTP requests: \(detail)")
        default: throw TransportError(.other, "request to \(host) failed: \(detail)")
        }
    }

    private static func milliseconds(_ seconds: Double) -> Int {
        seconds <= 0 ? 1 : Int(min(seconds, 86_400) * 1000)
    }
}

/// Runs `body` with C copies of `strings`, wiped and freed after it (a header may hold a token).
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer {
        for copy in copies {
            guard let copy else { continue }
            memset(copy, 0, strlen(copy))
            free(copy)
        }
    }
    guard copies.allSatisfy({ $0 != nil }) else { fatalError("out of memory for a request string") }
    return body(copies.map { UnsafePointer($0) })
}
