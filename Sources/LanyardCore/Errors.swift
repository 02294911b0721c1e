import FoundationEssentials
import LanyardSupport

/// An error Lanyard reports to people and scripts: a stable machine code and a description that
/// names the slot and the failing step but never a token. What a code means to a program (the
/// CLI's exit status) is decided where the error is reported, not here.
public protocol LanyardError: LocalizedError, Sendable {
    /// The stable code for `--json` output and scripts (its raw value is what they see).
    var code: ErrorCode { get }
    /// The error this one reports, when it keeps it (a library's or the system's); nil when it
    /// keeps only its description, which is already part of this error's.
    var underlying: (any Error)? { get }
}

extension LanyardError {
    /// None: most errors keep what went wrong as text in their description.
    public var underlying: (any Error)? { nil }
}

/// An error about one slot, which it names apart from its description: `--json` errors carry it
/// as `slot`, and a refresh worker's error keeps it across the process boundary.
package protocol SlotNamingError: LanyardError {
    /// The slot's name, nil when this case of the error is about no slot.
    var slotName: String? { get }
}

/// An error kept as the cause of another (``LanyardError/underlying``), inside an error that is
/// `Equatable`: two causes are equal when their codes (for Lanyard's own errors) and descriptions
/// are. The cause may be any error: a system call's, GLib's, another layer's `LanyardError`.
public struct ErrorCause: Equatable, Sendable {
    /// The error.
    public let error: any Error

    public init(_ error: any Error) { self.error = error }

    public static func == (a: ErrorCause, b: ErrorCause) -> Bool {
        (a.error as? any LanyardError)?.code == (b.error as? any LanyardError)?.code
            && a.error.userFacingDescription == b.error.userFacingDescription
    }
}

/// A server error body in the `{code, message, details}` shape; `code` is "UNKNOWN" when unreadable.
public struct ServerErrorDetail: Hashable, Sendable {
    public var code: String
    public var message: String?
    public var details: [String: String]?

    public init(code: String = "UNKNOWN", message: String? = nil, details: [String: String]? = nil) {
        self.code = code
        self.message = message
        self.details = details
    }

    /// Reads `code` from `error.code`, `error` (string), or `code`; `message` from `error.message`,
    /// `error_description` or `message`. Anything else gives code "UNKNOWN", and so does a code
    /// that is not one short line of text (it is stored and shown: control characters would
    /// reach a terminal). Every occurrence of a string in `secrets` (the tokens the request
    /// carried: a server may echo them) is replaced by `<redacted>` in code, message and details.
    public init(body: Data, redacting secrets: [String]) {
        self.init(body: body)
        code = TokenText.redacted(code, removing: secrets)
        message = message.map { TokenText.redacted($0, removing: secrets) }
        details = details?.mapValues { TokenText.redacted($0, removing: secrets) }
    }

    /// Reads `code` from `error.code`, `error` (string), or `code`; `message` from `error.message`,
    /// `error_description` or `message`. Anything else gives code "UNKNOWN", and so does a code
    /// that is not one short line of text.
    public init(body: Data) {
        self.init()
        guard let value = try? JSONValue.parse(body), let object = value.object else { return }
        if let nested = object["error"]?.object {
            code = nested["code"]?.string ?? nested["type"]?.string ?? code
            message = nested["message"]?.string
        } else if let e = object["error"]?.string {
            code = e
        } else if let c = object["code"]?.string {
            code = c
        }
        if TerminalText.lineProblem(code, limit: 128) != nil { code = "UNKNOWN" }
        message = message ?? object["error_description"]?.string ?? object["message"]?.string
        if case .object(let d)? = object["details"] {
            details = d.compactMapValues(\.string)
        }
    }
}
