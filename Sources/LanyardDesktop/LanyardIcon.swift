import FoundationEssentials
import Glibc
import LanyardCore
import LanyardGLib
import LanyardStore
import LanyardSupport
import LanyardSystem

/// Lanyard's own icon outside the tray's pixmaps: the application icon named ``name``, which the
/// autostart entry (`Icon=`) and notifications (`app_icon`) name. It is the tray's meter drawing
/// (``TrayIcon``) at rest: two calm bars. `make install` and the .deb put it into the hicolor theme
/// at ``themeSizes`` (``install(intoTheme:)``, run through the hidden `lanyard desktop-icons`), so
/// no theme's icon of another name (Adwaita's shields) stands in for it; notifications also carry
/// the pixels themselves (``notificationImage``), which show where the theme lacks the icon (a
/// build run from its folder, a host that ignores the name).
package enum LanyardIcon {
    /// The icon's name in the theme (`share/icons/hicolor/SIZExSIZE/apps/lanyard.png`).
    package static let name = "lanyard"
    /// The sizes installed: those the hicolor theme lists for applications, panels to launchers.
    package static let themeSizes = [16, 22, 24, 32, 48, 64, 128, 256]
    /// The drawing: the meter with a busier and a quieter window, in the calm colour.
    package static let drawing = TrayIcon(state: .ok, bars: [0.7, 0.4])
    /// The size of the image notifications carry (servers scale it to their own).
    package static let notificationSize = 48

    /// The icon as notifications carry it (the `image-data` hint): RGBA, drawn once.
    package static let notificationImage = NotificationImage(
        width: notificationSize,
        height: notificationSize,
        rgba: drawing.rgba(size: notificationSize)
    )

    /// The icon's file in a hicolor theme folder at one size.
    package static func path(inTheme folder: String, size: Int) -> String {
        "\(folder)/\(size)x\(size)/apps/\(name).png"
    }

    /// Writes the icon at every ``themeSizes`` into the hicolor theme folder `folder`
    /// (`…/share/icons/hicolor`): each `SIZExSIZE/apps/lanyard.png` replaced durably, mode 0644
    /// in folders 0755 (an icon theme is read by every program of the session, and installed by
    /// root for every user).
    /// - Returns: the files written.
    package static func install(intoTheme folder: String) throws -> [String] {
        try themeSizes.map { size in
            let path = path(inTheme: folder, size: size)
            let apps = PathText.parent(of: path)
            do {
                try FileManager.default.createDirectory(
                    atPath: apps,
                    withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o755]
                )
                // Replaced durably by GLib, as the autostart entry is.
                try DurableFile.replace(path, with: Data(drawing.png(size: size)), mode: 0o644)
            } catch {
                throw StoreError.io(path: path, detail: "cannot write: \(error.userFacingDescription)")
            }
            // Readable by all whatever the umask (an install by root with umask 077).
            guard chmod(path, 0o644) == 0 else { throw StoreError.io(path: path, detail: SystemCallError.reason()) }
            return path
        }
    }
}

/// An image sent with a notification (the `image-data` hint): 8-bit RGBA, row by row.
package struct NotificationImage: Sendable, Equatable {
    package let width: Int
    package let height: Int
    package let rgba: [UInt8]

    package init(width: Int, height: Int, rgba: [UInt8]) {
        precondition(rgba.count == width * height * 4, "4 bytes a pixel")
        self.width = width
        self.height = height
        self.rgba = rgba
    }
}
