import Age
import Foundation
import LanyardCore
import LanyardDesktop
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// A notification server of a test's own on a ``TrayDesktop``'s bus:
/// Tests/Fixtures/notifications/notification_server.py (Debian's python3-dbus and python3-gi,
/// in scripts/deps.sh), which records every Notify as a JSON line and emits ActionInvoked when
/// asked. Killed on deinit.
final class NotificationServer: @unchecked Sendable {
    static let python = "/usr/bin/python3"
    let record: String
    private let process: Process
    private let desktop: TrayDesktop

    init(_ desktop: TrayDesktop, folder: String) throws {
        let script = repositoryRoot.appendingPathComponent("Tests/Fixtures/notifications/notification_server.py").path
        let check = try runProcess(
            Self.python,
            ["-c", "import dbus, dbus.mainloop.glib; from gi.repository import GLib"]
        )
        guard check.0 == 0 else {
            throw ServerError(
                "\(Self.python) lacks dbus or gi: run scripts/deps.sh (python3-dbus, python3-gi): \(check.2)"
            )
        }
        self.desktop = desktop
        record = folder + "/notifications.jsonl"
        _ = FileManager.default.createFile(atPath: record, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = [script, record]
        process.environment = desktop.environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // It says "ready" once it owns org.freedesktop.Notifications (or ends, failing).
        guard firstLine(of: output).hasPrefix("ready") else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw ServerError("the notification server did not start")
        }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)  // it inherits this process's ignored SIGTERM
        process.waitUntilExit()
    }

    /// Every Notify received so far, in order. First a call of its own to the server: it answers
    /// after handling what reached it before (a Notify the tray sent earlier is in the file then).
    func notifications() throws -> [[String: Any]] {
        let sync = try desktop.gdbus([
            "call", "--session", "--dest", "org.freedesktop.Notifications", "--object-path",
            "/org/freedesktop/Notifications", "--method", "org.freedesktop.Notifications.GetServerInformation",
        ])
        guard sync.0 == 0 else { throw ServerError("the notification server does not answer: \(sync.2)") }
        let text = try String(contentsOfFile: record, encoding: .utf8)
        return try text.split(separator: "\n").map { line in
            try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
        }
    }

    /// The summaries received so far, one a line (what `eventually` shows when it gives up).
    func summaries() throws -> String {
        try notifications().map { "\($0["summary"] as? String ?? "?") \($0["actions"] as? [String] ?? [])" }.joined(
            separator: "\n"
        )
    }

    /// Chooses the button `key` of notification `id`, as a person does on the desktop.
    func invoke(_ id: Int, _ key: String) throws {
        let result = try desktop.gdbus([
            "call", "--session", "--dest", "org.freedesktop.Notifications", "--object-path",
            "/org/freedesktop/Notifications", "--method", "org.lanyard.test.Notifications.InvokeAction",
            "\(id)", key,
        ])
        guard result.0 == 0 else { throw ServerError("InvokeAction failed: \(result.2)") }
    }
}

@Suite(.serialized) struct TrayNotificationTests {
    /// The emulator's usage of `account`: one 5 h window `used` % full, resetting at `resetAt`.
    func setUsage(_ env: IntegrationHome, _ account: String, _ used: Int, resetAt: Int) async throws {
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": account,
                "primary_window": ["used_percent": used, "limit_window_seconds": 18000, "reset_at": resetAt],
            ]
        )
    }

    /// Crossing `[desktop] notify` sends one Notify with a "Switch to home (8 %)" button; later
    /// polls and a restart do not repeat it; the next percentage is said once; the button
    /// switches; a reset is said once; a slot signed in again is said.
    @Test func crossingAPercentageSendsOneNotify() async throws {
        // [switch] poll = 1: the emulator is on this machine, so the tray asks every second.
        let env = try await IntegrationHome(extraConfig: "[switch]\npoll = 1\n")
        var accounts: [String: String] = [:]
        for (slot, email) in [("home", "home@x.com"), ("work", "work@x.com")] {
            accounts[slot] = try await env.signIn(slot, email: email).account.accountID
        }
        #expect(try env.run("switch", "work").status == 0)
        let resetAt = Int(Date().timeIntervalSince1970) + 3600
        try await setUsage(env, accounts["work"]!, 50, resetAt: resetAt)
        try await setUsage(env, accounts["home"]!, 8, resetAt: resetAt)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let server = try NotificationServer(desktop, folder: env.home.root)
        var name = try desktop.startTray(env.home)
        _ = try await eventually("the menu shows work at 50 %") {
            try desktop.dump(name)
        } until: {
            $0.contains("50 % of 5 h")
        }
        #expect(try server.notifications().isEmpty)

        // Past 80 %: one notification, with the switch to the least used other slot.
        try await setUsage(env, accounts["work"]!, 83, resetAt: resetAt)
        _ = try await eventually("one Notify") {
            try server.summaries()
        } until: {
            !$0.isEmpty
        }
        let first = try #require(try server.notifications().first)
        #expect(first["summary"] as? String == "work has used 83 % of its 5 h window", "\(first)")
        #expect(
            first["actions"] as? [String] == ["switch:home", "Switch to home (8 %)", "dismiss", "Dismiss"],
            "\(first)"
        )
        #expect(first["app_name"] as? String == "Lanyard")
        // Lanyard's own icon: its name in the theme, and its pixels for a theme without it.
        #expect(first["icon"] as? String == "lanyard")
        let image = try #require(first["image"] as? [String: Any], "\(first)")
        let expected = LanyardIcon.notificationImage
        #expect(image["width"] as? Int == 48 && image["height"] as? Int == 48, "\(image)")
        #expect(image["rowstride"] as? Int == 48 * 4 && image["has_alpha"] as? Bool == true, "\(image)")
        #expect(image["bits_per_sample"] as? Int == 8 && image["channels"] as? Int == 4, "\(image)")
        #expect(image["sha256"] as? String == hexString(SHA256.digest(expected.rgba)), "\(image)")
        #expect((first["body"] as? String)?.hasPrefix("It resets ") == true, "\(first)")

        // Later polls of the same window (the menu shows each) say nothing more.
        try await setUsage(env, accounts["work"]!, 85, resetAt: resetAt)
        _ = try await eventually("the menu shows 85 %") {
            try desktop.dump(name)
        } until: {
            $0.contains("85 % of 5 h")
        }
        try await setUsage(env, accounts["work"]!, 86, resetAt: resetAt)
        _ = try await eventually("the menu shows 86 %") {
            try desktop.dump(name)
        } until: {
            $0.contains("86 % of 5 h")
        }
        #expect(try server.notifications().count == 1, "\((try? server.summaries()) ?? "")")
        let saved = env.paths.stateDirectory + "/tray-notified.json"
        #expect(permissionBits(saved) == 0o600)

        // A restarted tray remembers.
        #expect(desktop.stopTray().0 == 0)
        name = try desktop.startTray(env.home)
        try await setUsage(env, accounts["work"]!, 87, resetAt: resetAt)
        _ = try await eventually("the restarted tray shows 87 %") {
            try desktop.dump(name)
        } until: {
            $0.contains("87 % of 5 h")
        }
        #expect(try server.notifications().count == 1, "\((try? server.summaries()) ?? "")")

        // Past 95 %: said once more; its button switches to home.
        try await setUsage(env, accounts["work"]!, 96, resetAt: resetAt)
        _ = try await eventually("a second Notify") {
            try server.summaries()
        } until: {
            $0.split(separator: "\n").count == 2
        }
        let second = try server.notifications()[1]
        #expect(second["summary"] as? String == "work has used 96 % of its 5 h window", "\(second)")
        #expect(second["urgency"] as? Int == 2)
        try server.invoke(second["id"] as! Int, "switch:home")
        _ = try await eventually("the button switched to home") {
            try Registry(paths: env.paths).load().active?.name ?? ""
        } until: {
            $0 == "home"
        }

        // Work's window resets; back on work, the tray says so once.
        try await setUsage(env, accounts["work"]!, 2, resetAt: resetAt + 18000)
        #expect(try env.run("switch", "work").status == 0)
        _ = try await eventually("a reset notice") {
            try server.summaries()
        } until: {
            $0.split(separator: "\n").count == 3
        }
        let reset = try server.notifications()[2]
        #expect(reset["summary"] as? String == "work's 5 h window has reset", "\(reset)")
        try await setUsage(env, accounts["work"]!, 3, resetAt: resetAt + 18000)
        _ = try await eventually("the menu shows 3 %") {
            try desktop.dump(name)
        } until: {
            $0.contains("3 % of 5 h")
        }
        #expect(try server.notifications().count == 3, "\((try? server.summaries()) ?? "")")

        // home must sign in again, then does: said once.
        try Registry(paths: env.paths).updateInTest { $0.slots[try Slot("home")]?.state = .reauthenticationRequired }
        _ = try await eventually("the menu lists home under Sign in again") {
            try desktop.dump(name)
        } until: {
            $0.contains("must sign in")
        }
        try await env.signIn("home", email: "home@x.com")
        _ = try await eventually("a signed-in notice") {
            try server.summaries()
        } until: {
            $0.contains("home is signed in again")
        }
        #expect(try server.notifications().count == 4, "\((try? server.summaries()) ?? "")")

        let (status, errors) = desktop.stopTray()
        #expect(status == 0, "\(errors)")
        #expect(!errors.contains("notification not shown"), "\(errors)")
    }

    /// Without a notification server the tray carries on and says why once; a damaged
    /// tray-notified.json is said and replaced, never fatal.
    @Test func noNotificationServerIsSaidOnce() async throws {
        let env = try await IntegrationHome(extraConfig: "[switch]\npoll = 1\n[desktop]\nnotify = 50, 80\n")
        try FileManager.default.createDirectory(
            atPath: env.paths.stateDirectory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        try Data("{\"version\": 1, \"windows\": [".utf8).write(
            to: URL(fileURLWithPath: env.paths.stateDirectory + "/tray-notified.json")
        )
        let account = try #require(try await env.signIn("solo", email: "solo@x.com").account.accountID)
        let resetAt = Int(Date().timeIntervalSince1970) + 3600
        try await setUsage(env, account, 60, resetAt: resetAt)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let name = try desktop.startTray(env.home)
        _ = try await eventually("the menu shows 60 %") {
            try desktop.dump(name)
        } until: {
            $0.contains("60 % of 5 h")
        }
        try await setUsage(env, account, 90, resetAt: resetAt)
        _ = try await eventually("the menu shows 90 %") {
            try desktop.dump(name)
        } until: {
            $0.contains("90 % of 5 h")
        }
        // Both crossings were decided (and saved) though neither could be shown.
        _ = try await eventually("both crossings saved") {
            (try? String(contentsOfFile: env.paths.stateDirectory + "/tray-notified.json", encoding: .utf8)) ?? ""
        } until: {
            $0.contains("\"percent\" : 80") || $0.contains("\"percent\": 80")
        }
        #expect(desktop.trayIsRunning)
        let (status, errors) = desktop.stopTray()
        #expect(status == 0, "\(errors)")
        #expect(errors.components(separatedBy: "notification not shown").count == 2, "\(errors)")
        #expect(errors.contains("tray-notified.json is damaged"), "\(errors)")
    }

    /// `[desktop] notify = off`: the active slot's usage is not asked on a timer, only at start and
    /// on Refresh now (the subject is what does not happen over time, so the test lets two poll
    /// intervals pass by the clock).
    @Test func offMeansNoUsageTimer() async throws {
        let env = try await IntegrationHome(extraConfig: "[switch]\npoll = 1\n[desktop]\nnotify = off\n")
        let account = try #require(try await env.signIn("solo", email: "solo@x.com").account.accountID)
        let resetAt = Int(Date().timeIntervalSince1970) + 3600
        try await setUsage(env, account, 50, resetAt: resetAt)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let server = try NotificationServer(desktop, folder: env.home.root)
        let name = try desktop.startTray(env.home)
        let dump = try await eventually("the menu shows 50 %") {
            try desktop.dump(name)
        } until: {
            $0.contains("50 % of 5 h")
        }
        let before = try await env.server.stat("usage_requests")
        try await setUsage(env, account, 90, resetAt: resetAt)
        let changed = ContinuousClock.now
        _ = try await eventually("two poll intervals pass") {
            "\(changed.duration(to: .now) > .milliseconds(2500))"
        } until: {
            $0 == "true"
        }
        #expect(try await env.server.stat("usage_requests") == before)
        #expect(try desktop.dump(name).contains("50 % of 5 h"))
        // Refresh now › solo asks once (the last "solo": Details › solo comes before it).
        let refresh = try #require(dumpedEntries(dump).last { $0.label == "solo" }, "\(dump)")
        #expect(try desktop.click(name, id: refresh.id).0 == 0)
        _ = try await eventually("the menu shows 90 %") {
            try desktop.dump(name)
        } until: {
            $0.contains("90 % of 5 h")
        }
        #expect(try await env.server.stat("usage_requests") == before + 1)
        #expect(try server.notifications().isEmpty, "\((try? server.summaries()) ?? "")")
        #expect(desktop.stopTray().0 == 0)
    }
}
