import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardStore

/// Makes requests as one slot's account: a fresh bearer token (refreshed before expiry, one
/// refresh per slot across processes), the `ChatGPT-Account-Id` header, one refresh and retry on
/// 401, backoff on 429, and failures as ``ClientError`` (`usageLimitReached`,
/// `reauthenticationRequired`, `httpError(status, detail)`, `invalidResponse`, …).
public final class Client: Sendable {
    let manager: AccountManager
    /// The slot this client acts as.
    public let slot: Slot
    /// Remembers a fallback to SSE for the rest of this client's life.
    let streamingSession = StreamingSession()

    /// The policy streams use unless a call gives another (from ``Configuration``, else config.ini).
    public var streamingTransportPolicy: StreamingTransportPolicy { manager.config.streaming }
    /// True once WebSocket failed for good and this client's streams use SSE.
    public var hasFallenBackToHTTPSSE: Bool { streamingSession.hasFallenBackToHTTPSSE }

    /// A client for the slot `configuration` names (or resolves).
    /// - Throws: `RegistryError.noActiveSlot` when no slot is named and none is active.
    public init(configuration: Configuration = Configuration()) throws {
        let (manager, slot) = try configuration.resolve()
        guard let slot else { throw RegistryError.noActiveSlot }
        self.manager = manager
        self.slot = slot
    }

    /// A valid access token, refreshed first when due.
    public func accessToken() async throws -> String {
        try await manager.freshCredential(slot: slot).tokens.accessToken
    }

    /// The slot's usage windows.
    public func usage() async throws -> UsageReport { try await manager.usage(slot: slot) }

    /// Sends `request` as the slot's account.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await manager.authorizedSend(request, slot: slot)
    }

    /// Sends a Foundation `request` as the slot's account.
    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let converted = try HTTPRequest(request)
        let response = try await send(converted)
        return (response.body, try response.urlResponse(for: converted.url))
    }

    /// Streams the reply to `prompt` as the slot's account (the Codex Responses API): text deltas as
    /// they arrive, then the completed response. Over WebSocket first unless `policy` (or the
    /// configuration's) says otherwise, reconnecting and falling back to SSE as the policy allows;
    /// replayed text is never delivered twice.
    ///
    /// Throws (from the iteration) ``ClientError`` — `usageLimitReached`,
    /// `reauthenticationRequired`, `streamingTransportReplayDiverged(partialText)`,
    /// `responseTerminalFailure`, `httpError`, `invalidResponse`, `networkFailure` — or
    /// `CancellationError` when the consuming task is cancelled (which closes the connection).
    public func stream(
        _ prompt: String,
        model: String? = nil,
        instructions: String? = nil,
        policy: StreamingTransportPolicy? = nil
    ) -> ResponseStream {
        stream(
            ResponseRequest(prompt: prompt, model: model ?? manager.config.streamModel, instructions: instructions),
            policy: policy
        )
    }

    /// Streams any Responses request (several input items, instructions) as the slot's account.
    public func stream(_ request: ResponseRequest, policy: StreamingTransportPolicy? = nil) -> ResponseStream {
        ResponseStreamer(
            manager: manager,
            slot: slot,
            session: streamingSession,
            policy: policy ?? manager.config.streaming
        )
        .stream(request)
    }
}
