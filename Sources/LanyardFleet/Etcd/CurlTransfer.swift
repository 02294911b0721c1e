import CCurl
import LanyardSupport

#if canImport(Glibc)
import Glibc
#endif

/// One POST for the etcd gateway client. The only Swift file that calls CCurl.
struct CurlRequest {
    var url: String
    var body: [UInt8]
    var caFile: String?
    var certFile: String?
    var keyFile: String?
    /// Extra header lines, "Name: value" (the Authorization header holds a token: never logged).
    var headers: [String] = []
    /// The whole transfer, in seconds; 0: no limit (a watch).
    var timeout: Double
    var connectTimeout: Double
}

/// How a POST ended.
enum CurlResult: Equatable {
    /// The server answered with this HTTP status (the body went to the sink).
    case answered(status: Int)
    /// No connection (refused, unresolved, or the connect timeout ran out): nothing was sent.
    case connectFailed(String)
    /// TLS failed; `code` is curl's, to tell the CA from the client certificate.
    case tlsFailed(code: Int, String)
    /// The total timeout ran out after the request was sent.
    case timedOut(String)
    case cancelled
    /// The sink asked to stop.
    case stopped
    /// The connection failed otherwise; `requestSent` when the server may have received it.
    case failed(String, requestSent: Bool)
    /// libcurl could not be loaded.
    case unavailable(String)
}

/// A flag that cancels a transfer from any thread (a watch's handle holds one). The C token is
/// thread-safe, which is what makes this class Sendable.
final class CurlCancelToken: @unchecked Sendable {
    fileprivate let pointer: OpaquePointer

    init() {
        guard let pointer = lanyard_curl_cancel_new() else { fatalError("out of memory for a curl cancel token") }
        self.pointer = pointer
    }

    deinit { lanyard_curl_cancel_free(pointer) }

    func fire() { lanyard_curl_cancel_fire(pointer) }
    var isFired: Bool { lanyard_curl_cancel_fired(pointer) != 0 }
}

enum CurlTransfer {
    /// POSTs `request` and blocks until it ends; `sink` gets the body in chunks as they arrive and
    /// returns false to stop. Runs on the calling thread, `sink` too.
    static func post(
        _ request: CurlRequest,
        cancel: CurlCancelToken? = nil,
        sink: (UnsafeRawBufferPointer) -> Bool
    ) -> CurlResult {
        let strings = CStrings()
        defer { strings.free() }
        let url = strings.copy(request.url)
        let ca = request.caFile.map(strings.copy)
        let cert = request.certFile.map(strings.copy)
        let key = request.keyFile.map(strings.copy)
        let headers: [UnsafePointer<CChar>?] = request.headers.map { UnsafePointer(strings.copy($0)) }

        typealias Sink = (UnsafeRawBufferPointer) -> Bool
        return withoutActuallyEscaping(sink) { (sink: @escaping Sink) -> CurlResult in
            var box = sink
            return withUnsafeMutablePointer(to: &box) { boxPointer in
                request.body.withUnsafeBufferPointer { body in
                    headers.withUnsafeBufferPointer { headerLines in
                        var c = lanyard_curl_request()
                        c.url = UnsafePointer(url)
                        c.body = body.baseAddress
                        c.body_length = body.count
                        c.ca_file = ca.map { UnsafePointer($0) }
                        c.cert_file = cert.map { UnsafePointer($0) }
                        c.key_file = key.map { UnsafePointer($0) }
                        c.headers = headerLines.baseAddress
                        c.header_count = Int32(headerLines.count)
                        c.timeout_ms = milliseconds(request.timeout)
                        c.connect_timeout_ms = milliseconds(request.connectTimeout)
                        c.on_data = { bytes, length, context in
                            guard let context else { return 0 }
                            let sink = context.assumingMemoryBound(to: Sink.self).pointee
                            return sink(UnsafeRawBufferPointer(start: bytes, count: length)) ? 1 : 0
                        }
                        c.context = UnsafeMutableRawPointer(boxPointer)
                        c.cancel = cancel?.pointer
                        var outcome = lanyard_curl_outcome()
                        let result = lanyard_curl_post(&c, &outcome)
                        return Self.result(result, outcome)
                    }
                }
            }
        }
    }

    private static func milliseconds(_ seconds: Double) -> Int {
        seconds <= 0 ? 0 : Int(min(seconds, 86_400) * 1000)
    }

    private static func result(_ result: lanyard_curl_result, _ outcome: lanyard_curl_outcome) -> CurlResult {
        let error = String(nulTerminatedTuple: outcome.error)
        switch result {
        case LANYARD_CURL_OK: return .answered(status: outcome.http_status)
        case LANYARD_CURL_CONNECT_FAILED: return .connectFailed(error)
        case LANYARD_CURL_TLS_FAILED: return .tlsFailed(code: Int(outcome.curl_code), error)
        case LANYARD_CURL_TIMED_OUT: return .timedOut(error)
        case LANYARD_CURL_CANCELLED: return .cancelled
        case LANYARD_CURL_STOPPED: return .stopped
        case LANYARD_CURL_UNAVAILABLE: return .unavailable(error)
        default: return .failed(error, requestSent: outcome.request_sent != 0)
        }
    }
}

/// C copies of Swift strings for one call, wiped and freed after it (a header may hold a token).
private final class CStrings {
    private var pointers: [UnsafeMutablePointer<CChar>] = []

    func copy(_ text: String) -> UnsafeMutablePointer<CChar> {
        guard let pointer = strdup(text) else { fatalError("out of memory for a request string") }
        pointers.append(pointer)
        return pointer
    }

    func free() {
        for pointer in pointers {
            memset(pointer, 0, strlen(pointer))
            Glibc.free(pointer)
        }
        pointers.removeAll()
    }
}
