import CQrencode
import FoundationEssentials
import Glibc

/// Terminal QR codes through libqrencode (the only file that touches it). The library is loaded
/// with `dlopen` the first time a code is drawn (`login --qr`), not at every start: linking it
/// cost every command about 0.08 ms of loading (docs/performance.md). CQrencode gives the
/// declarations only.
enum QRCode {
    private typealias Encode =
        @convention(c) (UnsafePointer<CChar>?, Int32, QRecLevel, QRencodeMode, Int32) -> UnsafeMutablePointer<QRcode>?
    private typealias Free = @convention(c) (UnsafeMutablePointer<QRcode>?) -> Void

    /// libqrencode's two functions, or nil when the library is not installed.
    private static let library: (encode: Encode, free: Free)? = {
        guard let handle = dlopen("libqrencode.so.4", RTLD_NOW | RTLD_LOCAL),
            let encode = dlsym(handle, "QRcode_encodeString"), let free = dlsym(handle, "QRcode_free")
        else { return nil }
        return (unsafeBitCast(encode, to: Encode.self), unsafeBitCast(free, to: Free.self))
    }()

    /// The QR code of `text` drawn with half blocks (two modules per character row), with the
    /// quiet zone; nil when libqrencode is missing or cannot encode it.
    static func render(_ text: String) -> String? {
        guard let library, let code = library.encode(text, 0, QR_ECLEVEL_L, QR_MODE_8, 1) else { return nil }
        defer { library.free(code) }
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
