import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LanyardAuth
import LanyardCore
import LanyardSupport

// FoundationNetworking (with libcurl and ICU) adds about 10 ms to every process start, so it lives
// in this module alone: the `lanyard` binary leaves it out and hands commands that talk to a
// provider to `lanyard-net`, which links it.

/// HTTP over URLSession, with a timeout and a cap on the body size.
package final class URLSessionTransport: HTTPTransport, Sendable {
    /// Answers longer than this are refused (no provider answer is anywhere near it).
    package let maxBodyBytes: Int
    package let timeout: TimeInterval
    /// No request outlives this, whatever URLSession does: its resource timeout and a grace period.
    let hardLimit: TimeInterval
    private let created = Locked<URLSession?>(nil)

    package convenience init(timeout: TimeInterval = 30, maxBodyBytes: Int = 1 << 20) {
        self.init(timeout: timeout, maxBodyBytes: maxBodyBytes, hardLimit: timeout * 2 + 5)
    }

    init(timeout: TimeInterval, maxBodyBytes: Int, hardLimit: TimeInterval) {
        self.timeout = timeout
        self.maxBodyBytes = maxBodyBytes
        self.hardLimit = hardLimit
    }

    /// Made on first use: creating a URLSession costs milliseconds, and most commands never
    /// talk to a provider.
    private var session: URLSession {
        created.withLock { created in
            if let created { return created }
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = timeout
            configuration.timeoutIntervalForResource = timeout * 2
            configuration.httpCookieAcceptPolicy = .never
            configuration.httpCookieStorage = nil  // the shared one makes a folder in $XDG_DATA_HOME
            configuration.urlCache = nil
            let session = URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
            created = session
            return session
        }
    }

    package func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try HTTPHeaderRules.check(request.headers.map { ($0.key, $0.value) })
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        for (k, v) in request.headers { urlRequest.setValue(v, forHTTPHeaderField: k) }
        urlRequest.setValue("lanyard/\(LanyardAuth.version)", forHTTPHeaderField: "User-Agent")
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await boundedData(for: urlRequest)
        } catch is CancellationError {
            throw TransportError(.cancelled, "request cancelled")
        } catch let error as URLError {
            let host = request.url.host ?? "server"
            switch error.code {
            case .timedOut: throw TransportError(.timedOut, "\(host) did not answer in time")
            case .cancelled: throw TransportError(.cancelled, "request cancelled")
            case .cannotConnectToHost, .networkConnectionLost, .cannotFindHost, .notConnectedToInternet, .dnsLookupFailed:
                throw TransportError(.connectionFailed, "cannot reach \(host): \(error.localizedDescription)")
            default: throw TransportError(.other, "request to \(host) failed: \(error.localizedDescription)")
            }
        } catch {
            throw TransportError(.other, "request to \(request.url.host ?? "server") failed: \(error.localizedDescription)")
        }
        if Task.isCancelled { throw TransportError(.cancelled, "request cancelled") }
        guard let http = response as? HTTPURLResponse else { throw TransportError(.other, "not an HTTP response") }
        guard data.count <= maxBodyBytes else {
            throw TransportError(.tooLarge, "\(request.url.host ?? "server") sent \(data.count) bytes; the limit is \(maxBodyBytes)")
        }
        var headers: [String: String] = [:]
        for (k, v) in http.allHeaderFields {
            if let k = k as? String, let v = v as? String { headers[k.lowercased()] = v }
        }
        return HTTPResponse(status: http.statusCode, headers: headers, body: data)
    }
}

extension URLSessionTransport {
    /// URLSession's answer, or `URLError(.timedOut)` once `hardLimit` has passed, whatever
    /// URLSession does. Its own timeouts run on its internal queue; a
    /// completion lost inside swift-corelibs-foundation would otherwise leave the caller (a
    /// `login` waiting to store its tokens, a refresh holding a slot's lock) waiting forever.
    func boundedData(for request: URLRequest) async throws -> (Data, URLResponse) {
        let call = BoundedCall()
        let limit = hardLimit
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: request) { data, response, error in
                    if let data, let response { call.finish(.success((data, response))) }
                    else { call.finish(.failure(error ?? URLError(.badServerResponse))) }
                }
                guard call.start(continuation, task: task) else { return }
                task.resume()
                DispatchQueue.global().asyncAfter(deadline: .now() + limit) {
                    call.finish(.failure(URLError(.timedOut)))
                }
            }
        } onCancel: {
            call.finish(.failure(CancellationError()))
        }
    }
}

/// One request's continuation, resumed exactly once by whichever comes first: URLSession's
/// completion, the hard deadline or the caller's cancellation (which also cancels the task).
private final class BoundedCall: Sendable {
    private enum Phase {
        case waiting
        case running(CheckedContinuation<(Data, URLResponse), Error>, URLSessionDataTask)
        case done
    }
    private let phase = Locked<Phase>(.waiting)

    /// False when the call was cancelled before it started (the continuation is resumed here).
    func start(_ continuation: CheckedContinuation<(Data, URLResponse), Error>, task: URLSessionDataTask) -> Bool {
        let started = phase.withLock { phase -> Bool in
            guard case .waiting = phase else { return false }
            phase = .running(continuation, task)
            return true
        }
        if !started { continuation.resume(throwing: CancellationError()) }
        return started
    }

    func finish(_ result: Result<(Data, URLResponse), Error>) {
        let running = phase.withLock { phase -> (CheckedContinuation<(Data, URLResponse), Error>, URLSessionDataTask)? in
            defer { phase = .done }
            if case .running(let continuation, let task) = phase { return (continuation, task) }
            return nil
        }
        guard let (continuation, task) = running else { return }
        if case .failure = result { task.cancel() }
        continuation.resume(with: result)
    }
}

/// Provider requests carry bearer tokens and refresh tokens: they never follow a redirect, so a
/// token cannot be sent on to another origin (or over plain http). The 3xx answer is the result.
final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
