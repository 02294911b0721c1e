import Foundation
import LanyardAuth
import LanyardCore
import LanyardSupport
import Testing

@testable import LanyardNetwork

/// The pure parts of streaming: the event-stream parser and the replay guard.
@Suite struct ServerSentEventParserTests {
    func parse(
        _ pieces: [String],
        max: Int = ServerSentEventParser.defaultMaxEventBytes
    ) throws -> ([ServerSentEvent], ServerSentEventParser) {
        var parser = ServerSentEventParser(maxEventBytes: max)
        var events: [ServerSentEvent] = []
        for piece in pieces { events += try parser.feed(Array(piece.utf8)) }
        return (events, parser)
    }

    func texts(_ events: [ServerSentEvent]) -> [String] { events.map { String(decoding: $0.data, as: UTF8.self) } }

    @Test func joinsDataLinesAndNamesEvents() throws {
        let (events, _) = try parse([
            "event: response.output_text.delta\ndata: {\"a\":\ndata: 1}\n\n", "data: plain\n\n",
        ])
        #expect(events.map(\.type) == ["response.output_text.delta", "message"])
        #expect(texts(events) == ["{\"a\":\n1}", "plain"])
    }

    @Test func eventsSplitAcrossReadsAtEveryByte() throws {
        let stream = "event: e\r\ndata: héllo\r\n\r\ndata: x\rdata: y\r\r: comment\n\nid: 7\ndata: z\n\n"
        let whole = try parse([stream]).0
        let bytes = Array(stream.utf8)
        var parser = ServerSentEventParser()
        var byByte: [ServerSentEvent] = []
        for b in bytes { byByte += try parser.feed([b]) }
        #expect(byByte == whole)
        #expect(texts(whole) == ["héllo", "x\ny", "z"])
        #expect(whole.last?.lastEventID == "7")
    }

    @Test func commentsRetryAndUnknownFieldsAndBOM() throws {
        let (events, parser) = try parse(["\u{FEFF}: stream start\n\nretry: 1500\n\nretry: soon\nfoo: bar\ndata\n\n"])
        #expect(parser.retryMilliseconds == 1500)
        #expect(texts(events) == [""])  // a bare "data" field is an empty data line
    }

    @Test func blankEventsAreNotDispatched() throws {
        let (events, _) = try parse(["event: only-a-type\n\n\n\n"])
        #expect(events.isEmpty)
    }

    @Test func anEventOverTheCapIsATypedError() throws {
        var parser = ServerSentEventParser(maxEventBytes: 1024)
        _ = try parser.feed(Array("data: ".utf8))
        #expect(throws: ClientError.self) { _ = try parser.feed([UInt8](repeating: 0x61, count: 2048)) }
        // Many small data lines count together.
        var lines = ServerSentEventParser(maxEventBytes: 1024)
        #expect(throws: ClientError.self) {
            for _ in 0..<200 { _ = try lines.feed(Array("data: aaaaaaa\n".utf8)) }
        }
    }
}

@Suite struct ReplayGuardTests {
    @Test func firstDeliveryPassesThrough() throws {
        var guardian = ReplayGuard()
        #expect(try guardian.accept("Hel") == "Hel")
        #expect(try guardian.accept("lo") == "lo")
        #expect(guardian.deliveredText == "Hello")
        try guardian.finish()
    }

    @Test func replayWithOtherBoundariesEmitsOnlyTheNewPart() throws {
        var guardian = ReplayGuard()
        for piece in ["Héllo", " wo"] { _ = try guardian.accept(piece) }
        guardian.beginReplay()
        var emitted: [String] = []
        for piece in ["H", "éll", "o w", "orld", "!"] {
            if let fresh = try guardian.accept(piece) { emitted.append(fresh) }
        }
        #expect(emitted == ["rld", "!"])
        #expect(guardian.deliveredText == "Héllo world!")
        try guardian.finish()
    }

    @Test func replayEndingInsideADeltaCutsAtTheRightByte() throws {
        var guardian = ReplayGuard()
        _ = try guardian.accept("añ")
        guardian.beginReplay()
        #expect(try guardian.accept("añb") == "b")
    }

    @Test func aContradictingReplayThrowsWithWhatWasDelivered() throws {
        var guardian = ReplayGuard()
        _ = try guardian.accept("The answer is 4")
        guardian.beginReplay()
        _ = try guardian.accept("The ans")
        #expect(throws: ClientError.streamingTransportReplayDiverged("The answer is 4")) {
            _ = try guardian.accept("wer was 5")
        }
    }

    @Test func aReplayThatCompletesShortOfTheDeliveredTextDiverges() throws {
        var guardian = ReplayGuard()
        _ = try guardian.accept("abcdef")
        guardian.beginReplay()
        _ = try guardian.accept("abc")
        #expect(throws: ClientError.streamingTransportReplayDiverged("abcdef")) { try guardian.finish() }
    }

    @Test func aReplayBeforeAnyTextIsAFreshStart() throws {
        var guardian = ReplayGuard()
        guardian.beginReplay()
        #expect(!guardian.isReplaying)
        #expect(try guardian.accept("x") == "x")
    }
}

@Suite struct BackendEventTests {
    func decode(_ json: String) throws -> BackendEvent { try BackendEvent.decode(Array(json.utf8), place: "event 1") }

    @Test func completedResponseCarriesTextAndUsage() throws {
        let event = try decode(
            #"""
            {"type":"response.completed","response":{"id":"resp_1","status":"completed","model":"m",
             "output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"Hi \#
            "},{"type":"output_text","text":"there"}]}],
             "usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}}
            """#
        )
        guard case .completed(let response) = event else {
            Issue.record("not completed: \(event)")
            return
        }
        #expect(
            response
                == StreamResponse(
                    id: "resp_1",
                    status: "completed",
                    model: "m",
                    outputText: "Hi there",
                    usage: ResponseUsage(inputTokens: 3, outputTokens: 2, totalTokens: 5)
                )
        )
    }

    /// JSON can spell numbers no Int holds (1e300; the parser refuses 1e400): token counts and an
    /// error's status saturate instead of trapping.
    @Test func hugeNumbersInEventsDoNotTrap() throws {
        let event = try decode(
            #"""
            {"type":"response.completed","response":{"id":"r","status":"completed","model":"m","output":[],
             "usage":{"input_tokens":1e300,"output_tokens":1e308,"total_tokens":-1e300}}}
            """#
        )
        guard case .completed(let response) = event else {
            Issue.record("not completed: \(event)")
            return
        }
        #expect(response.usage == ResponseUsage(inputTokens: .max, outputTokens: .max, totalTokens: .min))
        let noTotal = try decode(
            #"{"type":"response.completed","response":{"usage":{"input_tokens":1e300,"output_tokens":1e300}}}"#
        )
        guard case .completed(let sum) = noTotal else {
            Issue.record("not completed")
            return
        }
        #expect(sum.usage?.totalTokens != nil)
        guard case .error(let status, _) = try decode(#"{"type":"error","status":1e300}"#) else {
            Issue.record("not an error")
            return
        }
        #expect(status == .max)
    }

    @Test func malformedEventsNameWhatIsWrong() throws {
        #expect(throws: ClientError.invalidResponse("event 1 is not a JSON object")) { _ = try decode("[1]") }
        #expect(throws: ClientError.invalidResponse("event 1 has no \"type\"")) { _ = try decode("{}") }
        #expect(throws: ClientError.invalidResponse("event 1 (response.output_text.delta) has no string \"delta\"")) {
            _ = try decode(#"{"type":"response.output_text.delta","delta":5}"#)
        }
        do {
            _ = try decode("{not json")
            Issue.record("no error")
        } catch let error as ClientError {
            #expect(
                error.localizedDescription.hasPrefix("server response could not be read: event 1 is not valid JSON")
            )
        }
    }

    @Test func unknownEventTypesAreIgnored() throws {
        guard case .ignored = try decode(#"{"type":"response.future_thing","x":1}"#) else {
            Issue.record("not ignored")
            return
        }
    }

    @Test func errorEventsKeepTheirStatusAndBody() throws {
        guard
            case .error(let status, let body) = try decode(
                #"{"type":"error","status":429,"error":{"type":"usage_limit_reached","plan_type":"plus"}}"#
            )
        else {
            Issue.record("not an error event")
            return
        }
        #expect(status == 429)
        #expect(try JSONValue.parse(body)["error"]?["plan_type"]?.string == "plus")
    }

    @Test func requestBodiesDifferOnlyInTheWebSocketType() throws {
        let request = ResponseRequest(prompt: "hi", model: "m", instructions: "be brief")
        let sse = try JSONValue.parse(Data(request.body(for: .httpSSE)))
        let ws = try JSONValue.parse(Data(request.body(for: .webSocket)))
        #expect(sse["type"] == nil)
        #expect(ws["type"]?.string == "response.create")
        #expect(sse["stream"]?.bool == true)
        #expect(sse["input"] == ws["input"])
    }
}

@Suite struct TerminalTextTests {
    @Test func controlCharactersAreShownNotObeyed() {
        #expect(TerminalText.escaped("a\u{1B}[31mb\u{7}") == "a\\u{1B}[31mb\\u{7}")
        #expect(TerminalText.escaped("line\nnext\ttab", keepLineBreaks: true) == "line\nnext\ttab")
        #expect(TerminalText.escaped("line\n") == "line\\u{A}")
        #expect(TerminalText.escaped("\u{9B}2J") == "\\u{9B}2J")
        #expect(TerminalText.escaped("plain é") == "plain é")
    }
}
