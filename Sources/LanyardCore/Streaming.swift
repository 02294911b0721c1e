import LanyardSupport

/// How a streaming request reaches the backend (the Chappie `StreamingTransportPolicy`): WebSocket
/// first, reconnecting after a dropped connection, then HTTP with server-sent events for the rest
/// of the client's life; or SSE only.
public struct StreamingTransportPolicy: Hashable, Sendable {
    /// Open a WebSocket first (lower first-token latency).
    public var prefersWebSocket: Bool
    /// Reconnections tried after a WebSocket drops mid-stream before giving up on WebSocket.
    public var maxWebSocketReconnectionAttempts: Int
    /// When WebSocket cannot recover (or the server refuses the upgrade), continue over HTTP/SSE.
    public var fallsBackToHTTPSSE: Bool

    public init(
        prefersWebSocket: Bool = true,
        maxWebSocketReconnectionAttempts: Int = 5,
        fallsBackToHTTPSSE: Bool = true
    ) {
        self.prefersWebSocket = prefersWebSocket
        self.maxWebSocketReconnectionAttempts = max(0, maxWebSocketReconnectionAttempts)
        self.fallsBackToHTTPSSE = fallsBackToHTTPSSE
    }

    /// WebSocket, 5 reconnections, then SSE.
    public static let `default` = StreamingTransportPolicy()
    /// SSE only: no socket is ever opened.
    public static let httpSSEOnly = StreamingTransportPolicy(
        prefersWebSocket: false,
        maxWebSocketReconnectionAttempts: 0,
        fallsBackToHTTPSSE: true
    )
}

/// The transport a stream is using.
public enum StreamTransport: String, Hashable, Sendable {
    case webSocket = "websocket"
    case httpSSE = "sse"
}

/// Token counts the backend reports for one response.
public struct ResponseUsage: Hashable, Sendable {
    public var inputTokens: Int
    public var outputTokens: Int
    public var totalTokens: Int

    public init(inputTokens: Int, outputTokens: Int, totalTokens: Int) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.totalTokens = totalTokens
    }
}

/// A response as the backend's final stream event describes it (`response.completed`, or
/// `response.failed` / `response.incomplete` in ``ClientError/responseTerminalFailure(_:)``).
public struct StreamResponse: Hashable, Sendable {
    public var id: String
    /// `completed`, `failed`, `incomplete`, …
    public var status: String
    public var model: String?
    /// The text of every `output_text` part of the output's messages, in order.
    public var outputText: String
    public var usage: ResponseUsage?
    /// The error the backend gave for a failed response.
    public var error: ServerErrorDetail?

    public init(
        id: String,
        status: String,
        model: String? = nil,
        outputText: String = "",
        usage: ResponseUsage? = nil,
        error: ServerErrorDetail? = nil
    ) {
        self.id = id
        self.status = status
        self.model = model
        self.outputText = outputText
        self.usage = usage
        self.error = error
    }
}

/// What a streaming request delivers, in order.
public enum StreamEvent: Hashable, Sendable {
    /// A connection is open and the request was sent; `reconnection` is 0 for the first connection
    /// and counts the reconnections (and a fallback to SSE) after it.
    case connected(StreamTransport, reconnection: Int)
    /// The backend accepted the request (`response.created`); sent once per stream.
    case created(responseID: String)
    /// The next piece of output text, never repeated after a reconnect.
    case textDelta(String)
    /// The whole output text of one message part (`response.output_text.done`).
    case textDone(String)
    /// The last event: the response as the backend completed it.
    case completed(StreamResponse)
}

/// The Codex Responses request a stream sends.
public struct ResponseRequest: Sendable {
    public var model: String
    public var instructions: String?
    /// The conversation items (`input`), in the Responses API's shape.
    public var input: [JSONValue]

    /// A request with one user message.
    public init(prompt: String, model: String, instructions: String? = nil) {
        self.model = model
        self.instructions = instructions
        self.input = [
            .object([
                "type": .string("message"), "role": .string("user"),
                "content": .array([.object(["type": .string("input_text"), "text": .string(prompt)])]),
            ])
        ]
    }

    public init(model: String, instructions: String? = nil, input: [JSONValue]) {
        self.model = model
        self.instructions = instructions
        self.input = input
    }

    /// The JSON body: the HTTP request's, or the WebSocket's `response.create` message.
    public func body(for transport: StreamTransport) -> [UInt8] {
        var object: [String: JSONValue] = [
            "model": .string(model), "input": .array(input), "store": .bool(false), "stream": .bool(true),
        ]
        if let instructions { object["instructions"] = .string(instructions) }
        if transport == .webSocket { object["type"] = .string("response.create") }
        return Array(JSONValue.object(object).serialized().utf8)
    }
}

/// The events of one streaming response, for `for try await`. Cancelling the consuming task, or
/// dropping the iteration, stops the request and closes its connection; a cancelled iteration
/// ends by throwing `CancellationError`, also when the cancellation comes between two events.
public struct ResponseStream: AsyncSequence, Sendable {
    public typealias Element = StreamEvent
    public typealias Failure = any Error

    let events: AsyncThrowingStream<StreamEvent, Error>
    let stop: @Sendable () -> Void

    /// `events` from a producer that `stop` cancels.
    public init(_ events: AsyncThrowingStream<StreamEvent, Error>, stop: @escaping @Sendable () -> Void) {
        self.events = events
        self.stop = stop
    }

    public func makeAsyncIterator() -> Iterator { Iterator(base: events.makeAsyncIterator(), stop: stop) }

    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<StreamEvent, Error>.Iterator
        let stop: @Sendable () -> Void
        var completed = false
        var ended = false

        public mutating func next() async throws -> StreamEvent? {
            guard !ended else { return nil }
            // AsyncThrowingStream ends quietly when its consumer is cancelled; a stream of a
            // response says so instead, so a half-delivered reply is never mistaken for a whole one.
            if Task.isCancelled && !completed { return try cancelled() }
            let event: StreamEvent?
            do { event = try await base.next() } catch {
                ended = true
                throw error
            }
            switch event {
            case .completed?: completed = true
            case nil:
                if Task.isCancelled && !completed { return try cancelled() }
                ended = true
            default: break
            }
            return event
        }

        private mutating func cancelled() throws -> StreamEvent? {
            ended = true
            stop()
            throw CancellationError()
        }
    }
}
