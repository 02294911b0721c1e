import Foundation
import LanyardCore
import LanyardSupport
import LanyardTestSupport
import Testing

// `lanyard ask` as a real process (`lanyard` hands it to `lanyard-net`) against the emulator's
// streaming endpoint, over both transports.

@Suite struct AskCommandTests {
    static let email = "ask@example.com"

    func home(_ extraConfig: String = "") async throws -> IntegrationHome {
        let env = try await IntegrationHome(extraConfig: extraConfig)
        try await env.signIn("me", email: Self.email)
        return env
    }

    @Test(arguments: ["websocket", "sse"])
    func streamsTheReplyToTheTerminal(transport: String) async throws {
        let env = try await home()
        let out = try env.run("ask", "--account", "me", "--transport", transport, "what", "is", "up?")
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stdout == "Hello \(Self.email). You said: what is up?\n")
        #expect(out.stderr.isEmpty)
        #expect(try await env.server.stat("stream.ws_connections") == (transport == "websocket" ? 1 : 0))
        #expect(try await env.server.stat("stream.sse_requests") == (transport == "sse" ? 1 : 0))
    }

    @Test(arguments: ["websocket", "sse"])
    func jsonIsOneLinePerEvent(transport: String) async throws {
        let env = try await home()
        let out = try env.run("ask", "--json", "--account", "me", "--transport", transport, "hi")
        #expect(out.status == 0, "\(out.stderr)")
        let events = try out.stdout.split(separator: "\n").map { try JSONValue.parse(Data($0.utf8)) }
        #expect(events.first?["type"]?.string == "connected")
        #expect(events.first?["transport"]?.string == transport)
        #expect(events.last?["type"]?.string == "completed")
        #expect(events.last?["response"]?["output_text"]?.string == "Hello \(Self.email). You said: hi")
        let text = events.compactMap { $0["type"]?.string == "text_delta" ? $0["delta"]?.string : nil }.joined()
        #expect(text == "Hello \(Self.email). You said: hi")
    }

    @Test func theActiveSlotAndConfigDefaultsApply() async throws {
        let env = try await home("[stream]\ntransport = sse\nmodel = cfg-model")
        let out = try env.run("ask", "--json", "hello")
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stdout.contains(#""transport":"sse""#))
        #expect(out.stdout.contains(#""model":"cfg-model""#))
        #expect(try await env.server.stat("stream.ws_upgrade_attempts") == 0)
    }

    @Test func promptFromStandardInput() async throws {
        let env = try await home()
        let lanyard = builtBinary("lanyard")
        let (status, stdout, stderr) = try runProcess(
            lanyard,
            ["ask", "-"],
            environment: env.home.environment,
            stdin: Data("line one\nline two\n".utf8)
        )
        #expect(status == 0, "\(stderr)")
        #expect(stdout == "Hello \(Self.email). You said: line one\nline two\n")
    }

    @Test func usageLimitExitsSevenWithOneJSONLine() async throws {
        let env = try await home()
        try await env.server.hook("/_test/usage_limit", ["resets_in_seconds": 60, "count": 1])
        let out = try env.run("ask", "--json", "hi")
        #expect(out.status == 7)
        let last = try JSONValue.parse(Data((out.stdout.split(separator: "\n").last ?? "").utf8))
        #expect(last["error"]?["code"]?.string == "usage_limit_reached")
    }

    @Test func aDivergedReplayExitsSixAndShowsThePartialText() async throws {
        let env = try await home()
        try await env.server.hook(
            "/_test/stream",
            [
                "script": [
                    ["transport": "websocket", "drop_after": 4, "chunk": 5],
                    ["transport": "websocket", "text": "Something else"],
                ]
            ]
        )
        let json = try env.run("ask", "--json", "hi")
        #expect(json.status == 6)
        let last = try JSONValue.parse(Data((json.stdout.split(separator: "\n").last ?? "").utf8))
        #expect(last["error"]?["code"]?.string == "streaming_replay_diverged")
        #expect(last["error"]?["partial_text"]?.string == "Hello ask@examp")  // created, then 3 deltas of 5
    }

    @Test func controlCharactersInTheReplyAreNotSentToTheTerminal() async throws {
        let env = try await home()
        try await env.server.hook("/_test/stream", ["default_text": "red \u{1B}[31malert\u{7}\nnext line"])
        let out = try env.run("ask", "hi")
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stdout == "red \\u{1B}[31malert\\u{7}\nnext line\n")
    }

    @Test func theLanyardBinaryLinksNoWebSocketOrHTTPLibrary() throws {
        // `ask` runs in lanyard-net; `lanyard` itself must start as fast as before.
        let lanyard = builtBinary("lanyard")
        let (status, maps, _) = try runProcess("/usr/bin/env", ["LD_TRACE_LOADED_OBJECTS=1", lanyard])
        #expect(status == 0)
        #expect(!maps.contains("libwebsockets"))
        #expect(!maps.contains("libcurl"))
        let net = builtBinary("lanyard-net")
        let (_, netMaps, _) = try runProcess("/usr/bin/env", ["LD_TRACE_LOADED_OBJECTS=1", net])
        #expect(!netMaps.contains("libwebsockets"))  // loaded with dlopen when a stream first opens a socket
    }
}
