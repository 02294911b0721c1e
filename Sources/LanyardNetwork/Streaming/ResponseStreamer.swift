import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a client remembers between its streams: once WebSocket has failed for good (every
/// reconnection used, or the server refused the upgrade), later streams go straight to SSE.
package final class StreamingSession: Sendable {
    private let fellBack = Locked(false)

    package init() {}

    /// True once this session has given up on WebSocket.
    package var hasFallenBackToHTTPSSE: Bool { fellBack.withLock { $0 } }

    func fallBack() { fellBack.withLock { $0 = true } }
}

/// Streams one Codex Responses request as a slot's account, following a
/// ``StreamingTransportPolicy``: a fresh bearer token (one refresh and retry after a 401), the
/// usage-limit error for a 429 `usage_limit_reached`, backoff for other 429s, WebSocket
/// reconnections and the fallback to SSE, and replayed text delivered exactly once.
package struct ResponseStreamer: Sendable {
    package let manager: AccountManager
    package let slot: Slot
    package let session: StreamingSession
    package let policy: StreamingTransportPolicy
    /// The longest wait for a connection, and between two events.
    package var timeout: TimeInterval
    /// The cap on one event or WebSocket message.
    package var maxEventBytes = ServerSentEventParser.defaultMaxEventBytes
    /// A PEM file of extra trusted certificates for WebSocket TLS (tests); nil uses the system's.
    package var webSocketCAFile: String?
    /// SSE streams that end early are resumed this many times (the server's `retry:` apart).
    package static let sseReconnectionAttempts = 3
    /// The most of an error answer's body (a non-2xx status) an SSE request reads.
    static let maxErrorBodyBytes = 1 << 20

    package init(
        manager: AccountManager,
        slot: Slot,
        session: StreamingSession,
        policy: StreamingTransportPolicy,
        timeout: TimeInterval? = nil
    ) {
        self.manager = manager
        self.slot = slot
        self.session = session
        self.policy = policy
        self.timeout = timeout ?? manager.config.httpTimeout
    }

    /// The events of `request`'s response. Cancelling the consuming task (or ending its loop)
    /// closes the connection; the iteration then throws `CancellationError`.
    package func stream(_ request: ResponseRequest) -> ResponseStream {
        let (events, continuation) = AsyncThrowingStream<StreamEvent, Error>.makeStream()
        let task = Task {
            do {
                try await run(request, emit: { continuation.yield($0) })
                continuation.finish()
            } catch {
                continuation.finish(throwing: Task.isCancelled ? CancellationError() : error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return ResponseStream(events, stop: { task.cancel() })
    }

    // MARK: - The policy

    /// How one connection ended, when it did not complete the response.
    enum Interruption {
        case unauthorized
        case rateLimited(retryAfter: TimeInterval?, detail: ServerErrorDetail)
        /// The server answered the WebSocket upgrade with this status.
        case upgradeRefused(Int)
        /// The connection failed or ended before `response.completed`.
        case dropped(String)
    }

    /// The per-stream state the connections share.
    struct Progress {
        var replay = ReplayGuard()
        var sentCreated = false
        var connections = 0
        var lastEventID: String?
        var retryMilliseconds: Int?
    }

    func run(_ request: ResponseRequest, emit: @escaping @Sendable (StreamEvent) -> Void) async throws {
        let record = try manager.record(of: slot)
        guard let base = manager.config.providers[record.provider]?.usageBaseURL else {
            throw ClientError.invalidResponse(
                "\(slot.name)'s provider \(record.provider) has no ChatGPT backend to stream from "
                    + "(set usage-base-url in [provider.\(record.provider)])"
            )
        }
        var baseText = base.absoluteString
        while baseText.hasSuffix("/") { baseText.removeLast() }
        guard let endpoint = URL(string: baseText + "/backend-api/codex/responses") else {
            throw ClientError.invalidResponse("cannot build the responses URL from \(baseText)")
        }
        var credential = try await manager.freshCredential(slot: slot)
        var refreshed = false
        var transport: StreamTransport =
            policy.prefersWebSocket && !session.hasFallenBackToHTTPSSE ? .webSocket : .httpSSE
        var webSocketReconnections = 0
        var sseReconnections = 0
        var rateLimitRetries = 0
        var progress = Progress()

        while true {
            try Task.checkCancellation()
            let interruption: Interruption?
            switch transport {
            case .webSocket:
                interruption = try await webSocketAttempt(
                    request,
                    endpoint: endpoint,
                    credential: credential,
                    progress: &progress,
                    emit: emit
                )
            case .httpSSE:
                interruption = try await sseAttempt(
                    request,
                    endpoint: endpoint,
                    credential: credential,
                    progress: &progress,
                    emit: emit
                )
            }
            guard let interruption else { return }
            switch interruption {
            case .unauthorized:
                if refreshed {
                    throw ClientError.reauthenticationRequired(
                        slot: slot.name,
                        reason: "the server refused a freshly refreshed token"
                    )
                }
                credential = try await manager.freshCredential(slot: slot, force: true)
                refreshed = true
            case .rateLimited(let retryAfter, let detail):
                if let delay = manager.config.backoff.delay(
                    beforeRetry: rateLimitRetries,
                    retryAfter: retryAfter,
                    unitRandom: Double.random(in: 0..<1)
                ) {
                    rateLimitRetries += 1
                    try await manager.sleeper.sleep(seconds: delay)
                } else if transport == .webSocket && policy.fallsBackToHTTPSSE {
                    // The upgrade's answer has no body to read a usage limit from; SSE's has.
                    transport = .httpSSE
                } else {
                    throw ClientError.httpError(status: 429, detail: detail)
                }
            case .upgradeRefused(let status):
                guard policy.fallsBackToHTTPSSE else {
                    throw ClientError.httpError(
                        status: status,
                        detail: ServerErrorDetail(
                            code: "websocket_refused",
                            message: "the server refused the WebSocket upgrade and the policy does not fall back to SSE"
                        )
                    )
                }
                session.fallBack()
                transport = .httpSSE
            case .dropped(let reason):
                if transport == .webSocket {
                    if webSocketReconnections < policy.maxWebSocketReconnectionAttempts {
                        // Immediately the first time, then 0.1, 0.2, 0.4 … s (capped at 1 s).
                        if webSocketReconnections > 0 {
                            try await manager.sleeper.sleep(
                                seconds: min(1, 0.1 * pow(2, Double(webSocketReconnections - 1)))
                            )
                        }
                        webSocketReconnections += 1
                    } else if policy.fallsBackToHTTPSSE {
                        session.fallBack()
                        transport = .httpSSE
                    } else {
                        throw ClientError.networkFailure(
                            "the WebSocket connection failed \(webSocketReconnections + 1) times; last: \(reason)"
                        )
                    }
                } else {
                    guard sseReconnections < Self.sseReconnectionAttempts else {
                        throw ClientError.networkFailure(
                            "the event stream failed \(sseReconnections + 1) times; last: \(reason)"
                        )
                    }
                    sseReconnections += 1
                    try await manager.sleeper.sleep(seconds: min(5, Double(progress.retryMilliseconds ?? 1000) / 1000))
                }
            }
            progress.replay.beginReplay()
        }
    }

    /// Hands one backend event to the caller; true when it completed the response.
    func deliver(
        _ event: BackendEvent,
        progress: inout Progress,
        headers: [String: String],
        secrets: [String],
        emit: (StreamEvent) -> Void
    ) throws -> (completed: Bool, interruption: Interruption?) {
        switch event {
        case .created(let id):
            if !progress.sentCreated {
                progress.sentCreated = true
                emit(.created(responseID: id))
            }
        case .textDelta(let delta):
            if let fresh = try progress.replay.accept(delta) { emit(.textDelta(fresh)) }
        case .textDone(let text):
            if !progress.replay.isReplaying { emit(.textDone(text)) }
        case .completed(let response):
            try progress.replay.finish()
            emit(.completed(response))
            return (true, nil)
        case .terminalFailure(let response):
            throw ClientError.responseTerminalFailure(response)
        case .error(let status, let body):
            return (false, try interruption(status: status ?? 500, body: body, headers: headers, secrets: secrets))
        case .ignored:
            break
        }
        return (false, nil)
    }

    /// The interruption an error status stands for, or the error it ends the stream with.
    /// `secrets` (the tokens the request carried) are removed from the server's error text.
    func interruption(status: Int, body: Data, headers: [String: String], secrets: [String]) throws -> Interruption {
        if let limit = UsageParser.limit(
            status: status,
            body: body,
            headers: headers,
            now: manager.clock.now(),
            redacting: secrets
        ) {
            manager.recordUsageLimit(limit, slot: slot)
            throw ClientError.usageLimitReached(limit)
        }
        switch status {
        case 401: return .unauthorized
        case 429:
            let retryAfter = headers["retry-after"].flatMap {
                BackoffPolicy.retryAfterSeconds($0, now: manager.clock.now())
            }
            return .rateLimited(retryAfter: retryAfter, detail: ServerErrorDetail(body: body, redacting: secrets))
        default: throw ClientError.httpError(status: status, detail: ServerErrorDetail(body: body, redacting: secrets))
        }
    }

    func headers(_ credential: Credential) throws(ClientError) -> [(String, String)] {
        try credential.authorizationHeaders() + [("User-Agent", "lanyard/\(LanyardAuth.version)")]
    }

    // MARK: - WebSocket

    func webSocketAttempt(
        _ request: ResponseRequest,
        endpoint: URL,
        credential: Credential,
        progress: inout Progress,
        emit: @escaping @Sendable (StreamEvent) -> Void
    ) async throws -> Interruption? {
        var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false)!
        components.scheme = endpoint.scheme == "https" ? "wss" : "ws"
        let options = WebSocketChannel.Options(
            url: components.url!,
            headers: try headers(credential),
            firstMessage: request.body(for: .webSocket),
            maxMessageBytes: maxEventBytes,
            timeout: timeout,
            caFile: webSocketCAFile
        )
        var index = 0
        for await event in WebSocketChannel.open(options) {
            switch event {
            case .opened:
                emit(.connected(.webSocket, reconnection: progress.connections))
                progress.connections += 1
            case .message(let bytes, let binary):
                index += 1
                guard !binary else {
                    throw ClientError.invalidResponse(
                        "WebSocket message \(index) is binary; the backend sends JSON text"
                    )
                }
                let decoded = try BackendEvent.decode(bytes, place: "WebSocket message \(index)")
                let (completed, interruption) = try deliver(
                    decoded,
                    progress: &progress,
                    headers: [:],
                    secrets: credential.tokens.secrets,
                    emit: emit
                )
                if completed { return nil }
                if let interruption { return interruption }
            case .refused(let status):
                if status == 401 { return .unauthorized }
                if status == 429 {
                    return .rateLimited(retryAfter: nil, detail: ServerErrorDetail(code: "rate_limited", message: nil))
                }
                return .upgradeRefused(status)
            case .failed(let reason):
                try Task.checkCancellation()
                return .dropped(reason)
            case .closed(let code):
                return .dropped("the server closed the connection (code \(code)) before the response completed")
            case .dropped:
                return .dropped("the connection ended before the response completed")
            case .timedOut:
                return .dropped("no event for \(Int(timeout)) s")
            case .tooLarge:
                throw ClientError.invalidResponse(
                    "a WebSocket message is larger than the \(maxEventBytes / (1 << 20)) MB limit"
                )
            case .unavailable(let reason):
                guard policy.fallsBackToHTTPSSE else { throw ClientError.networkFailure(reason) }
                return .upgradeRefused(0)
            }
        }
        try Task.checkCancellation()
        return .dropped("the connection ended")
    }

    // MARK: - HTTP with server-sent events

    func sseAttempt(
        _ request: ResponseRequest,
        endpoint: URL,
        credential: Credential,
        progress: inout Progress,
        emit: @escaping @Sendable (StreamEvent) -> Void
    ) async throws -> Interruption? {
        var urlRequest = URLRequest(url: endpoint)
        urlRequest.httpMethod = "POST"
        urlRequest.httpBody = Data(request.body(for: .httpSSE))
        urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        urlRequest.setValue("text/event-stream", forHTTPHeaderField: "Accept")
        for (name, value) in try headers(credential) { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if let id = progress.lastEventID {
            try HTTPHeaderRules.check("Last-Event-ID", id)
            urlRequest.setValue(id, forHTTPHeaderField: "Last-Event-ID")
        }

        var parser = ServerSentEventParser(maxEventBytes: maxEventBytes)
        var status = 0
        var responseHeaders: [String: String] = [:]
        var errorBody = Data()
        var index = 0
        for await event in EventStreamChannel.open(urlRequest, timeout: timeout) {
            switch event {
            case .head(let s, let h):
                status = s
                responseHeaders = h
                if (200..<300).contains(s) {
                    emit(.connected(.httpSSE, reconnection: progress.connections))
                    progress.connections += 1
                }
            case .bytes(let data):
                guard (200..<300).contains(status) else {
                    // An error answer is read up to 1 MiB (all its detail a message uses); past
                    // that the transfer stops (leaving the loop cancels it) instead of draining
                    // whatever the server goes on sending.
                    errorBody.append(data.prefix(Self.maxErrorBodyBytes - errorBody.count))
                    if errorBody.count >= Self.maxErrorBodyBytes {
                        return try interruption(
                            status: status,
                            body: errorBody,
                            headers: responseHeaders,
                            secrets: credential.tokens.secrets
                        )
                    }
                    continue
                }
                for sse in try parser.feed(data) {
                    index += 1
                    progress.lastEventID = sse.lastEventID
                    let decoded = try BackendEvent.decode(
                        sse.data,
                        place: "event \(index) (\(TerminalText.escaped(String(sse.type.prefix(64)))))"
                    )
                    let (completed, interruption) = try deliver(
                        decoded,
                        progress: &progress,
                        headers: responseHeaders,
                        secrets: credential.tokens.secrets,
                        emit: emit
                    )
                    if completed { return nil }
                    if let interruption { return interruption }
                }
                progress.retryMilliseconds = parser.retryMilliseconds
            case .finished:
                guard (200..<300).contains(status) else {
                    return try interruption(
                        status: status,
                        body: errorBody,
                        headers: responseHeaders,
                        secrets: credential.tokens.secrets
                    )
                }
                return .dropped("the event stream ended before response.completed")
            case .failed(let error):
                try Task.checkCancellation()
                if status != 0, !(200..<300).contains(status) {
                    return try interruption(
                        status: status,
                        body: errorBody,
                        headers: responseHeaders,
                        secrets: credential.tokens.secrets
                    )
                }
                return .dropped(error.message)
            }
        }
        try Task.checkCancellation()
        return .dropped("the event stream ended")
    }
}
