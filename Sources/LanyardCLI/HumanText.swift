import LanyardSupport

/// Text for people, on its way to a terminal: the one place where outside text (emails and plans
/// from token claims, server messages, names from imported files) is made safe to print.
///
/// Literal text is Lanyard's own and is written as it is; every interpolated value is escaped by
/// ``TerminalText/escaped(_:keepLineBreaks:)`` (control characters, DEL, C1, bidi overrides and
/// line separators become `\u{…}`), so no server or file can write the clipboard, clear the
/// screen or reorder a line. Colour and bold come only from ``Style``, whose codes are the one
/// thing that passes through unescaped. Machine output (JSON, shell code, a token, a helper
/// protocol's answer) does not go through here: it has escaping of its own.
struct HumanText: ExpressibleByStringInterpolation, Sendable, Equatable {
    /// The text as it goes to the terminal.
    private(set) var rendered: String

    init(stringLiteral value: String) { rendered = value }

    init(stringInterpolation: Interpolation) { rendered = stringInterpolation.rendered }

    /// Any text, escaped (line breaks and tabs stay).
    init(_ text: String) { rendered = TerminalText.escaped(text, keepLineBreaks: true) }

    /// Text that is already safe for a terminal (built from ``HumanText`` pieces).
    private init(rendered: String) { self.rendered = rendered }

    /// `code` (an SGR parameter list) around already-escaped text: ``Style``'s only way in.
    static func sgr(_ code: String, _ text: HumanText) -> HumanText {
        HumanText(rendered: "\u{1B}[\(code)m\(text.rendered)\u{1B}[0m")
    }

    /// Lanyard's own terminal control sequences (erase the line, clear the screen): never built
    /// from outside text.
    enum Control: String {
        case eraseLine = "\r\u{1B}[2K"
        case clearScreen = "\u{1B}[H\u{1B}[2J"
    }

    static func control(_ control: Control) -> HumanText { HumanText(rendered: control.rawValue) }

    static func + (lhs: HumanText, rhs: HumanText) -> HumanText { HumanText(rendered: lhs.rendered + rhs.rendered) }
    static func += (lhs: inout HumanText, rhs: HumanText) { lhs.rendered += rhs.rendered }

    /// Pieces joined by a literal separator.
    static func joined(_ pieces: [HumanText], separator: String = "") -> HumanText {
        HumanText(rendered: pieces.map(\.rendered).joined(separator: separator))
    }

    var isEmpty: Bool { rendered.isEmpty }

    struct Interpolation: StringInterpolationProtocol {
        var rendered = ""

        init(literalCapacity: Int, interpolationCount: Int) {
            rendered.reserveCapacity(literalCapacity + interpolationCount * 8)
        }

        mutating func appendLiteral(_ literal: String) { rendered += literal }
        mutating func appendInterpolation(_ text: HumanText) { rendered += text.rendered }
        mutating func appendInterpolation(_ text: String) {
            rendered += TerminalText.escaped(text, keepLineBreaks: true)
        }
        mutating func appendInterpolation(_ text: Substring) { appendInterpolation(String(text)) }
        mutating func appendInterpolation(_ value: some BinaryInteger) { rendered += String(value) }
        mutating func appendInterpolation(_ value: some CustomStringConvertible) {
            appendInterpolation(value.description)
        }
    }
}
