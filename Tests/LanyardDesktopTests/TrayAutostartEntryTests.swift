import Foundation
import LanyardDesktop
import LanyardTestSupport
import Testing

/// The autostart entry's text: the Desktop Entry spec's Exec quoting, checked by
/// desktop-file-validate (desktop-file-utils; scripts/deps.sh), and the entry the packages ship.
@Suite struct TrayAutostartEntryTests {
    static let validator = "/usr/bin/desktop-file-validate"

    /// desktop-file-validate's complaints about `text` ("" when none).
    func validate(_ text: String) throws -> String {
        guard FileManager.default.isExecutableFile(atPath: Self.validator) else {
            throw ServerError("\(Self.validator) is missing: run scripts/deps.sh (desktop-file-utils)")
        }
        let home = TestHome()
        let path = home.root + "/lanyard-tray.desktop"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let (status, out, err) = try runProcess(Self.validator, [path])
        return status == 0 ? out + err : "exit \(status): \(out)\(err)"
    }

    @Test func execQuotesReservedCharactersAsTheSpecSays() {
        #expect(TrayAutostart.execValue(["/usr/bin/lanyard", "tray"]) == "/usr/bin/lanyard tray")
        // A space: the argument is quoted.
        #expect(TrayAutostart.execValue(["/opt/my tools/lanyard", "tray"]) == #""/opt/my tools/lanyard" tray"#)
        // `$`, `"`, `` ` `` and `\` are backslash-escaped inside the quotes, and every backslash is
        // doubled again by the string escaping of the value.
        #expect(TrayAutostart.execValue(["/a$b/c\"d/e`f/g\\h", "tray"]) == #""/a\\$b/c\\"d/e\\`f/g\\\\h" tray"#)
        // `%` starts a field code: doubled, quoted or not.
        #expect(TrayAutostart.execValue(["/50%/lanyard", "tray"]) == "/50%%/lanyard tray")
        #expect(TrayAutostart.execValue(["/50% off/lanyard"]) == #""/50%% off/lanyard""#)
    }

    @Test func entriesForAwkwardPathsPassDesktopFileValidate() throws {
        for path in [
            "/usr/bin/lanyard", "/home/ann/my tools/lanyard", "/opt/a$b \"c\" `d` \\e/50%/l'anyard",
            "/opt/émile/lanyard",
        ] {
            let entry = try TrayAutostart.entry(executable: path)
            #expect(try validate(entry) == "", "\(path):\n\(entry)")
            #expect(TrayAutostart.isOurs(entry))
        }
    }

    @Test func pathsTheFormatCannotSayAreRefused() {
        #expect(throws: TrayAutostartError.unrepresentable(path: "lanyard", reason: "it is not an absolute path")) {
            try TrayAutostart.entry(executable: "lanyard")
        }
        #expect(throws: TrayAutostartError.unrepresentable(path: "/tmp/a\nb", reason: "it holds a control character")) {
            try TrayAutostart.entry(executable: "/tmp/a\nb")
        }
    }

    /// Packaging/xdg/lanyard-tray.desktop (installed by make install and the .deb, its prefix
    /// rewritten) is the entry `--install-autostart` writes for /usr/local/bin/lanyard.
    @Test func thePackagedEntryIsWhatInstallWrites() throws {
        let packaged = try String(
            contentsOfFile: repositoryRoot.path + "/Packaging/xdg/lanyard-tray.desktop",
            encoding: .utf8
        )
        #expect(packaged == (try TrayAutostart.entry(executable: "/usr/local/bin/lanyard")))
        #expect(try validate(packaged) == "")
        // Not skipped by systemd-xdg-autostart-generator: on GNOME and Plasma it is what starts it.
        #expect(!packaged.contains("X-systemd-skip") && !packaged.contains("Hidden="))
        // Lanyard's own icon (installed in hicolor), not a theme's stock one.
        #expect(packaged.contains("\nIcon=lanyard\n"), "\(packaged)")
    }

    @Test func onlyAnEntryWithTheMarkerIsOurs() {
        #expect(!TrayAutostart.isOurs("[Desktop Entry]\nType=Application\nExec=other-tray\n"))
        #expect(
            !TrayAutostart.isOurs("[Desktop Entry]\nComment=X-Lanyard-Autostart=true is not on a line of its own\n")
        )
        #expect(TrayAutostart.isOurs("[Desktop Entry]\nX-Lanyard-Autostart = true\r\n"))
    }
}
