import Foundation
import LanyardAuth
import LanyardCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP request whose answer arrives in pieces (server-sent events), over URLSession: the
/// response head, then the body as it comes. Ending the consumer's iteration, or cancelling its
/// task, cancels the request and releases the session.
enum EventStreamChannel {
    enum Event: Sendable {
        case head(status: Int, headers: [String: String])
        case bytes(Data)
        case finished
        case failed(TransportError)
    }

    static func open(_ request: URLRequest, timeout: TimeInterval) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream()
        let receiver = Receiver(continuation: continuation, host: request.url?.host ?? "server")
        // `timeout` between two pieces of the body; a stream may run long.
        let configuration = SessionConfiguration.make(requestTimeout: timeout, resourceTimeout: 7 * 24 * 3600)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1  // pieces arrive in order
        let session = URLSession(configuration: configuration, delegate: receiver, delegateQueue: queue)
        let task = session.dataTask(with: request)
        continuation.onTermination = { _ in
            task.cancel()
            session.invalidateAndCancel()
        }
        task.resume()
        return stream
    }

    private final class Receiver: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        // Only URLSession's serial delegate queue touches this object.
        let continuation: AsyncStream<Event>.Continuation
        let host: String

        init(continuation: AsyncStream<Event>.Continuation, host: String) {
            self.continuation = continuation
            self.host = host
        }

        func urlSession(
            _ session: URLSession,
            dataTask: URLSessionDataTask,
            didReceive response: URLResponse,
            completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
        ) {
            if let http = response as? HTTPURLResponse {
                var headers: [String: String] = [:]
                for (k, v) in http.allHeaderFields {
                    if let k = k as? String, let v = v as? String { headers[k.lowercased()] = v }
                }
                continuation.yield(.head(status: http.statusCode, headers: headers))
            }
            completionHandler(.allow)
        }

        /// A bearer token never follows a redirect: the 3xx answer itself is the result.
        func urlSession(
            _ session: URLSession,
            task: URLSessionTask,
            willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest,
            completionHandler: @escaping (URLRequest?) -> Void
        ) {
            completionHandler(nil)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            continuation.yield(.bytes(data))
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
            if let error = error as? URLError {
                switch error.code {
                case .cancelled: continuation.yield(.failed(TransportError(.cancelled, "request cancelled")))
                case .timedOut: continuation.yield(.failed(TransportError(.timedOut, "\(host) stopped sending")))
                case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet:
                    continuation.yield(.failed(TransportError(.connectionFailed, "cannot reach \(host)")))
                case .networkConnectionLost:
                    continuation.yield(.failed(TransportError(.connectionFailed, "\(host) closed the connection")))
                default:
                    continuation.yield(
                        .failed(TransportError(.other, "request to \(host) failed (URLError \(error.code.rawValue))"))
                    )
                }
            } else if error != nil {
                continuation.yield(.failed(TransportError(.other, "request to \(host) failed")))
            } else {
                continuation.yield(.finished)
            }
            continuation.finish()
            session.finishTasksAndInvalidate()
        }
    }
}
