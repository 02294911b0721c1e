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

/// An error with `--json`: `{"error": {"code", "message", "slot"?, "cause"?}}`. A refresh worker
/// writes its error so, and its caller rebuilds it from that (``WorkerError``): both paths print
/// the same object.
struct ErrorView: JSONView {
    static let keys = ["error"]
    let code: ErrorCode
    let message: String
    /// The slot the error is about, when it names one (``SlotNamingError``).
    var slot: String?
    /// The codes of the errors behind this one, outermost first (``LanyardError/underlying``):
    /// `fleet_unavailable` caused by `etcd_tls` tells a certificate mistake from an outage.
    var causes: [ErrorCode] = []

    /// At most this many causes are listed (a chain is a few errors deep; a cycle would be endless).
    static let causeLimit = 8

    init(code: ErrorCode, message: String, slot: String? = nil, causes: [ErrorCode] = []) {
        self.code = code
        self.message = message
        self.slot = slot
        self.causes = causes
    }

    /// The view of `error`, with its slot and chain of causes.
    init(_ error: any LanyardError, message: String? = nil) {
        var causes: [ErrorCode] = []
        var next = error.underlying
        while let cause = next as? any LanyardError, causes.count < Self.causeLimit {
            causes.append(cause.code)
            next = cause.underlying
        }
        self.init(
            code: error.code,
            message: message ?? error.userFacingDescription,
            slot: (error as? any SlotNamingError)?.slotName,
            causes: causes
        )
    }

    var json: JSONValue {
        var error: [String: JSONValue] = ["code": .string(code.rawValue), "message": .string(message)]
        if let slot { error["slot"] = .string(slot) }
        if !causes.isEmpty { error["cause"] = .array(causes.map { .string($0.rawValue) }) }
        return .object(["error": .object(error)])
    }
}
