import LanyardAuth
import LanyardCore
import LanyardSupport

/// `lanyard ask`: streams a reply as one slot's account, to check an account end to end from the
/// shell. The streaming itself (transports, reconnection, replay) is the library's
/// `ResponseStreamer`; this parses, runs it and renders the events.
enum AskCommand {
    static let ask = CommandSpec(
        name: "ask",
        summary: "stream a model reply as a slot's account (checks the account end to end)",
        arguments: "PROMPT…",
        minArguments: 1,
        maxArguments: Int.max,
        flags: [
            FlagSpec(
                "transport",
                value: "TRANSPORT",
                choices: ["websocket", "sse"],
                "websocket (reconnects, then falls back to SSE) or sse only (default: [stream] transport)"
            ),
            FlagSpec("model", value: "MODEL", "the model to ask (default: [stream] model, gpt-5-codex)"),
            FlagSpec("instructions", value: "TEXT", "system instructions sent with the prompt"),
        ],
        prints: true,
        takesAccount: true,
        details: """
            The words of PROMPT are joined with spaces; a single - reads the prompt from standard input. \
            The reply is written as it arrives; with --json each event is one JSON line (connected, created, \
            text_delta, text_done, completed). Exit 7 at the usage limit, 4 when the slot must sign in again, \
            6 for network, server and stream errors (streaming_replay_diverged when a reconnection replayed \
            different text), 130 when interrupted.
            """,
        examples: [
            CommandExample("lanyard ask --account work say hello", "check that work can use the model, end to end"),
            CommandExample(
                "git diff | lanyard ask --instructions 'review this diff' -",
                "send standard input as the prompt"
            ),
        ],
        network: true
    ) { inv in
        guard let streamFactory = inv.context.streamFactory else {
            throw NetworkUnavailable(detail: "this binary cannot stream; run the command through lanyard")
        }
        let prompt = try readPrompt(inv)
        let manager = try inv.accounts()
        let (slot, _, _) = try inv.targetSlot(positional: nil)
        var policy = manager.config.streaming
        switch inv.args.value("transport") {
        case "sse"?: policy = .httpSSEOnly
        case "websocket"?: policy.prefersWebSocket = true
        default: break
        }
        let request = ResponseRequest(
            prompt: prompt,
            model: inv.args.value("model") ?? manager.config.streamModel,
            instructions: inv.args.value("instructions")
        )
        let renderer = Renderer(inv: inv)
        do {
            try inv.runAsync { [policy] in
                for try await event in streamFactory(manager, slot, policy, request) { renderer.show(event) }
            }
        } catch let error as any LanyardError where inv.json {
            // One line, like the events before it, so a JSON-lines reader sees the whole error.
            var body = ErrorView(error).json["error"]?.object ?? [:]
            if case ClientError.streamingTransportReplayDiverged(let partial) = error {
                body["partial_text"] = .string(partial)
            }
            inv.stdout.rawLine(JSONValue.object(["error": .object(body)]).serialized())
            return error.exitStatus
        } catch {
            renderer.endLine()
            throw error
        }
        return .ok
    }

    /// The most `ask -` reads from standard input: 8 MiB, far above a real prompt; it only stops
    /// input that never ends (`lanyard ask - </dev/zero`) from growing the process without bound.
    static let maxPromptBytes = 8 * 1_048_576

    static func readPrompt(_ inv: Invocation) throws -> String {
        let words = inv.args.positionals
        guard words == ["-"] else { return words.joined(separator: " ") }
        var text = ""
        var first = true
        while true {
            // The whole prompt is bounded, not each line (a prompt may be one long line of JSON).
            let budget = maxPromptBytes - text.utf8.count - (first ? 0 : 1)
            let next: String?
            do { next = try inv.context.input.line(maxBytes: max(budget, 0)) } catch {
                let problem =
                    if case .lineTooLong = error { "is longer than \(ByteCount.describe(maxPromptBytes))" } else {
                        error.problem
                    }
                throw UsageError(message: "the prompt on standard input \(problem)", command: "ask")
            }
            guard let line = next else { break }
            text += (first ? "" : "\n") + line
            first = false
        }
        guard !text.trimmingSpaces().isEmpty else {
            throw UsageError(message: "the prompt on standard input is empty", command: "ask")
        }
        return text
    }

    /// Writes events as they come: the text itself, or JSON lines.
    final class Renderer: Sendable {
        let inv: Invocation
        private let atLineStart = Locked(true)

        init(inv: Invocation) { self.inv = inv }

        func show(_ event: StreamEvent) {
            if inv.json {
                inv.stdout.rawLine(json(event).serialized())
                return
            }
            switch event {
            case .textDelta(let text):
                // Model output may hold control characters; a terminal must not act on them.
                inv.stdout.write(HumanText(text))
                atLineStart.withLock { $0 = text.hasSuffix("\n") }
            case .connected(let transport, let reconnection) where reconnection > 0:
                endLine()
                inv.stderr.line(
                    inv.style.dim("lanyard: reconnected over \(transport == .webSocket ? "WebSocket" : "HTTP/SSE")")
                )
            case .completed:
                endLine()
            default:
                break
            }
        }

        func endLine() {
            if !inv.json,
                atLineStart.withLock({ start in
                    defer { start = true }
                    return !start
                })
            {
                inv.stdout.line()
            }
        }

        func json(_ event: StreamEvent) -> JSONValue {
            switch event {
            case .connected(let transport, let reconnection):
                return .object([
                    "type": .string("connected"), "transport": .string(transport.rawValue),
                    "reconnection": .number(Double(reconnection)),
                ])
            case .created(let id):
                return .object(["type": .string("created"), "response_id": .string(id)])
            case .textDelta(let text):
                return .object(["type": .string("text_delta"), "delta": .string(text)])
            case .textDone(let text):
                return .object(["type": .string("text_done"), "text": .string(text)])
            case .completed(let response):
                var object: [String: JSONValue] = [
                    "id": .string(response.id), "status": .string(response.status), "model": .optional(response.model),
                    "output_text": .string(response.outputText),
                ]
                if let usage = response.usage {
                    object["usage"] = .object([
                        "input_tokens": .number(Double(usage.inputTokens)),
                        "output_tokens": .number(Double(usage.outputTokens)),
                        "total_tokens": .number(Double(usage.totalTokens)),
                    ])
                }
                return .object(["type": .string("completed"), "response": .object(object)])
            }
        }
    }
}
