import Foundation
import LanyardCore
import LanyardDesktop
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// `lanyard tray` on a real panel, looked at: the Xfce 4.18 panel's Status Tray plugin draws the
/// item and opens its menu, xfce4-notifyd shows its notifications (``XfcePanel``), and the test
/// reads the screen. With `LANYARD_DESKTOP_SCREENSHOTS=DIR` (scripts/desktop-screenshots.sh) it
/// also writes what it saw into DIR, as docs/desktop.md shows it.
@Suite struct RealPanelTests {
    /// Five slots, one in each state the icon shows; the test switches through them and finds
    /// on the screen, pixel for pixel, the meter Lanyard draws for each (a theme icon in its place
    /// fails it); a 10 % and a 90 % slot differ in colour; a click on the icon opens the menu; a
    /// switch to the slot at its limit shows a notification.
    @Test func theIconTheMenuAndANotificationOnXfcesPanel() async throws {
        // [switch] poll = 1: the active slot's usage is asked every second (the emulator is local).
        let env = try await IntegrationHome(extraConfig: "[switch]\npoll = 1\n")
        let panel = try XfcePanel(root: env.home.root)
        try await panel.ready()
        let keep = ProcessInfo.processInfo.environment["LANYARD_DESKTOP_SCREENSHOTS"].flatMap { $0.isEmpty ? nil : $0 }

        // Each slot's 5 h and weekly windows, in percent.
        let usage = [("work", 10, 4), ("alice", 90, 35), ("bob", 100, 60), ("gone", 20, 5), ("zed", 42, 12)]
        for (slot, fiveHours, weekly) in usage {
            let account = try #require(try await env.signIn(slot, email: "\(slot)@example.com").account.accountID)
            func window(_ used: Int, _ seconds: Int) -> [String: Any] {
                ["used_percent": used, "limit_window_seconds": seconds, "reset_after_seconds": seconds / 3]
            }
            try await env.server.hook(
                "/_test/usage",
                [
                    "account_id": account,
                    "primary_window": window(fiveHours, 18000),
                    "secondary_window": window(weekly, 604800),
                ]
            )
        }
        try Registry(paths: env.paths).updateInTest { $0.slots[try Slot("gone")]?.state = .reauthenticationRequired }
        #expect(try env.run("switch", "work").status == 0)
        let item = try panel.desktop.startTray(env.home, extraEnvironment: ["DISPLAY": panel.display])
        try panel.movePointerAway()

        // Each state as the tray draws it: the active slot's two busiest windows, busiest first.
        func shows(_ icon: TrayIcon, _ what: String) async throws -> XfcePanel.SeenIcon {
            try await panel.waitForIcon(icon, item: item, what)
        }
        let calm = try await shows(TrayIcon(state: .ok, bars: [0.10, 0.04]), "work at 10 %")
        let before = try panel.visibleWindows("xfce4-notifyd").map(\.id)
        #expect(try env.run("switch", "alice").status == 0)
        let amber = try await shows(TrayIcon(state: .nearThreshold, bars: [0.90, 0.35]), "alice at 90 %")
        // A 10 % and a 90 % slot look different: green bars, then amber ones.
        let green = TrayIcon.colour(.ok)
        let orange = TrayIcon.colour(.nearThreshold)
        #expect(calm.count(of: green) > 0 && calm.count(of: orange) == 0)
        #expect(amber.count(of: orange) > 0 && amber.count(of: green) == 0)
        #expect(calm.differingPixels(amber) > 0)
        // The comparison tells them apart too: calm's screen is not alice's icon.
        let amberPixels = TrayIcon(state: .nearThreshold, bars: [0.90, 0.35]).pixels(size: XfcePanel.iconSize)
        #expect(!XfcePanel.find(amberPixels, size: XfcePanel.iconSize, in: calm.shot, panel: calm.panel).1.isEmpty)
        // alice is past 80 %: a warning, on the screen before the limit is said.
        let warning = try await panel.waitForDrawnWindow("xfce4-notifyd", besides: before, "alice's 90 % warning")

        #expect(try env.run("switch", "bob").status == 0)
        let limit = try await shows(TrayIcon(state: .atLimit, bars: [1, 0.60]), "bob at its limit")
        let notice = try await panel.waitForDrawnWindow(
            "xfce4-notifyd",
            besides: before + [warning.id],
            "bob at its limit"
        )
        #expect(notice.frame.width >= 150 && notice.frame.height >= 40, "\(notice)")

        #expect(try env.run("switch", "gone").status == 0)
        let signIn = try await shows(TrayIcon(state: .mustSignIn), "gone must sign in")

        // Every usage request fails from now on: zed's figures (fetched at start) stay, stale.
        try await env.server.hook(
            "/_test/fault",
            [
                "endpoint": "usage", "type": "status", "status": 503,
                "count": 10000,
            ]
        )
        #expect(try env.run("switch", "zed").status == 0)
        let stale = try await shows(TrayIcon(state: .ok, bars: [0.42, 0.12], stale: true), "zed's stale 42 %")
        try await env.server.hook("/_test/faults/clear")

        // Back on work, a click on the icon opens the menu: five slots and six entries below them.
        #expect(try env.run("switch", "work").status == 0)
        let back = try await shows(TrayIcon(state: .ok, bars: [0.10, 0.04]), "work at 10 % again")
        try panel.click(x: back.frame.x + back.frame.width / 2, y: back.frame.y + back.frame.height / 2)
        let menu = try await panel.waitForDrawnWindow("Wrapper-2.0", type: "_NET_WM_WINDOW_TYPE_POPUP_MENU", "the menu")
        #expect(menu.frame.width >= 150 && menu.frame.height >= 150, "\(menu)")
        try panel.press("Escape")
        _ = try await eventually("the menu closes") { [panel] in
            let menus = try panel.visibleWindows("Wrapper-2.0").filter { $0.type == "_NET_WM_WINDOW_TYPE_POPUP_MENU" }
            return menus.map(\.description).joined(separator: "\n")
        } until: {
            $0.isEmpty
        }

        if let keep {
            try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            // The panel's corner with the icon, one picture a state.
            let states = [("calm", calm), ("amber", amber), ("limit", limit), ("sign-in", signIn), ("stale", stale)]
            for (name, seen) in states {
                let corner = XfcePanel.Rect(
                    x: 0,
                    y: 0,
                    width: seen.frame.x + seen.frame.width + 16,
                    height: seen.panel.height
                )
                try panel.save(seen.shot, corner, to: "\(keep)/panel-\(name).png")
            }
            // The panel's corner and the menu below it.
            let menuArea = XfcePanel.Rect(
                x: 0,
                y: 0,
                width: min(XfcePanel.screen.width, menu.frame.x + menu.frame.width + 8),
                height: min(XfcePanel.screen.height, menu.frame.y + menu.frame.height + 8)
            )
            try panel.save(menu.shot, menuArea, to: "\(keep)/menu.png")
            try panel.save(notice.shot, notice.frame, to: "\(keep)/notification.png")
        }
        let (status, errors) = panel.desktop.stopTray()
        #expect(status == 0, "\(errors)")
    }
}

extension XfcePanel {
    /// The item's icon as found on the screen.
    struct SeenIcon {
        let shot: Screenshot
        let panel: Rect
        /// Where the icon's ``XfcePanel/iconSize`` square is.
        let frame: Rect

        /// How many of the icon's pixels are exactly `colour`.
        func count(of colour: (Double, Double, Double)) -> Int {
            let wanted = (Int(colour.0), Int(colour.1), Int(colour.2))
            var n = 0
            for y in frame.y..<(frame.y + frame.height) {
                for x in frame.x..<(frame.x + frame.width) where shot.pixel(x, y) == wanted { n += 1 }
            }
            return n
        }

        /// How many pixels of the two icons' squares differ.
        func differingPixels(_ other: SeenIcon) -> Int {
            var n = 0
            for dy in 0..<frame.height {
                for dx in 0..<frame.width {
                    let mine = shot.pixel(frame.x + dx, frame.y + dy)
                    if mine != other.shot.pixel(other.frame.x + dx, other.frame.y + dy) { n += 1 }
                }
            }
            return n
        }
    }

    /// Waits until the panel shows `icon`: Lanyard's own drawing of a state, which must be what
    /// the tray sent (the largest size of its IconPixmap, which the plugin draws unscaled at
    /// ``iconSize``) and what is on the screen, pixel for pixel over the panel's background.
    func waitForIcon(_ icon: TrayIcon, item: String, _ what: String) async throws -> SeenIcon {
        let expected = icon.pixels(size: Self.iconSize)
        var seen: SeenIcon?
        _ = try await eventually("the panel shows the icon of \(what)") { [self] in
            try checkRunning()
            let printed = try desktop.itemProperty(item, "IconPixmap")
            guard let sent = Self.iconPixmap(printed, size: Self.iconSize) else {
                return "the item's IconPixmap has no \(Self.iconSize) px image: \(printed.prefix(120))"
            }
            guard sent == expected else { return "the tray sends another icon (not switched yet?)" }
            guard let panel = try panelWindow() else { return "no panel window" }
            let shot = try screenshot()
            let (frame, difference) = Self.find(sent, size: Self.iconSize, in: shot, panel: panel)
            if let frame, difference.isEmpty { seen = SeenIcon(shot: shot, panel: panel, frame: frame) }
            return difference.isEmpty ? "drawn" : difference
        } until: {
            $0 == "drawn"
        }
        return try #require(seen)
    }

    /// The `size` × `size` image of an IconPixmap as gdbus prints it:
    /// `(<[(16, 16, [byte 0x00, 0xff, …]), …]>,)`.
    static func iconPixmap(_ printed: String, size: Int) -> [UInt8]? {
        guard let start = printed.range(of: "(\(size), \(size), [") else { return nil }
        let rest = printed[start.upperBound...]
        guard let end = rest.firstIndex(of: "]") else { return nil }
        let bytes = rest[..<end].split(separator: ",").compactMap {
            UInt8($0.split(separator: "x").last ?? "", radix: 16)
        }
        return bytes.count == size * size * 4 ? bytes : nil
    }

    /// Finds `argb` (`size` × `size` ARGB32, IconPixmap's layout) in `panel` on `shot`: the shape
    /// that stands out from the panel's background must be the icon's, and each of its pixels
    /// the icon's composited over that background (within 2 of 255 a channel: rounding).
    /// Returns where it is and "" when it matches, else what differs.
    static func find(_ argb: [UInt8], size: Int, in shot: Screenshot, panel: Rect) -> (Rect?, String) {
        let background = shot.pixel(panel.x + panel.width - 2, panel.y + panel.height / 2)
        func differs(_ a: (Int, Int, Int), _ b: (Int, Int, Int)) -> Int {
            max(abs(a.0 - b.0), abs(a.1 - b.1), abs(a.2 - b.2))
        }
        func over(_ i: Int) -> (Int, Int, Int) {
            let alpha = Double(argb[i * 4]) / 255
            func mix(_ c: UInt8, _ b: Int) -> Int { Int((Double(c) * alpha + Double(b) * (1 - alpha)).rounded()) }
            return (
                mix(argb[i * 4 + 1], background.0), mix(argb[i * 4 + 2], background.1),
                mix(argb[i * 4 + 3], background.2)
            )
        }
        // The bounding box of what stands out (more than faint edge pixels do): on the screen
        // inside the panel's border, and in the icon composited alone.
        func box(_ width: Int, _ height: Int, _ pixel: (Int, Int) -> (Int, Int, Int)) -> Rect? {
            var minX = Int.max
            var minY = Int.max
            var maxX = -1
            var maxY = -1
            for y in 0..<height {
                for x in 0..<width where differs(pixel(x, y), background) > 24 {
                    minX = min(minX, x)
                    maxX = max(maxX, x)
                    minY = min(minY, y)
                    maxY = max(maxY, y)
                }
            }
            return maxX < 0 ? nil : Rect(x: minX, y: minY, width: maxX - minX + 1, height: maxY - minY + 1)
        }
        guard let onScreen = box(panel.width - 2, panel.height - 2, { shot.pixel(panel.x + 1 + $0, panel.y + 1 + $1) })
        else { return (nil, "nothing on the panel") }
        let drawn = box(size, size) { over($1 * size + $0) }!
        guard onScreen.width == drawn.width, onScreen.height == drawn.height else {
            return (
                nil,
                "the panel shows a \(onScreen.width)x\(onScreen.height) shape where Lanyard's icon is "
                    + "\(drawn.width)x\(drawn.height)"
            )
        }
        let frame = Rect(
            x: panel.x + 1 + onScreen.x - drawn.x,
            y: panel.y + 1 + onScreen.y - drawn.y,
            width: size,
            height: size
        )
        guard frame.x >= 0, frame.y >= 0, frame.x + size <= shot.width, frame.y + size <= shot.height else {
            return (nil, "the icon would reach off the screen at \(frame)")
        }
        var wrong = 0
        var worst = 0
        for y in 0..<size {
            for x in 0..<size {
                let d = differs(shot.pixel(frame.x + x, frame.y + y), over(y * size + x))
                worst = max(worst, d)
                if d > 2 { wrong += 1 }
            }
        }
        return (
            frame,
            wrong == 0
                ? ""
                : "\(wrong) of \(size * size) pixels at \(frame) differ from Lanyard's icon "
                    + "(by up to \(worst))"
        )
    }
}
