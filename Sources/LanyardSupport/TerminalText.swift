/// Text from outside (servers, files) made safe to print on a terminal: control characters would
/// otherwise move the cursor, recolour or retitle the terminal, write the clipboard (OSC 52), or
/// hide what came before them; bidirectional overrides and line separators reorder or break what
/// a reader sees.
package enum TerminalText {
    /// `text` with every character ``isUnsafe(_:)`` names shown as a `\u{XX}` escape; newlines and
    /// tabs stay when `keepLineBreaks` is true.
    package static func escaped(_ text: String, keepLineBreaks: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { isUnsafe($0, keepLineBreaks: keepLineBreaks) }) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isUnsafe(scalar, keepLineBreaks: keepLineBreaks) {
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    /// Whether a character must not reach a terminal or a log as it is: C0 controls (but newline
    /// and tab when `keepLineBreaks`), DEL, C1 controls, the bidirectional marks, embeddings,
    /// overrides and isolates (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069), and the line
    /// and paragraph separators (U+2028, U+2029).
    package static func isUnsafe(_ s: Unicode.Scalar, keepLineBreaks: Bool = false) -> Bool {
        switch s.value {
        case 0x0A, 0x09: return !keepLineBreaks
        case 0..<0x20, 0x7F...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: return true
        default: return false
        }
    }

    /// Why `text` cannot be a one-line name from outside (an email, a plan, an account or user
    /// id, a login): it is longer than `limit` bytes or holds a character ``isUnsafe(_:)``
    /// names (reported by position, never quoted). Nil when it is fine.
    package static func lineProblem(_ text: String, limit: Int = 1024) -> String? {
        if text.utf8.count > limit { return "is longer than \(limit) bytes" }
        for (position, scalar) in text.unicodeScalars.enumerated() where isUnsafe(scalar) {
            return "has a control character (U+\(hex4(scalar.value))) at position \(position + 1)"
        }
        return nil
    }

    static func hex4(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// What a token may hold. Tokens travel in HTTP headers, shell lines, helper protocols and
/// environment variables, so anything but visible ASCII is refused where a token comes in
/// (token endpoints, bundles, Codex's and gh's files), before it is stored.
package enum TokenText {
    /// Why `token` is not a token: empty, or a byte outside visible ASCII without space
    /// (0x21–0x7E: RFC 6750's b64token and the JWT alphabet are subsets). Reported by position;
    /// the token is never quoted. Nil when it is fine.
    package static func problem(_ token: String) -> String? {
        if token.isEmpty { return "is empty" }
        for (position, byte) in token.utf8.enumerated() where byte < 0x21 || byte > 0x7E {
            return
                "is not a token: byte \(position + 1) is not visible ASCII (tokens are printable ASCII without spaces)"
        }
        return nil
    }

    /// `text` with every occurrence of each of `secrets` replaced by `<redacted>`: for text a
    /// server sends back (an error body may echo the tokens the request carried).
    package static func redacted(_ text: String, removing secrets: [String]) -> String {
        secrets.reduce(text) { text, secret in
            !secret.isEmpty && text.contains(secret) ? text.replacing(secret, with: "<redacted>") : text
        }
    }
}
