import Foundation
import LanyardCore
import LanyardTestSupport
import Testing

@testable import LanyardKit

/// `Client.stream` against the ChatGPT emulator's streaming endpoint (Flask + flask-sock) over
/// both transports, with the server's scripted faults (`/_test/stream`).
struct StreamHome {
    let env: KitHome
    let client: Client
    static let email = "stream@example.com"

    init(extraConfig: String = "", policy: StreamingTransportPolicy? = nil) async throws {
        env = try KitHome(extraConfig: extraConfig)
        try await env.server.hook("/_test/config", ["interval": 0])
        let manager = try env.configuration(slot: "s").makeManager()
        try await env.server.signIn(manager, slot: "s", email: Self.email)
        var configuration = env.configuration(slot: "s")
        configuration.streamingTransportPolicy = policy
        client = try Client(configuration: configuration)
    }

    var server: OAuthTestServer { env.server }

    func script(_ steps: [[String: Any]]) async throws { try await server.hook("/_test/stream", ["script": steps]) }
    func streamStat(_ key: String) async throws -> Int { try await server.stat("stream.\(key)") }

    static func reply(to prompt: String) -> String { "Hello \(email). You said: \(prompt)" }
}

/// The events of one stream, and how it ended.
struct Collected {
    var events: [StreamEvent] = []
    var error: Error?

    var text: String {
        events.reduce(into: "") { if case .textDelta(let d) = $1 { $0 += d } }
    }
    var connections: [StreamEvent] {
        events.filter {
            if case .connected = $0 { return true }
            return false
        }
    }
    var completed: StreamResponse? {
        for case .completed(let r) in events { return r }
        return nil
    }

    init(_ stream: ResponseStream) async {
        do { for try await event in stream { events.append(event) } } catch { self.error = error }
    }
}

/// The two transports, as policies that use only one of them.
enum Transport: String, CaseIterable, CustomStringConvertible {
    case webSocket = "websocket"
    case sse
    var description: String { rawValue }
    /// WebSocket without fallback, so a test of it never quietly passes over SSE.
    var policy: StreamingTransportPolicy {
        self == .webSocket
            ? StreamingTransportPolicy(
                prefersWebSocket: true,
                maxWebSocketReconnectionAttempts: 5,
                fallsBackToHTTPSSE: false
            )
            : .httpSSEOnly
    }
    var kind: StreamTransport { self == .webSocket ? .webSocket : .httpSSE }
}

@Suite(.serialized) struct StreamingTests {
    @Test func thePoliciesAreTheSeedsTable() {
        #expect(
            StreamingTransportPolicy.default
                == StreamingTransportPolicy(
                    prefersWebSocket: true,
                    maxWebSocketReconnectionAttempts: 5,
                    fallsBackToHTTPSSE: true
                )
        )
        #expect(
            StreamingTransportPolicy.httpSSEOnly
                == StreamingTransportPolicy(
                    prefersWebSocket: false,
                    maxWebSocketReconnectionAttempts: 0,
                    fallsBackToHTTPSSE: true
                )
        )
        #expect(LanyardConfig().streaming == .default)
    }

    @Test(arguments: Transport.allCases) func streamsTheReply(_ transport: Transport) async throws {
        let home = try await StreamHome(policy: transport.policy)
        let result = await Collected(home.client.stream("tell me ünïcode 😀 things", model: "test-model"))
        #expect(result.error == nil, "\(String(describing: result.error))")
        let expected = StreamHome.reply(to: "tell me ünïcode 😀 things")
        #expect(result.text == expected)
        #expect(result.completed?.outputText == expected)
        #expect(result.completed?.status == "completed")
        #expect(result.completed?.model == "test-model")
        #expect(result.connections == [.connected(transport.kind, reconnection: 0)])
        #expect(
            result.events.filter {
                if case .created = $0 { return true }
                return false
            }.count == 1
        )
        #expect(try await home.streamStat("ws_connections") == (transport == .webSocket ? 1 : 0))
        #expect(try await home.streamStat("sse_requests") == (transport == .sse ? 1 : 0))
    }

    @Test func httpSSEOnlyNeverOpensASocket() async throws {
        let home = try await StreamHome(policy: .httpSSEOnly)
        for _ in 0..<2 { #expect(await Collected(home.client.stream("hi")).error == nil) }
        #expect(try await home.streamStat("ws_upgrade_attempts") == 0)
        #expect(try await home.streamStat("sse_requests") == 2)
    }

    @Test func configChoosesTheTransport() async throws {
        let home = try await StreamHome(extraConfig: "[stream]\ntransport = sse\nmodel = from-config")
        #expect(home.client.streamingTransportPolicy == .httpSSEOnly)
        let result = await Collected(home.client.stream("hi"))
        #expect(result.completed?.model == "from-config")
        #expect(try await home.streamStat("ws_upgrade_attempts") == 0)
    }

    @Test(arguments: Transport.allCases) func aDropReconnectsAndTheReplayIsNotDeliveredTwice(
        _ transport: Transport
    ) async throws {
        let home = try await StreamHome(policy: transport.policy)
        // The first connection drops after 6 events; the second replays with other boundaries.
        try await home.script([
            ["transport": transport.rawValue, "drop_after": 6, "chunk": 3],
            ["transport": transport.rawValue, "chunk": 7],
        ])
        let prompt = "a prompt long enough to need several deltas"
        let result = await Collected(home.client.stream(prompt))
        #expect(result.error == nil, "\(String(describing: result.error))")
        #expect(result.text == StreamHome.reply(to: prompt))
        #expect(
            result.connections == [
                .connected(transport.kind, reconnection: 0), .connected(transport.kind, reconnection: 1),
            ]
        )
        let deltas = result.events.compactMap {
            if case .textDelta(let d) = $0 { return d }
            return nil
        }
        #expect(!deltas.contains(""))
    }

    @Test func theDefaultPolicyReconnectsFiveTimesThenFallsBackForTheRestOfTheSession() async throws {
        let home = try await StreamHome()
        try await home.script(Array(repeating: ["transport": "websocket", "drop_after": 3], count: 6))
        let result = await Collected(home.client.stream("fall back please"))
        #expect(result.error == nil, "\(String(describing: result.error))")
        #expect(result.text == StreamHome.reply(to: "fall back please"))
        #expect(try await home.streamStat("ws_connections") == 6)  // the first and 5 reconnections
        #expect(try await home.streamStat("sse_requests") == 1)
        #expect(result.connections.last == .connected(.httpSSE, reconnection: 6))
        #expect(home.client.hasFallenBackToHTTPSSE)
        // The fallback is remembered: the next stream does not try WebSocket again.
        #expect(await Collected(home.client.stream("again")).error == nil)
        #expect(try await home.streamStat("ws_upgrade_attempts") == 6)
        #expect(try await home.streamStat("sse_requests") == 2)
    }

    @Test func aRefusedUpgradeFallsBackAtOnce() async throws {
        let home = try await StreamHome()
        try await home.script([["transport": "websocket", "refuse_upgrade": 426]])
        let result = await Collected(home.client.stream("hi"))
        #expect(result.error == nil, "\(String(describing: result.error))")
        #expect(result.connections == [.connected(.httpSSE, reconnection: 0)])
        #expect(try await home.streamStat("ws_upgrade_attempts") == 1)
        #expect(try await home.streamStat("ws_upgrades_refused") == 1)
        #expect(home.client.hasFallenBackToHTTPSSE)
    }

    @Test func withoutFallbackTheLastDropIsTheError() async throws {
        let policy = StreamingTransportPolicy(
            prefersWebSocket: true,
            maxWebSocketReconnectionAttempts: 1,
            fallsBackToHTTPSSE: false
        )
        let home = try await StreamHome(policy: policy)
        try await home.script(Array(repeating: ["transport": "websocket", "drop_after": 2], count: 2))
        let result = await Collected(home.client.stream("hi"))
        guard case ClientError.networkFailure(let message)? = result.error else {
            Issue.record("got \(String(describing: result.error))")
            return
        }
        #expect(message.contains("failed 2 times"))
        #expect(try await home.streamStat("sse_requests") == 0)
    }

    @Test(arguments: Transport.allCases) func aDivergingReplayStopsWithWhatWasDelivered(
        _ transport: Transport
    ) async throws {
        let home = try await StreamHome(policy: transport.policy)
        try await home.script([
            ["transport": transport.rawValue, "drop_after": 5, "chunk": 4],
            ["transport": transport.rawValue, "text": "Hello someone else entirely, this differs"],
        ])
        let result = await Collected(home.client.stream("hi"))
        guard case ClientError.streamingTransportReplayDiverged(let partial)? = result.error else {
            Issue.record("got \(String(describing: result.error))")
            return
        }
        // Events: created, then deltas 2…5 (4 characters each) before the drop.
        #expect(partial == String(StreamHome.reply(to: "hi").prefix(16)))
        #expect(result.text == partial)
        #expect(result.completed == nil)
    }

    @Test(arguments: Transport.allCases) func eventsArriveWhileTheServerIsStillSending(
        _ transport: Transport
    ) async throws {
        let home = try await StreamHome(policy: transport.policy)
        // The server stops after two events (created, the first delta) until the test releases
        // it, so the first delta can only have come through if nothing waited for the whole body.
        try await home.script([["transport": transport.rawValue, "chunk": 40, "gate_after": 2]])
        var completedWhenFirstDeltaArrived: Int?
        var text = ""
        for try await event in home.client.stream("drip") {
            if case .textDelta(let d) = event {
                if completedWhenFirstDeltaArrived == nil {
                    completedWhenFirstDeltaArrived = try await home.streamStat("completed")
                    try await home.server.hook("/_test/stream", ["release": true])
                }
                text += d
            }
        }
        #expect(completedWhenFirstDeltaArrived == 0)
        #expect(text == StreamHome.reply(to: "drip"))
    }

    @Test(arguments: Transport.allCases) func aUsageLimitIsTheTypedErrorWithPlanAndReset(
        _ transport: Transport
    ) async throws {
        let home = try await StreamHome(policy: transport.policy)
        try await home.server.hook("/_test/usage_limit", ["resets_in_seconds": 120, "count": 1])
        let result = await Collected(home.client.stream("hi"))
        guard case ClientError.usageLimitReached(let limit)? = result.error else {
            Issue.record("got \(String(describing: result.error))")
            return
        }
        #expect(limit.plan == Plan(rawValue: "plus"))
        #expect(limit.resetsAt != nil)
        #expect(try await home.streamStat("usage_limited") == 1)
    }

    @Test(arguments: Transport.allCases) func a401IsFixedByOneRefresh(_ transport: Transport) async throws {
        let home = try await StreamHome(policy: transport.policy)
        try await home.server.hook("/_test/expire_access", ["all": true])
        let result = await Collected(home.client.stream("after refresh"))
        #expect(result.error == nil, "\(String(describing: result.error))")
        #expect(result.text == StreamHome.reply(to: "after refresh"))
        #expect(try await home.server.stat("refreshes_succeeded") == 1)
        #expect(try await home.streamStat("unauthorized") == 1)
    }

    @Test func otherRateLimitsBackOffAndRetry() async throws {
        let home = try await StreamHome(extraConfig: "[backoff]\ninitial-delay = 0.05", policy: .httpSSEOnly)
        try await home.script([
            [
                "transport": "sse", "status": 429, "retry_after": 0,
                "body": ["error": ["type": "rate_limit_exceeded", "message": "slow down"]],
            ]
        ])
        let result = await Collected(home.client.stream("hi"))
        #expect(result.error == nil, "\(String(describing: result.error))")
        #expect(try await home.streamStat("sse_requests") == 2)
    }

    @Test(arguments: Transport.allCases) func unknownEventTypesAreSkipped(_ transport: Transport) async throws {
        let home = try await StreamHome(policy: transport.policy)
        try await home.script([["transport": transport.rawValue, "unknown_after": 2]])
        let result = await Collected(home.client.stream("hi"))
        #expect(result.error == nil)
        #expect(result.text == StreamHome.reply(to: "hi"))
    }

    /// Bad input from the server is a typed error naming what was wrong, and the slot keeps its
    /// credential.
    @Test(
        arguments: [
            (Transport.webSocket, ["malformed_after": 2], "WebSocket message 3 is not valid JSON"),
            (Transport.sse, ["malformed_after": 2], "event 3 (response.output_text.delta) is not valid JSON"),
            (Transport.webSocket, ["oversize_after": 2], "a WebSocket message is larger than the 10 MB limit"),
            (Transport.sse, ["oversize_after": 2], "a server-sent event is larger than the 10 MB limit"),
            (Transport.webSocket, ["binary_after": 2], "WebSocket message 3 is binary"),
        ] as [(Transport, [String: Int], String)]
    )
    func badInputIsATypedErrorAndTheCredentialStays(
        _ transport: Transport,
        _ fault: [String: Int],
        _ message: String
    ) async throws {
        let home = try await StreamHome(policy: transport.policy)
        let before = try await home.client.accessToken()
        var step: [String: Any] = fault
        step["transport"] = transport.rawValue
        try await home.script([step])
        let result = await Collected(home.client.stream("hi"))
        guard case ClientError.invalidResponse(let what)? = result.error else {
            Issue.record("got \(String(describing: result.error))")
            return
        }
        #expect(what.hasPrefix(message), "\(what)")
        #expect(try await home.client.accessToken() == before)
        #expect(try home.env.home.run("status", "s").status == 0)
    }

    /// One test for both transports, one after the other, in a process of its own: sockets and
    /// threads are counted process-wide.
    @Test func cancellingClosesTheConnectionPromptlyAndLeavesNothingBehind() async throws {
        try await inProcessOfItsOwn("StreamingTests/cancellingClosesTheConnectionPromptlyAndLeavesNothingBehind") {
            try await cancellationLeavesNothingBehind(.webSocket)
            try await cancellationLeavesNothingBehind(.sse)
        }
    }

    /// Cancels a stream while the server holds it open: the iteration throws CancellationError
    /// (not the timeout's error: without the cancellation it would wait for that), the server sees the connection
    /// close, and no socket or WebSocket thread stays.
    func cancellationLeavesNothingBehind(_ transport: Transport) async throws {
        let home = try await StreamHome(policy: transport.policy)
        // Warm up: libraries and URLSession set themselves up once per process.
        #expect(await Collected(home.client.stream("warm up")).error == nil)
        try await home.script([["transport": transport.rawValue, "drop_after": 3, "hold": true]])
        let socketsBefore = openSockets()

        let firstDelta = AsyncStream<Void>.makeStream()
        let client = home.client
        let consumer = Task { () -> Error? in
            do {
                for try await event in client.stream("hold on") {
                    if case .textDelta = event { firstDelta.continuation.yield() }
                }
                return nil
            } catch { return error }
        }
        for await _ in firstDelta.stream { break }
        #expect(!openSockets().subtracting(socketsBefore).isEmpty)  // the stream's connection is open
        consumer.cancel()
        // The server holds the stream open and sends nothing more: only the cancellation can end
        // it with CancellationError (the stream's own timeout ends it as dropped, and much later),
        // so the error's type says it ended on the cancellation, with no bet on the clock.
        let error = await consumer.value
        #expect(error is CancellationError, "\(String(describing: error))")

        // The server sees the connection go; no socket or WebSocket thread stays here.
        try await eventually("the server sees the stream's connection closed") {
            try await home.streamStat("open_connections")
        } until: {
            $0 == 0
        }
        try await eventually("no socket or WebSocket thread left") {
            (leftOpen: openSockets().subtracting(socketsBefore), threads: threadNames())
        } until: {
            $0.leftOpen.isEmpty && !$0.threads.contains("lanyard-websock")
        }
        #expect(openSockets().isSubset(of: socketsBefore), "left open: \(openSockets().subtracting(socketsBefore))")
        #expect(!threadNames().contains("lanyard-websock"))
    }
}

/// This process's sockets (inode links of /proc/self/fd).
func openSockets() -> Set<String> {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return Set(
        names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") }.filter {
            $0.hasPrefix("socket:")
        }
    )
}

/// The names of this process's threads (at most 15 characters each, as the kernel keeps them).
func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap {
        try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8).trimmingCharacters(in: .newlines)
    }
}
