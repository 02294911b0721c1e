/// Lanyard's own icon, drawn from a slot's usage: a meter. No theme icon name is sent, because
/// hosts prefer a name to pixels and a theme may draw anything for it (Debian's Adwaita draws
/// `security-high` as a red shield with crossed swords).
///
/// A dark rounded square with a light rim (visible on light and dark panels) holding one bar per
/// window, the busiest first, at most two, each filled as far as the window is used. The fill's
/// colour says the state: green under 80 %, amber from 80 %, red at the limit. Each state also has
/// a mark that needs no colour: at the limit a white slash through the meter, when the slot must
/// sign in a white keyhole over empty bars, stale figures as striped bars, no usage known as empty
/// bars.
package struct TrayIcon: Sendable, Hashable {
    package var state: TrayState
    /// How full each bar is (0…1), the busiest window first; empty: no figures.
    package var bars: [Double]
    /// The figures are older than a failed check.
    package var stale: Bool

    package init(state: TrayState, bars: [Double] = [], stale: Bool = false) {
        self.state = state
        self.bars = bars
        self.stale = stale
    }

    /// The sizes drawn for IconPixmap: the sizes hosts ask for (16 to 48 px); they pick the
    /// nearest and scale it.
    package static let pixmapSizes = [16, 22, 24, 32, 48]

    /// The fill colour of a state's bars.
    package static func colour(_ state: TrayState) -> (Double, Double, Double) {
        switch state {
        case .ok: (0x66, 0xBB, 0x6A)
        case .nearThreshold: (0xFF, 0xB3, 0x00)
        case .atLimit: (0xEF, 0x53, 0x50)
        case .mustSignIn: (0x42, 0xA5, 0xF5)
        case .noSlot: (0x90, 0xA4, 0xAE)
        }
    }

    static let rim: (Double, Double, Double) = (0xCF, 0xD8, 0xDC)
    static let background: (Double, Double, Double) = (0x26, 0x32, 0x38)
    static let track: (Double, Double, Double) = (0x4A, 0x5F, 0x6A)
    static let white: (Double, Double, Double) = (0xFF, 0xFF, 0xFF)

    /// `size` × `size` ARGB32 pixels in network byte order (the StatusNotifierItem IconPixmap
    /// format), edges smoothed (4 × 4 samples a pixel). Drawn on a 16-unit grid scaled to `size`.
    package func pixels(size: Int) -> [UInt8] {
        var canvas = Canvas(size: size)
        canvas.paint(Self.rim) { x, y in Self.roundedRect(x, y, 0.5, 0.5, 15.5, 15.5, radius: 3.2) }
        canvas.paint(Self.background) { x, y in Self.roundedRect(x, y, 1.4, 1.4, 14.6, 14.6, radius: 2.4) }
        let rows: [(top: Double, bottom: Double)] =
            bars.count >= 2 || state == .mustSignIn || bars.isEmpty
            ? [(3.6, 6.9), (9.1, 12.4)] : [(5.9, 10.1)]
        let fill = Self.colour(state)
        for (index, row) in rows.enumerated() {
            canvas.paint(Self.track) { x, y in Self.roundedRect(x, y, 3, row.top, 13, row.bottom, radius: 0.8) }
            guard index < bars.count, state != .mustSignIn else { continue }
            let end = 3 + 10 * min(1, max(0, bars[index]))
            guard end > 3.05 else { continue }
            let striped = stale
            canvas.paint(fill) { x, y in
                guard Self.roundedRect(x, y, 3, row.top, max(end, 3.9), row.bottom, radius: 0.8) else { return false }
                // Stale figures: diagonal stripes, so the bar reads as uncertain without colour.
                return !striped || Int(((x - y) / 1.6 + 100).rounded(.down)) % 2 == 0
            }
        }
        switch state {
        case .atLimit:
            // A slash through the meter, from bottom left to top right, outlined in the background.
            canvas.paint(Self.background) { x, y in
                Self.distanceToSlash(x, y) <= 1.9 && Self.roundedRect(x, y, 1.4, 1.4, 14.6, 14.6, radius: 2.4)
            }
            canvas.paint(Self.white) { x, y in
                Self.distanceToSlash(x, y) <= 1.05 && Self.roundedRect(x, y, 2, 2, 14, 14, radius: 2)
            }
        case .mustSignIn:
            canvas.paint(Self.background) { x, y in Self.keyhole(x, y, grow: 0.9) }
            canvas.paint(Self.white) { x, y in Self.keyhole(x, y, grow: 0) }
        case .ok, .nearThreshold, .noSlot:
            break
        }
        return canvas.argb(opacity: state == .noSlot ? 0.75 : 1)
    }

    /// The same drawing as 8-bit RGBA, row by row (a notification's `image-data`).
    package func rgba(size: Int) -> [UInt8] {
        let argb = pixels(size: size)
        var rgba = [UInt8](repeating: 0, count: argb.count)
        for i in stride(from: 0, to: argb.count, by: 4) {
            rgba[i] = argb[i + 1]
            rgba[i + 1] = argb[i + 2]
            rgba[i + 2] = argb[i + 3]
            rgba[i + 3] = argb[i]
        }
        return rgba
    }

    /// The same drawing as a PNG (dbusmenu's `icon-data`, the installed application icon).
    package func png(size: Int) -> [UInt8] { PNG.encode(width: size, height: size, rgba: rgba(size: size)) }

    static func roundedRect(
        _ x: Double,
        _ y: Double,
        _ x0: Double,
        _ y0: Double,
        _ x1: Double,
        _ y1: Double,
        radius: Double
    ) -> Bool {
        guard x >= x0, x <= x1, y >= y0, y <= y1 else { return false }
        let r = min(radius, (x1 - x0) / 2, (y1 - y0) / 2)
        let cx = x < x0 + r ? x0 + r : (x > x1 - r ? x1 - r : x)
        let cy = y < y0 + r ? y0 + r : (y > y1 - r ? y1 - r : y)
        return (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r
    }

    /// Distance from the slash's line, (3.5, 12.5) to (12.5, 3.5).
    static func distanceToSlash(_ x: Double, _ y: Double) -> Double {
        abs(x + y - 16) / 2.0.squareRoot()
    }

    /// A keyhole in the middle: a disc over a stem widening downwards; `grow` widens it (outline).
    static func keyhole(_ x: Double, _ y: Double, grow: Double) -> Bool {
        let dx = x - 8
        let dy = y - 6.4
        if dx * dx + dy * dy <= (2.3 + grow) * (2.3 + grow) { return true }
        guard y >= 6.4, y <= 12.2 + grow else { return false }
        let half = 0.8 + (y - 6.4) / 5.8 * 0.9 + grow
        return abs(dx) <= half
    }
}

/// Premultiplied colour per pixel, painted shape by shape (source over).
private struct Canvas {
    let size: Int
    var a: [Double], r: [Double], g: [Double], b: [Double]

    init(size: Int) {
        self.size = size
        a = [Double](repeating: 0, count: size * size)
        r = a
        g = a
        b = a
    }

    /// Paints `colour` (0–255 a channel) wherever `inside` holds, `inside` taking points of the
    /// 16-unit grid.
    mutating func paint(_ colour: (Double, Double, Double), _ inside: (Double, Double) -> Bool) {
        let scale = 16 / Double(size)
        for y in 0..<size {
            for x in 0..<size {
                var covered = 0
                for sy in 0..<4 {
                    for sx in 0..<4
                    where inside(
                        (Double(x) + (Double(sx) + 0.5) / 4) * scale,
                        (Double(y) + (Double(sy) + 0.5) / 4) * scale
                    ) {
                        covered += 1
                    }
                }
                guard covered > 0 else { continue }
                let c = Double(covered) / 16
                let i = y * size + x
                a[i] = c + a[i] * (1 - c)
                r[i] = colour.0 / 255 * c + r[i] * (1 - c)
                g[i] = colour.1 / 255 * c + g[i] * (1 - c)
                b[i] = colour.2 / 255 * c + b[i] * (1 - c)
            }
        }
    }

    /// ARGB32, network byte order, not premultiplied.
    func argb(opacity: Double) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: size * size * 4)
        for i in 0..<(size * size) where a[i] > 0 {
            func byte(_ v: Double) -> UInt8 { UInt8(max(0, min(255, (v * 255).rounded()))) }
            out[i * 4] = byte(a[i] * opacity)
            out[i * 4 + 1] = byte(r[i] / a[i])
            out[i * 4 + 2] = byte(g[i] / a[i])
            out[i * 4 + 3] = byte(b[i] / a[i])
        }
        return out
    }
}

/// A minimal PNG writer: 8-bit RGBA, no filtering, the image data in stored (uncompressed)
/// deflate blocks. The icons are a few kilobytes; no compression library is worth loading for them.
package enum PNG {
    package static func encode(width: Int, height: Int, rgba: [UInt8]) -> [UInt8] {
        precondition(rgba.count == width * height * 4, "4 bytes a pixel")
        var raw: [UInt8] = []
        raw.reserveCapacity((width * 4 + 1) * height)
        for y in 0..<height {
            raw.append(0)  // filter: none
            raw.append(contentsOf: rgba[(y * width * 4)..<((y + 1) * width * 4)])
        }
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let count = min(65535, raw.count - offset)
            let last: UInt8 = offset + count == raw.count ? 1 : 0
            zlib.append(last)
            zlib += [UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF)]
            zlib += raw[offset..<(offset + count)]
            offset += count
        } while offset < raw.count
        zlib += bigEndian(adler32(raw))
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        out += chunk("IHDR", bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [8, 6, 0, 0, 0])
        out += chunk("IDAT", zlib)
        out += chunk("IEND", [])
        return out
    }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + typed + bigEndian(crc32(typed))
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    static func adler32(_ data: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }

    static func crc32(_ data: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in data {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
