import Foundation
import LanyardSupport
import LanyardTestSupport
import Testing

/// A desktop of a test's own that can be looked at: an X server (Xvfb, on a display number it
/// picks itself), Xfce's panel 4.18 with only its Status Tray plugin (which is the session's
/// StatusNotifierWatcher and draws the items), and xfce4-notifyd, all on a ``TrayDesktop``'s
/// private bus, their settings (xfconf) in a throwaway folder. The test reads the screen with
/// ImageMagick's `import`, finds windows with xdotool, xwininfo and xprop, and clicks with xdotool.
/// Every tool is in scripts/deps.sh; a missing one skips the test under plain `swift test`
/// (``TestServices``). Everything it started is killed on deinit.
final class XfcePanel: @unchecked Sendable {
    /// The tray's bus (with no watcher of its own: the panel is the watcher) and the tray.
    let desktop: TrayDesktop
    /// `:N`, the display Xvfb chose.
    let display: String
    /// The screen's size, in pixels.
    static let screen = (width: 800, height: 480)
    /// The panel's height, and the size the Status Tray plugin draws icons at: the largest of the
    /// sizes Lanyard sends, so the plugin draws that pixmap unscaled and the test can compare it
    /// pixel for pixel (a smaller size would be the plugin's own bilinear scaling of it).
    static let panelSize = 56, iconSize = 48

    private let folder: String
    private var processes: [(name: String, process: Process)] = []

    // Debian 12's paths. ImageMagick's versioned names: the plain `import` and `convert` are
    // alternatives links another package (or a stand-in script earlier on PATH) may take over.
    static let xvfb = "/usr/bin/Xvfb", panel = "/usr/bin/xfce4-panel", importTool = "/usr/bin/import-im6.q16",
        convert = "/usr/bin/convert-im6.q16", xdotool = "/usr/bin/xdotool", xwininfo = "/usr/bin/xwininfo",
        xprop = "/usr/bin/xprop"

    /// A program Xfce installs in its multiarch folder (`/usr/lib/x86_64-linux-gnu/xfce4/…`).
    static func xfceProgram(_ tail: String) -> String {
        let lib = "/usr/lib"
        let triplets = (try? FileManager.default.contentsOfDirectory(atPath: lib)) ?? []
        let found = triplets.sorted().map { "\(lib)/\($0)/xfce4/\(tail)" }
        return found.first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? "\(lib)/x86_64-linux-gnu/xfce4/\(tail)"
    }

    static var tools: [String] {
        [
            xvfb, panel, xfceProgram("xfconf/xfconfd"), xfceProgram("notifyd/xfce4-notifyd"), importTool, convert,
            xdotool,
            xwininfo, xprop,
        ]
    }

    /// Skips the test (or fails it under `make check`) without every program the desktop needs; a
    /// function of its own, as a never-returning call in an initialiser leaves code the compiler
    /// warns about.
    private static func requireTools() throws {
        for tool in tools where !FileManager.default.isExecutableFile(atPath: tool) {
            let failure = ServerError(
                "\(tool) is missing: run scripts/deps.sh "
                    + "(xvfb, xfce4-panel, xfce4-notifyd, xfconf, imagemagick, x11-utils, xdotool)"
            )
            try TestServices.missing("needs \(tool) (scripts/deps.sh; `make check` runs this test)", failure: failure)
        }
    }

    /// Starts the X server, xfconfd, the panel and the notification daemon; ``ready()`` waits for them.
    init(root: String) throws {
        try Self.requireTools()
        desktop = try TrayDesktop(root: root)
        folder = root + "/panel"
        let channels = folder + "/config/xfce4/xfconf/xfce-perchannel-xml"
        let base = folder
        for dir in [channels] + ["cache", "data", "runtime", "xdg", "logs"].map({ base + "/" + $0 }) {
            try FileManager.default.createDirectory(
                atPath: dir,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        }
        try Self.panelChannel.write(toFile: channels + "/xfce4-panel.xml", atomically: true, encoding: .utf8)
        try Self.notifydChannel.write(toFile: channels + "/xfce4-notifyd.xml", atomically: true, encoding: .utf8)

        // -displayfd: Xvfb takes the first free display number and writes it to that descriptor
        // (its stdout here) once it accepts connections.
        let xvfb = Process()
        xvfb.executableURL = URL(fileURLWithPath: Self.xvfb)
        xvfb.arguments = [
            "-displayfd", "1", "-screen", "0", "\(Self.screen.width)x\(Self.screen.height)x24",
            "-nolisten", "tcp",
        ]
        let announced = Pipe()
        xvfb.standardOutput = announced
        let xvfbLog = try Self.log(folder + "/logs/Xvfb.log")
        xvfb.standardError = xvfbLog
        try xvfb.run()
        try xvfbLog.close()  // the child has its own copy
        let number = firstLine(of: announced)
        guard !number.isEmpty, number.allSatisfy(\.isNumber) else {
            kill(xvfb.processIdentifier, SIGKILL)
            xvfb.waitUntilExit()
            let said = (try? String(contentsOfFile: folder + "/logs/Xvfb.log", encoding: .utf8)) ?? ""
            throw ServerError("Xvfb did not start: \(said)")
        }
        display = ":" + number
        processes.append(("Xvfb", xvfb))
    }

    deinit {
        // Clients first, the X server last: a client the panel started itself (its plugin wrapper)
        // ends when its display goes. SIGKILL: children inherit the test process's ignored SIGTERM.
        for (_, process) in processes.reversed() where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        for (_, process) in processes.reversed() { process.waitUntilExit() }
    }

    /// What Xfce's programs and the tray see: the private bus, the display, throwaway XDG folders
    /// (no system defaults either: XDG_CONFIG_DIRS is an empty folder), no accessibility bus.
    var environment: [String: String] {
        desktop.environment.merging([
            "DISPLAY": display, "HOME": folder, "XDG_CONFIG_HOME": folder + "/config",
            "XDG_CONFIG_DIRS": folder + "/xdg", "XDG_CACHE_HOME": folder + "/cache", "XDG_DATA_HOME": folder + "/data",
            "XDG_RUNTIME_DIR": folder + "/runtime",
            "GDK_BACKEND": "x11", "NO_AT_BRIDGE": "1",
        ]) { $1 }
    }

    /// Starts xfconfd, then the panel and xfce4-notifyd, and waits until each serves on the bus
    /// and the panel's window is on the screen; fails with their logs when one does not.
    func ready() async throws {
        // A private bus activates nothing: xfconfd (which both read their settings from) first.
        try start("xfconfd", Self.xfceProgram("xfconf/xfconfd"), [])
        try await waitForName("org.xfce.Xfconf", of: "xfconfd")
        // No window manager runs here: without --disable-wm-check the panel waits for one.
        try start("xfce4-panel", Self.panel, ["--disable-wm-check"])
        try start("xfce4-notifyd", Self.xfceProgram("notifyd/xfce4-notifyd"), [])
        try await waitForName("org.kde.StatusNotifierWatcher", of: "xfce4-panel")
        try await waitForName("org.freedesktop.Notifications", of: "xfce4-notifyd")
        _ = try await eventually("the panel's window is on the screen") { [self] in
            try checkRunning()
            return try panelWindow().map { "\($0)" } ?? ""
        } until: {
            !$0.isEmpty
        }
    }

    private func start(_ name: String, _ program: String, _ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: program)
        p.arguments = arguments
        p.environment = environment
        p.standardInput = FileHandle.nullDevice
        let log = try Self.log(folder + "/logs/\(name).log")
        p.standardOutput = log
        p.standardError = log
        try p.run()
        try log.close()  // the child has its own copy
        processes.append((name, p))
    }

    private static func log(_ path: String) throws -> FileHandle {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        return try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    }

    /// What `name` wrote so far (for a failure message).
    func log(_ name: String) -> String {
        (try? String(contentsOfFile: folder + "/logs/\(name).log", encoding: .utf8)) ?? ""
    }

    /// Fails at once, with its log, when a program started here has ended: a wait for it would
    /// otherwise run out its whole bound in silence.
    func checkRunning() throws {
        for (name, process) in processes where !process.isRunning {
            throw ServerError("\(name) ended (status \(process.terminationStatus)): \(log(name))")
        }
        try desktop.checkTrayRuns()
    }

    private func waitForName(_ name: String, of program: String) async throws {
        _ = try await eventually("\(program) owns \(name) on the session bus") { [self] in
            try checkRunning()
            return try desktop.gdbus([
                "call", "--session", "--dest", "org.freedesktop.DBus",
                "--object-path", "/org/freedesktop/DBus",
                "--method", "org.freedesktop.DBus.NameHasOwner", name,
            ]).1
        } until: {
            $0.contains("true")
        }
    }

    // MARK: windows and input

    struct Rect: Equatable, CustomStringConvertible {
        var x, y, width, height: Int
        var description: String { "\(width)x\(height)+\(x)+\(y)" }
    }

    struct Window: CustomStringConvertible {
        let id: String
        let frame: Rect
        /// `_NET_WM_WINDOW_TYPE`'s value (`_NET_WM_WINDOW_TYPE_POPUP_MENU`), "" when unset.
        let type: String
        var description: String { "\(id) \(frame) \(type)" }
    }

    private func x11(_ tool: String, _ arguments: [String]) throws -> (Int32, String, String) {
        try runProcess(tool, arguments, environment: ["DISPLAY": display, "PATH": "/usr/bin:/bin"])
    }

    /// The mapped windows whose WM_CLASS is `windowClass`, with where they are on the screen.
    func visibleWindows(_ windowClass: String) throws -> [Window] {
        // xdotool exits 1 when none matches.
        let found = try x11(Self.xdotool, ["search", "--onlyvisible", "--class", windowClass]).1
        let ids = found.split(separator: "\n").map(String.init)
        return try ids.compactMap { id -> Window? in
            let info = try x11(Self.xwininfo, ["-id", id])
            guard info.0 == 0 else { return nil }  // gone meanwhile
            func value(_ key: String) -> Int? {
                let line = info.1.split(separator: "\n").first { $0.contains(key + ":") }
                return line.flatMap { Int($0.split(separator: ":").last!.trimmingCharacters(in: .whitespaces)) }
            }
            guard let x = value("Absolute upper-left X"), let y = value("Absolute upper-left Y"),
                let w = value("Width"), let h = value("Height")
            else { return nil }
            // "_NET_WM_WINDOW_TYPE(ATOM) = _NET_WM_WINDOW_TYPE_POPUP_MENU", or "…:  not found."
            let property = try x11(Self.xprop, ["-id", id, "_NET_WM_WINDOW_TYPE"]).1
            let type =
                property.contains(" = ")
                ? property.split(separator: "=").last!.trimmingCharacters(in: .whitespacesAndNewlines) : ""
            return Window(id: id, frame: Rect(x: x, y: y, width: w, height: h), type: type)
        }
    }

    /// The panel's own window (not the small ones GTK keeps off screen).
    func panelWindow() throws -> Rect? {
        try visibleWindows("xfce4-panel").map(\.frame).first {
            $0.width >= Self.screen.width / 2 && $0.height >= Self.panelSize
        }
    }

    /// A window on the screen, read after it was drawn.
    struct SeenWindow: CustomStringConvertible {
        let id: String
        let frame: Rect
        let shot: Screenshot
        var description: String { "\(id) \(frame)" }
    }

    /// Waits for a mapped window of `windowClass` (of `type`, when given) that is not one of
    /// `besides`, and until it is drawn: more than two colours, the same on two screenshots in a
    /// row (a window is mapped before it is painted, and a menu may change while it opens).
    func waitForDrawnWindow(
        _ windowClass: String,
        type: String? = nil,
        besides: [String] = [],
        _ what: String
    ) async throws -> SeenWindow {
        var previous: [UInt8]?
        var seen: SeenWindow?
        _ = try await eventually("\(what) is on the screen") { [self] in
            try checkRunning()
            let windows = try visibleWindows(windowClass).filter {
                !besides.contains($0.id) && (type == nil || $0.type == type)
            }
            guard let window = windows.first else { return "no new \(windowClass) window" }
            let shot = try screenshot()
            let f = window.frame
            let left = max(0, f.x)
            let right = min(shot.width, f.x + f.width)
            var pixels: [UInt8] = []
            for y in max(0, f.y)..<min(shot.height, f.y + f.height) {
                pixels += shot.rgb[((y * shot.width + left) * 3)..<((y * shot.width + right) * 3)]
            }
            defer { previous = pixels }
            var colours = Set<Int>()
            for i in stride(from: 0, to: pixels.count, by: 3) {
                let red = Int(pixels[i]) << 16
                let green = Int(pixels[i + 1]) << 8
                colours.insert(red | green | Int(pixels[i + 2]))
            }
            guard colours.count > 2 else { return "\(window): not drawn yet" }
            guard pixels == previous else { return "\(window): still changing" }
            seen = SeenWindow(id: window.id, frame: window.frame, shot: shot)
            return "drawn"
        } until: {
            $0 == "drawn"
        }
        return try #require(seen)
    }

    /// Clicks the left button at (x, y), as a person does (XTest).
    func click(x: Int, y: Int) throws {
        let result = try x11(Self.xdotool, ["mousemove", "\(x)", "\(y)", "click", "1"])
        guard result.0 == 0 else { throw ServerError("xdotool click: \(result.2)") }
    }

    /// Moves the pointer to the bottom left corner, where nothing is: a pointer over the icon
    /// draws a highlight behind it and opens its tooltip, one over a notification highlights it.
    func movePointerAway() throws {
        _ = try x11(Self.xdotool, ["mousemove", "0", "\(Self.screen.height - 1)"])
    }

    /// Presses `key` (an X keysym name: `Escape`).
    func press(_ key: String) throws {
        _ = try x11(Self.xdotool, ["key", key])
    }

    // MARK: the screen

    /// The whole screen as 8-bit RGB, and the PPM it was read from (for ``save(_:_:to:)``).
    struct Screenshot {
        let width: Int, height: Int
        let rgb: [UInt8]
        let ppm: Data

        func pixel(_ x: Int, _ y: Int) -> (Int, Int, Int) {
            let i = (y * width + x) * 3
            return (Int(rgb[i]), Int(rgb[i + 1]), Int(rgb[i + 2]))
        }
    }

    /// Reads the screen (ImageMagick's `import -window root`, as 8-bit PPM: a header and the bytes).
    func screenshot() throws -> Screenshot {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.importTool)
        p.arguments = ["-display", display, "-window", "root", "-depth", "8", "ppm:-"]
        p.environment = ["PATH": "/usr/bin:/bin"]
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw ServerError("import: \(String(decoding: errors, as: UTF8.self))") }
        // "P6", width, height, maximum (255), each followed by one whitespace; then the pixels.
        var fields: [String] = []
        var field = ""
        var index = data.startIndex
        while fields.count < 4, index < data.endIndex {
            let c = Character(UnicodeScalar(data[index]))
            index += 1
            if c.isWhitespace {
                if !field.isEmpty {
                    fields.append(field)
                    field = ""
                }
            } else {
                field.append(c)
            }
        }
        guard fields.count == 4, fields[0] == "P6", let w = Int(fields[1]), let h = Int(fields[2]), fields[3] == "255",
            data.endIndex - index == w * h * 3
        else { throw ServerError("import wrote no 8-bit PPM (\(fields))") }
        return Screenshot(width: w, height: h, rgb: [UInt8](data[index...]), ppm: data)
    }

    /// Writes `area` of `shot` to `path` as a PNG, without the metadata (dates) that would make
    /// every run's file differ.
    func save(_ shot: Screenshot, _ area: Rect, to path: String) throws {
        let result = try runProcess(
            Self.convert,
            ["ppm:-", "-crop", "\(area)", "+repage", "-strip", "png:" + path],
            environment: ["PATH": "/usr/bin:/bin"],
            stdin: shot.ppm
        )
        guard result.0 == 0 else { throw ServerError("convert: \(result.2)") }
    }

    // MARK: settings

    /// One panel at the top, as wide as the screen, holding only the Status Tray plugin
    /// ("systray"). In 4.18 that plugin hosts StatusNotifierItems (and the legacy XEmbed tray)
    /// with no switch to turn them on; `hide-new-items` false shows a new item at once, and with
    /// `menu-is-primary` a left click opens the item's menu (as it does anyway for an item that
    /// says ItemIsMenu, as Lanyard's does).
    static let panelChannel = """
        <?xml version="1.0" encoding="UTF-8"?>
        <channel name="xfce4-panel" version="1.0">
          <property name="configver" type="int" value="2"/>
          <property name="panels" type="array">
            <value type="int" value="1"/>
            <property name="panel-1" type="empty">
              <property name="position" type="string" value="p=6;x=0;y=0"/>
              <property name="length" type="uint" value="100"/>
              <property name="position-locked" type="bool" value="true"/>
              <property name="size" type="uint" value="\(panelSize)"/>
              <property name="plugin-ids" type="array">
                <value type="int" value="1"/>
              </property>
            </property>
          </property>
          <property name="plugins" type="empty">
            <property name="plugin-1" type="string" value="systray">
              <property name="icon-size" type="int" value="\(iconSize)"/>
              <property name="square-icons" type="bool" value="true"/>
              <property name="hide-new-items" type="bool" value="false"/>
              <property name="menu-is-primary" type="bool" value="true"/>
            </property>
          </property>
        </channel>
        """

    /// Notifications in the bottom right corner, away from the panel (without a window manager
    /// there is no work area for xfce4-notifyd to keep clear of it), drawn at once and opaque.
    static let notifydChannel = """
        <?xml version="1.0" encoding="UTF-8"?>
        <channel name="xfce4-notifyd" version="1.0">
          <property name="notify-location" type="uint" value="3"/>
          <property name="do-fadeout" type="bool" value="false"/>
          <property name="do-slideout" type="bool" value="false"/>
          <property name="initial-opacity" type="double" value="1"/>
          <property name="expire-timeout" type="int" value="60"/>
        </channel>
        """
}
