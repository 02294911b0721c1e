import Foundation
import Glibc
import LanyardSupport
import LanyardTestSupport
import Testing

/// `lanyard tray --install-autostart` / `--uninstall-autostart` and one tray per session, through
/// the real CLI: a copy of the built binaries in a folder with a space in its name, the entry
/// checked with desktop-file-validate (desktop-file-utils; scripts/deps.sh), a second tray run
/// against a first one on a private session bus with a real StatusNotifierWatcher.
@Suite struct TrayAutostartTests {
    /// `lanyard` and `lanyard-net` copied to `<root>/my tools/` (the entry must name that path).
    static func binariesInAFolderWithASpace(_ home: TestHome) throws -> String {
        let folder = home.root + "/my tools"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for name in ["lanyard", "lanyard-net"] {
            try FileManager.default.copyItem(atPath: builtBinary(name), toPath: folder + "/" + name)
        }
        return folder + "/lanyard"
    }

    static func run(
        _ binary: String,
        _ home: TestHome,
        _ arguments: [String]
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        let (status, out, err) = try runProcess(binary, arguments, environment: home.environment)
        return (status, out, err)
    }

    var entryPath: (TestHome) -> String { { $0.root + "/config/autostart/lanyard-tray.desktop" } }

    @Test func installWritesAnEntryForThisBinaryAndUninstallRemovesIt() throws {
        let home = TestHome()
        home.withoutSessionBus = true
        let lanyard = try Self.binariesInAFolderWithASpace(home)
        let path = entryPath(home)

        let installed = try Self.run(lanyard, home, ["tray", "--install-autostart"])
        #expect(installed.status == 0, "\(installed.stderr)")
        #expect(installed.stdout == "installed \(path): `\(lanyard) tray` starts at login\n")
        let entry = try String(contentsOfFile: path, encoding: .utf8)
        #expect(entry.contains("\nExec=\"\(lanyard)\" tray\n"), "\(entry)")
        #expect(entry.contains("\nTryExec=\(lanyard)\n"))
        #expect(permissionBits(path) == 0o644)
        #expect(permissionBits(home.root + "/config/autostart") == 0o700)
        #expect(
            !FileManager.default.fileExists(atPath: home.root + "/run/lanyard/tray.lock"),
            "installing must not start the tray"
        )
        let (valid, out, err) = try runProcess("/usr/bin/desktop-file-validate", [path])
        #expect(valid == 0 && out.isEmpty && err.isEmpty, "desktop-file-validate: \(out)\(err)")

        // Again: nothing to do, said so.
        let again = try Self.run(lanyard, home, ["tray", "--install-autostart"])
        #expect(
            again.status == 0 && again.stdout.hasPrefix("already installed: \(path)"),
            "\(again.stdout)\(again.stderr)"
        )

        let removed = try Self.run(lanyard, home, ["tray", "--uninstall-autostart"])
        #expect(
            removed.status == 0 && removed.stdout == "removed \(path): the tray no longer starts at login\n",
            "\(removed.stderr)"
        )
        #expect(!FileManager.default.fileExists(atPath: path))
        let absent = try Self.run(lanyard, home, ["tray", "--uninstall-autostart"])
        #expect(absent.status == 0 && absent.stdout.hasPrefix("no autostart entry to remove"), "\(absent.stderr)")

        // An existing autostart folder keeps its mode.
        chmod(home.root + "/config/autostart", 0o755)
        #expect(try Self.run(lanyard, home, ["tray", "--install-autostart"]).status == 0)
        #expect(permissionBits(home.root + "/config/autostart") == 0o755)

        let both = try home.run("tray", "--install-autostart", "--uninstall-autostart")
        #expect(both.status == 2)
    }

    @Test func anEntryLanyardDidNotWriteIsLeftAlone() throws {
        let home = TestHome()
        home.withoutSessionBus = true
        let path = entryPath(home)
        try FileManager.default.createDirectory(
            atPath: home.root + "/config/autostart",
            withIntermediateDirectories: true
        )
        let foreign = "[Desktop Entry]\nType=Application\nName=Someone else's tray\nExec=other-tray\n"
        try foreign.write(toFile: path, atomically: true, encoding: .utf8)

        let install = try home.run("tray", "--install-autostart")
        #expect(
            install.status == 1 && install.stderr.contains("was not written by Lanyard")
                && install.stderr.contains("--force"),
            "\(install.stderr)"
        )
        let uninstall = try home.run("tray", "--uninstall-autostart")
        #expect(uninstall.status == 1 && uninstall.stderr.contains("not going to remove it"), "\(uninstall.stderr)")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == foreign)

        let forced = try home.run("tray", "--install-autostart", "--force")
        #expect(forced.status == 0 && forced.stdout.hasPrefix("replaced \(path)"), "\(forced.stderr)")
        #expect(try String(contentsOfFile: path, encoding: .utf8).contains("X-Lanyard-Autostart=true"))
        #expect(try home.run("tray", "--uninstall-autostart").status == 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// The unit and the autostart entry both enabled, or the tray started twice: the second one
    /// says so in one line and exits 0 while the first keeps the one icon.
    @Test func aSecondTrayInTheSessionExitsAtOnce() async throws {
        let home = TestHome()
        home.withoutSessionBus = true
        // Slots in the file store, as in the other tray tests. (In full parallel runs the first
        // tray here sometimes never registered with the watcher, whatever the store; the tray now
        // keeps retrying a refused registration: see the closing note of stop 38.)
        try home.writeConfig("[store]\nbackend = file\n")
        let desktop = try TrayDesktop(root: home.root)
        try desktop.startWatcher()
        let name = try desktop.startTray(home)
        _ = try await eventually("the watcher lists the first tray") {
            try desktop.registeredItems() + "\ntray said: " + desktop.trayStderrSoFar() + "\nwatcher said: "
                + desktop.watcherLog()
        } until: {
            $0.contains(name)
        }
        let pid = String(name.split(separator: "-")[1])

        let second = try home.run(["tray"], extraEnvironment: ["DBUS_SESSION_BUS_ADDRESS": desktop.address])
        #expect(second.status == 0)
        #expect(second.stdout == "")
        #expect(second.stderr == "lanyard tray: already running (pid \(pid))\n")
        let items = try desktop.registeredItems()
        #expect(items.components(separatedBy: "StatusNotifierItem-").count == 2, "one item: \(items)")
        #expect(desktop.trayIsRunning)

        // The agent runs beside it: their locks are not the same. It says "started" once it holds
        // its lock and handles SIGTERM, and the test sends SIGTERM at once. (Under load that
        // SIGTERM was lost about once in 30 runs: a dispatch signal source took effect only later,
        // on libdispatch's manager thread. InterruptSignalTests pins the cause down.)
        let (agent, _, agentErrors) = try home.start(
            ["agent"],
            extraEnvironment: ["DBUS_SESSION_BUS_ADDRESS": desktop.address]
        )
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }
        var agentSaid = ""
        _ = try await eventually("the agent has started") {
            agentSaid += availableText(agentErrors)
            return agentSaid + (agent.isRunning ? "" : "\n(ended)")
        } until: {
            $0.contains("lanyard agent: started") || $0.hasSuffix("(ended)")
        }
        #expect(agent.isRunning && desktop.trayIsRunning)
        agent.terminate()
        _ = try await eventually("the agent ends on SIGTERM") {
            agentSaid += availableText(agentErrors)
            return agent.isRunning ? "still running; it said:\n\(agentSaid)" : "ended"
        } until: {
            $0 == "ended"
        }
        agentSaid += await BlockingExecutor.shared.run {
            let rest = String(decoding: agentErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            agent.waitUntilExit()
            return rest
        }
        #expect(agent.terminationStatus == 0 && agentSaid.contains("lanyard agent: started"), "\(agentSaid)")

        // Once the first has ended, the next one starts.
        let (status, errors) = desktop.stopTray()
        #expect(status == 0, "\(errors)")
        let next = try desktop.startTray(home)
        _ = try await eventually("the watcher lists the next tray") {
            try desktop.registeredItems()
        } until: {
            $0.contains(next)
        }
        #expect(desktop.stopTray().0 == 0)
    }
}
