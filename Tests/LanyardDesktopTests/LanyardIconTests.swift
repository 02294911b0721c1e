import Foundation
import LanyardDesktop
import LanyardSupport
import LanyardTestSupport
import Testing

/// Lanyard's application icon: written into a hicolor theme folder at every size (what
/// `make install` runs), each file a PNG of its size drawn by the tray's meter code.
@Suite struct LanyardIconTests {
    /// The width and height a PNG's IHDR says.
    func dimensions(_ png: Data) -> (Int, Int)? {
        let bytes = [UInt8](png)
        guard bytes.count > 24, bytes.prefix(8) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A],
            bytes[12..<16] == [0x49, 0x48, 0x44, 0x52]
        else { return nil }
        func int(_ at: Int) -> Int { bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
        return (int(16), int(20))
    }

    @Test func installWritesEverySizeIntoTheTheme() throws {
        let home = TestHome()
        let theme = home.root + "/share/icons/hicolor"
        let written = try LanyardIcon.install(intoTheme: theme)
        #expect(written == LanyardIcon.themeSizes.map { "\(theme)/\($0)x\($0)/apps/lanyard.png" })
        #expect(LanyardIcon.themeSizes == [16, 22, 24, 32, 48, 64, 128, 256])
        for size in LanyardIcon.themeSizes {
            let path = LanyardIcon.path(inTheme: theme, size: size)
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(dimensions(data).map { [$0.0, $0.1] } == [size, size], "\(path)")
            #expect(data == Data(LanyardIcon.drawing.png(size: size)))
            #expect(permissionBits(path) == 0o644)
            #expect(permissionBits(PathText.parent(of: path)) == 0o755)
        }
        // Again: the same files, replaced.
        #expect(try LanyardIcon.install(intoTheme: theme) == written)
    }

    /// The notification image is the same drawing as RGBA, with colour where the bars are.
    @Test func theNotificationImageIsTheDrawing() {
        let image = LanyardIcon.notificationImage
        #expect(image.width == 48 && image.height == 48 && image.rgba.count == 48 * 48 * 4)
        #expect(image.rgba == LanyardIcon.drawing.rgba(size: 48))
        // The middle of the busier bar is the calm green.
        let (r, g, b) = TrayIcon.colour(.ok)
        let x = 48 * 5 / 16
        let y = 48 * 5 / 16
        let i = (y * 48 + x) * 4
        #expect(Array(image.rgba[i..<(i + 4)]) == [UInt8(r), UInt8(g), UInt8(b), 255])
    }
}
