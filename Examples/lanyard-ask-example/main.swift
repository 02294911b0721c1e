// Streams a model reply as a signed-in slot's account with LanyardKit alone, the way an editor
// plugin or chat app would: text as it arrives, the documented errors handled, Ctrl-C cancelling.
//
//     lanyard-ask-example [--sse] SLOT PROMPT…
//
// The slot must be signed in (`lanyard login SLOT`). Output: the reply, then one line
// `done: <response id> (<output tokens> tokens over <transport>)`.
import LanyardKit

var arguments = Array(CommandLine.arguments.dropFirst())
let sseOnly = arguments.first == "--sse"
if sseOnly { arguments.removeFirst() }
guard arguments.count >= 2 else {
    print("usage: lanyard-ask-example [--sse] SLOT PROMPT…")
    exit(2)
}

let configuration = Configuration(slot: arguments[0], streamingTransportPolicy: sseOnly ? .httpSSEOnly : .default)
let prompt = arguments.dropFirst().joined(separator: " ")

/// Unbuffered, so each piece shows as it arrives.
func show(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }

let work = Task { () -> Int32 in
    do {
        let client = try Client(configuration: configuration)
        var transport = "?"
        for try await event in client.stream(prompt) {
            switch event {
            case .connected(let kind, _):
                transport = kind.rawValue
            case .textDelta(let text):
                show(text)
            case .completed(let response):
                show("\ndone: \(response.id) (\(response.usage?.outputTokens ?? 0) tokens over \(transport))\n")
            default:
                break
            }
        }
        return 0
    } catch ClientError.streamingTransportReplayDiverged(let partial) {
        // What was shown may be inconsistent: start the message again.
        show("\nthe connection replayed different text after \(partial.count) characters; please retry\n")
        return 6
    } catch ClientError.usageLimitReached(let limit) {
        show(
            "usage limit of \(limit.plan?.displayName ?? "your plan") reached; "
                + "resets \(limit.resetsAt.map { "\($0)" } ?? "later")\n"
        )
        return 7
    } catch is CancellationError {
        return 130  // stopped on purpose: nothing to report
    } catch {
        show("error: \(error.localizedDescription)\n")
        return 1
    }
}

signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
interrupt.setEventHandler { work.cancel() }
interrupt.resume()
Task {
    exit(await work.value)
}
dispatchMain()
