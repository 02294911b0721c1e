import CQrencode
import Foundation

/// Terminal QR codes through libqrencode (the only file that touches it).
enum QRCode {
    /// The QR code of `text` drawn with half blocks (two modules per character row), with the
    /// quiet zone; nil when libqrencode cannot encode it.
    static func render(_ text: String) -> String? {
        guard let code = QRcode_encodeString(text, 0, QR_ECLEVEL_L, QR_MODE_8, 1) else { return nil }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        let data = code.pointee.data!
        let quiet = 2
        func dark(_ x: Int, _ y: Int) -> Bool {
            guard x >= 0, y >= 0, x < width, y < width else { return false }
            return data[y * width + x] & 1 == 1
        }
        var out = ""
        var y = -quiet
        while y < width + quiet {
            for x in -quiet..<(width + quiet) {
                // Light modules are drawn as blocks so the code reads on dark terminals.
                switch (dark(x, y), dark(x, y + 1)) {
                case (false, false): out += "█"
                case (false, true): out += "▀"
                case (true, false): out += "▄"
                case (true, true): out += " "
                }
            }
            out += "\n"
            y += 2
        }
        return out
    }
}
