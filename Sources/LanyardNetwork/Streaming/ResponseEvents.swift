import Foundation
import LanyardAuth
import LanyardCore
import LanyardSupport

/// One event from the backend, as the stream engine acts on it.
enum BackendEvent {
    case created(String)
    case textDelta(String)
    case textDone(String)
    case completed(StreamResponse)
    /// `response.failed` or `response.incomplete`.
    case terminalFailure(StreamResponse)
    /// An `error` event: the status the backend gave it (if any) and a body for error parsing.
    case error(status: Int?, body: Data)
    /// An event type Lanyard does not act on.
    case ignored

    /// Decodes one event's JSON. `place` says where it came from, for messages.
    static func decode(_ bytes: [UInt8], place: @autoclosure () -> String) throws(ClientError) -> BackendEvent {
        let value: JSONValue
        do { value = try JSONValue.parse(Data(bytes)) } catch {
            throw .invalidResponse("\(place()) is not valid JSON: \(error.localizedDescription)")
        }
        guard let object = value.object else { throw .invalidResponse("\(place()) is not a JSON object") }
        guard let type = object["type"]?.string else { throw .invalidResponse("\(place()) has no \"type\"") }
        func text(_ key: String) throws(ClientError) -> String {
            guard let s = object[key]?.string else {
                throw .invalidResponse("\(place()) (\(type)) has no string \"\(key)\"")
            }
            return s
        }
        switch type {
        case "response.created":
            return .created(object["response"]?["id"]?.string ?? "")
        case "response.output_text.delta":
            return .textDelta(try text("delta"))
        case "response.output_text.done":
            return .textDone(try text("text"))
        case "response.completed", "response.failed", "response.incomplete":
            guard let response = object["response"]?.object else {
                throw .invalidResponse("\(place()) (\(type)) has no \"response\" object")
            }
            let parsed = parseResponse(response)
            return type == "response.completed" ? .completed(parsed) : .terminalFailure(parsed)
        case "error":
            let status = object["status"]?.number.map { $0.saturatingInt }
            let body: JSONValue = object["error"] != nil ? .object(["error": object["error"]!]) : value
            return .error(status: status, body: Data(body.serialized().utf8))
        default:
            return .ignored
        }
    }

    static func parseResponse(_ response: [String: JSONValue]) -> StreamResponse {
        var text = ""
        if case .array(let items)? = response["output"] {
            for item in items where item["type"]?.string == "message" {
                guard case .array(let parts)? = item["content"] else { continue }
                for part in parts where part["type"]?.string == "output_text" { text += part["text"]?.string ?? "" }
            }
        }
        var usage: ResponseUsage?
        if let u = response["usage"]?.object {
            let input = (u["input_tokens"]?.number ?? 0).saturatingInt
            let output = (u["output_tokens"]?.number ?? 0).saturatingInt
            usage = ResponseUsage(
                inputTokens: input,
                outputTokens: output,
                totalTokens: u["total_tokens"]?.number?.saturatingInt
                    ?? input.addingReportingOverflow(output).partialValue
            )
        }
        let error = response["error"].flatMap { e -> ServerErrorDetail? in
            guard e.object != nil else { return nil }
            return ServerErrorDetail(body: Data(JSONValue.object(["error": e]).serialized().utf8))
        }
        return StreamResponse(
            id: response["id"]?.string ?? "",
            status: response["status"]?.string ?? "unknown",
            model: response["model"]?.string,
            outputText: text,
            usage: usage,
            error: error
        )
    }
}
