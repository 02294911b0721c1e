/// Text from outside (servers, files) made safe to print on a terminal: control characters would
/// otherwise move the cursor, recolour or retitle the terminal, or hide what came before them.
public enum TerminalText {
    /// `text` with C0 and C1 control characters and DEL shown as `\u{XX}` escapes; newlines and
    /// tabs stay when `keepLineBreaks` is true.
    public static func escaped(_ text: String, keepLineBreaks: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { isControl($0, keepLineBreaks) }) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isControl(scalar, keepLineBreaks) {
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    private static func isControl(_ s: Unicode.Scalar, _ keepLineBreaks: Bool) -> Bool {
        if keepLineBreaks && (s == "\n" || s == "\t") { return false }
        return s.value < 0x20 || (0x7F...0x9F).contains(s.value)
    }
}
