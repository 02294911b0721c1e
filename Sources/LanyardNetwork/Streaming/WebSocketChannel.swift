import CWebSocket
import Foundation
import LanyardCore

/// One WebSocket connection that sends one message and then delivers what the server sends, on a
/// thread of its own (libwebsockets' calls block). Ending the consumer's iteration, or cancelling
/// its task, wakes that thread, which closes the connection and exits.
enum WebSocketChannel {
    enum Event: Sendable {
        case opened
        case message([UInt8], binary: Bool)
        /// The server answered the upgrade with this HTTP status instead of 101.
        case refused(status: Int)
        /// Could not connect or the connection broke (the reason, for messages).
        case failed(String)
        case closed(code: Int)
        case dropped
        case tooLarge
        case timedOut
        case unavailable(String)
    }

    struct Options: Sendable {
        var url: URL
        var headers: [(String, String)]
        var firstMessage: [UInt8]
        var maxMessageBytes: Int
        var timeout: TimeInterval
        /// A PEM file of trusted certificates (tests); nil uses the system's.
        var caFile: String?
    }

    static func open(_ options: Options) -> AsyncStream<Event> {
        let handle = Handle()
        let (stream, continuation) = AsyncStream<Event>.makeStream()
        continuation.onTermination = { _ in handle.cancel() }
        let thread = Thread { run(options, handle: handle, continuation: continuation) }
        thread.name = "lanyard-websocket"
        thread.start()
        return stream
    }

    /// The C handle, which another thread may only cancel, and only while it exists.
    final class Handle: @unchecked Sendable {
        // Every access holds `lock`.
        private let lock = NSLock()
        private var pointer: OpaquePointer?
        private var cancelled = false

        func attach(_ ws: OpaquePointer) {
            lock.withLock {
                pointer = ws
                if cancelled { lanyard_ws_cancel(ws) }
            }
        }

        func cancel() {
            lock.withLock {
                cancelled = true
                if let pointer { lanyard_ws_cancel(pointer) }
            }
        }

        /// Frees the connection; a later cancel finds nothing to wake.
        func release() {
            let ws = lock.withLock { () -> OpaquePointer? in
                defer { pointer = nil }
                return pointer
            }
            if let ws { lanyard_ws_free(ws) }
        }
    }

    private static func run(_ options: Options, handle: Handle, continuation: AsyncStream<Event>.Continuation) {
        defer {
            handle.release()
            continuation.finish()
        }
        guard let ws = lanyard_ws_new() else {
            continuation.yield(.failed("out of memory"))
            return
        }
        handle.attach(ws)
        let timeoutMs = Int32(clamping: Int(options.timeout * 1000))
        let url = options.url
        let tls = url.scheme == "https" || url.scheme == "wss"
        let host = url.host ?? "localhost"
        let port = url.port ?? (tls ? 443 : 80)
        var path = url.path.isEmpty ? "/" : url.path
        if let query = url.query { path += "?" + query }

        let names = options.headers.map { strdup($0.0) }
        let values = options.headers.map { strdup($0.1) }
        defer { for pointer in names + values { free(pointer) } }
        let result: lanyard_ws_result = host.withCString { hostC in
            path.withCString { pathC in
                withOptionalCString(options.caFile) { caC in
                    names.map { UnsafePointer($0) }.withUnsafeBufferPointer { namesC in
                        values.map { UnsafePointer($0) }.withUnsafeBufferPointer { valuesC in
                            var o = lanyard_ws_options(
                                host: hostC,
                                port: Int32(port),
                                path: pathC,
                                tls: tls ? 1 : 0,
                                ca_file: caC,
                                header_names: namesC.baseAddress,
                                header_values: valuesC.baseAddress,
                                header_count: Int32(options.headers.count),
                                max_message_bytes: options.maxMessageBytes,
                                timeout_ms: timeoutMs
                            )
                            return lanyard_ws_connect(ws, &o)
                        }
                    }
                }
            }
        }
        guard result == LANYARD_WS_OK else {
            continuation.yield(event(result, ws))
            return
        }
        continuation.yield(.opened)
        let sent = options.firstMessage.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { lanyard_ws_send_text(ws, $0.baseAddress, $0.count, timeoutMs) }
        }
        guard sent == LANYARD_WS_OK else {
            continuation.yield(event(sent, ws))
            return
        }
        while true {
            var message = lanyard_ws_message()
            let received = lanyard_ws_receive(ws, timeoutMs, &message)
            guard received == LANYARD_WS_OK else {
                continuation.yield(event(received, ws))
                return
            }
            let bytes = Array(UnsafeBufferPointer(start: message.bytes, count: message.length))
            continuation.yield(.message(bytes, binary: message.binary != 0))
        }
    }

    private static func event(_ result: lanyard_ws_result, _ ws: OpaquePointer) -> Event {
        let reason = String(cString: lanyard_ws_error(ws))
        switch result {
        case LANYARD_WS_REFUSED: return .refused(status: Int(lanyard_ws_http_status(ws)))
        case LANYARD_WS_CLOSED: return .closed(code: Int(lanyard_ws_close_code(ws)))
        case LANYARD_WS_DROPPED: return .dropped
        case LANYARD_WS_TIMED_OUT: return .timedOut
        case LANYARD_WS_TOO_LARGE: return .tooLarge
        case LANYARD_WS_UNAVAILABLE: return .unavailable(reason)
        case LANYARD_WS_CANCELLED: return .failed("cancelled")
        default: return .failed(reason.isEmpty ? "connection failed" : reason)
        }
    }

    private static func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let s else { return body(nil) }
        return s.withCString { body($0) }
    }
}
