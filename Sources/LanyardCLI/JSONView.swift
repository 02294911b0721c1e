import LanyardCore
import LanyardSupport

/// One command's `--json` document: its schema (a public contract) written in one place. A view
/// holds the values it shows and builds the `JSONValue` that `JSONWriter` serialises (keys sorted),
/// so the bytes are those of the object literal it replaces. `DocumentationTests` checks `keys`
/// against the command's "JSON:" line in docs/cli.md, both ways, and against rendered instances.
protocol JSONView {
    /// The top-level keys, as docs/cli.md lists them for the command.
    static var keys: [String] { get }
    /// The keys of `keys` a document may leave out (null values dropped, or only present in some
    /// cases); docs/cli.md marks them with `?`.
    static var optionalKeys: Set<String> { get }
    /// The document.
    var json: JSONValue { get }
}

extension JSONView {
    static var optionalKeys: Set<String> { [] }
}

extension Invocation {
    /// Prints `view` as JSON with `--json`, else runs `human`.
    func emit(_ view: some JSONView, human: () -> Void) {
        emit(view.json, human: human)
    }
}

/// An error with `--json`: `{"error": {"code", "message"}}`.
struct ErrorView: JSONView {
    static let keys = ["error"]
    let code: ErrorCode
    let message: String
    var json: JSONValue { .object(["error": .object(["code": .string(code.rawValue), "message": .string(message)])]) }
}
