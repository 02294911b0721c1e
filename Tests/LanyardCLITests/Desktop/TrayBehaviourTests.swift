import Foundation
import LanyardCore
import LanyardDesktop
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardCLI

/// The labels of the menu's top level, in order: the entries whose `"id"` line is as indented as
/// the root's first child's (dbusmenu-dumper prints each submenu one level deeper).
func topLevelLabels(_ dump: String) -> [String] {
    let lines = dump.split(separator: "\n").map(String.init)
    func indent(_ line: String) -> Int { line.prefix { $0 == " " || $0 == "\t" }.count }
    let idLines = lines.indices.filter { lines[$0].trimmingCharacters(in: .whitespaces).hasPrefix("\"id\": ") }
    guard idLines.count > 1 else { return [] }
    let level = indent(lines[idLines[1]])
    var labels: [String] = []
    for (n, start) in idLines.enumerated() where indent(lines[start]) == level {
        let end = n + 1 < idLines.count ? idLines[n + 1] : lines.count
        // Its own properties only: up to the next entry's id (a submenu's children come after).
        let own = lines[start..<end].filter { indent($0) == level }
        let label = own.first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("\"label\": ") }
        let type = own.first { $0.contains("\"type\": 'separator'") }
        if type != nil {
            labels.append("-")
            continue
        }
        guard let label else { continue }
        var text = label.trimmingCharacters(in: .whitespaces).dropFirst("\"label\": ".count)
        if text.hasSuffix(",") { text = text.dropLast() }
        if text.hasPrefix("'") && text.hasSuffix("'") && text.count >= 2 { text = text.dropFirst().dropLast() }
        labels.append(String(text))
    }
    return labels
}

/// `text` as dbusmenu-dumper prints it: every character outside ASCII as `?`.
func asDumped(_ text: String) -> String {
    String(String.UnicodeScalarView(text.unicodeScalars.map { $0.isASCII ? $0 : "?" }))
}

/// Each behaviour of the tray at a glance, end to end: `lanyard tray` on a bus of the test's own
/// beside the real status-notifier-watcher, read with dbusmenu-dumper, notifications caught by the
/// test's notification server, usage from the ChatGPT emulator.
@Suite(.serialized) struct TrayBehaviourTests {
    func window(_ used: Int, resetAt: Int) -> [String: Any] {
        ["used_percent": used, "limit_window_seconds": 18000, "reset_at": resetAt]
    }

    func setUsage(_ env: IntegrationHome, _ account: String, _ used: Int, resetAt: Int) async throws {
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": account,
                "primary_window": window(used, resetAt: resetAt),
            ]
        )
    }

    /// One failed check (HTTP 503 from the usage endpoint) keeps the last figures, marked with
    /// their age and the reason in words, never an internal code; the icon turns striped.
    @Test func aFailedCheckKeepsTheFiguresMarkedStale() async throws {
        let env = try await IntegrationHome()
        let account = try #require(try await env.signIn("work", email: "work@x.com").account.accountID)
        try await setUsage(env, account, 42, resetAt: Int(Date().timeIntervalSince1970) + 3600)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let name = try desktop.startTray(env.home)
        let fresh = try await eventually("the menu shows 42 %") {
            try desktop.dump(name)
        } until: {
            $0.contains(asDumped("work \u{2014} 42 % of 5 h"))
        }
        let freshIcon = try desktop.itemProperty(name, "IconPixmap")

        try await env.server.hook(
            "/_test/fault",
            ["endpoint": "usage", "type": "status", "status": 503, "count": 1000]
        )
        // Refresh now › work (the last "work": Details › work comes first).
        let refresh = try #require(dumpedEntries(fresh).last { $0.label == "work" }, "\(fresh)")
        #expect(try desktop.click(name, id: refresh.id).0 == 0)
        let stale = try await eventually("the figures are kept, marked stale") {
            try desktop.dump(name)
        } until: {
            $0.contains(asDumped("42 % \u{00B7} just now \u{2014} the server answered 503"))
        }
        let row = asDumped("work \u{2014} 42 % of 5 h \u{00B7} just now")
        #expect(dumpedEntries(stale).contains { $0.label == row && $0.toggle == 1 }, "\(stale)")
        #expect(!stale.contains("http_error") && !stale.contains("usage unknown"), "\(stale)")
        #expect(try desktop.itemProperty(name, "ToolTip").contains("the server answered 503"))
        #expect(try desktop.itemProperty(name, "IconPixmap") != freshIcon, "stale figures draw striped bars")
        #expect(try desktop.itemProperty(name, "XAyatanaLabel") == "(<'42 %'>,)\n")
        #expect(desktop.stopTray().0 == 0)
    }

    /// The active slot reaching its limit is announced once, with a switch to the slot with room;
    /// its button switches, logged `by tray`.
    @Test func theLimitIsAnnouncedWithASwitchToTheSlotWithRoom() async throws {
        let env = try await IntegrationHome(extraConfig: "[switch]\npoll = 1\n")
        let bob = try #require(try await env.signIn("bob", email: "bob@x.com").account.accountID)
        let erin = try #require(try await env.signIn("erin", email: "erin@x.com").account.accountID)
        #expect(try env.run("switch", "bob").status == 0)
        let resetAt = Int(Date().timeIntervalSince1970) + 3600
        try await setUsage(env, bob, 50, resetAt: resetAt)
        try await setUsage(env, erin, 10, resetAt: resetAt)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let server = try NotificationServer(desktop, folder: env.home.root)
        let name = try desktop.startTray(env.home)
        _ = try await eventually("the menu shows both") {
            try desktop.dump(name)
        } until: {
            $0.contains(asDumped("bob \u{2014} 50 % of 5 h")) && $0.contains(asDumped("erin \u{2014} 10 % of 5 h"))
        }
        try await setUsage(env, bob, 100, resetAt: resetAt)
        _ = try await eventually("the limit is announced") {
            try server.summaries()
        } until: {
            $0.contains("bob is at its limit")
        }
        let notes = try server.notifications()
        #expect(notes.count == 1, "\((try? server.summaries()) ?? "")")
        let limit = try #require(notes.first)
        #expect((limit["summary"] as? String)?.hasPrefix("bob is at its limit until ") == true, "\(limit)")
        let body = limit["body"] as? String ?? ""
        #expect(body.hasPrefix("Its 5 h window is used up; it resets in "), "\(limit)")
        #expect(body.hasSuffix("(\(clockTime(resetAt)))."), "\(limit)")
        let buttons = ["switch:erin", "Switch to erin (10 %)", "dismiss", "Dismiss"]
        #expect(limit["actions"] as? [String] == buttons, "\(limit)")
        #expect(limit["urgency"] as? Int == 2)
        _ = try await eventually("the row says so first") {
            try desktop.dump(name)
        } until: {
            $0.contains(asDumped("bob \u{2014} at limit until "))
        }
        // Later polls of the same window (two more requests of the server) say nothing more.
        let asked = try await env.server.stat("usage_requests")
        try await eventually("two more polls (the tray stopped polling)") {
            try await env.server.stat("usage_requests")
        } until: {
            $0 >= asked + 2
        }
        #expect(try server.notifications().count == 1, "\((try? server.summaries()) ?? "")")

        try server.invoke(limit["id"] as! Int, "switch:erin")
        let paths = env.paths
        _ = try await eventually("erin is active") {
            try Registry(paths: paths).load().active?.name ?? ""
        } until: {
            $0 == "erin"
        }
        let switchEvent = try #require(EventLog(paths: env.paths).read().last { $0["event"]?.string == "switch" })
        #expect(switchEvent["source"]?.string == "tray" && switchEvent["to"]?.string == "erin", "\(switchEvent)")
        #expect(desktop.stopTray().0 == 0)
    }

    /// The time of day the tray writes for `unix` ("21:11", or with the date on another day).
    func clockTime(_ unix: Int) -> String {
        RelativeTime.clockTime(Date(timeIntervalSince1970: TimeInterval(unix)), now: Date())
    }

    /// Usage another command fetched (`lanyard usage work`) reaches the tray through usage.json,
    /// without the tray asking the server (`[desktop] notify = off`: no poll).
    @Test func usageAnotherCommandFetchedReachesTheTray() async throws {
        let env = try await IntegrationHome(extraConfig: "[desktop]\nnotify = off\n")
        let account = try #require(try await env.signIn("work", email: "work@x.com").account.accountID)
        let resetAt = Int(Date().timeIntervalSince1970) + 3600
        try await setUsage(env, account, 20, resetAt: resetAt)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let name = try desktop.startTray(env.home)
        _ = try await eventually("the menu shows 20 %") {
            try desktop.dump(name)
        } until: {
            $0.contains(asDumped("work \u{2014} 20 % of 5 h"))
        }
        try await setUsage(env, account, 77, resetAt: resetAt)
        let before = try await env.server.stat("usage_requests")
        let usage = try env.run("usage", "work")
        #expect(usage.status == 0 && usage.stdout.contains("77%"), "\(usage.stdout)\(usage.stderr)")
        _ = try await eventually("the menu shows what `usage` fetched") {
            try desktop.dump(name)
        } until: {
            $0.contains(asDumped("work \u{2014} 77 % of 5 h"))
        }
        #expect(try desktop.itemProperty(name, "XAyatanaLabel") == "(<'77 %'>,)\n")
        #expect(try await env.server.stat("usage_requests") == before + 1, "only `lanyard usage` asked")
        #expect(desktop.stopTray().0 == 0)
    }

    /// The rows, their order and the top level as a host shows them: each slot's state first,
    /// then the actions. A click switches to a slot at its limit: said at once, logged `by tray`.
    /// `[desktop] label = slot` names the active slot beside the icon.
    @Test func rowsReadStateFirstAndAClickIsLoggedByTray() async throws {
        let env = try await IntegrationHome(extraConfig: "[desktop]\nlabel = slot\n")
        let alice = try #require(try await env.signIn("alice", email: "alice@x.com").account.accountID)
        let bob = try #require(try await env.signIn("bob", email: "bob@x.com").account.accountID)
        try await env.signIn("carol", email: "carol@x.com")
        #expect(try env.run("switch", "alice").status == 0)
        try Registry(paths: env.paths).updateInTest { $0.slots[try Slot("carol")]?.state = .reauthenticationRequired }
        let resetAt = Int(Date().timeIntervalSince1970) + 3600
        try await setUsage(env, alice, 35, resetAt: resetAt)
        try await setUsage(env, bob, 100, resetAt: resetAt)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let server = try NotificationServer(desktop, folder: env.home.root)
        let name = try desktop.startTray(env.home)
        let dump = try await eventually("the menu shows every slot's state") {
            try desktop.dump(name)
        } until: {
            $0.contains(asDumped("alice \u{2014} 35 % of 5 h")) && $0.contains(asDumped("bob \u{2014} at limit until "))
        }
        let top = topLevelLabels(dump)
        let until = asDumped("bob \u{2014} at limit until \(clockTime(resetAt))")
        let expected = [
            "alice \u{2014} 35 % of 5 h", until, "carol \u{2014} must sign in", "-", "Details",
            "Best account now", "Refresh now", "Sign in again\u{2026}", "Open usage details", "-", "Quit",
        ]
        .map(asDumped)
        #expect(top == expected, "\(top)\n\(dump)")
        #expect(top.allSatisfy { $0.count <= 48 })
        #expect(try desktop.itemProperty(name, "XAyatanaLabel") == "(<'alice'>,)\n")

        let row = try #require(dumpedEntries(dump).first { $0.toggle != nil && $0.label.hasPrefix("bob ") })
        // Each row carries its slot's meter (dbusmenu's icon-data, a PNG) for hosts that show item
        // icons: a calm one and one at the limit differ.
        let aliceRow = try #require(dumpedEntries(dump).first { $0.toggle != nil && $0.label.hasPrefix("alice ") })
        func rowIcon(_ id: Int) throws -> String {
            try desktop.gdbus([
                "call", "--session", "--dest", name, "--object-path", "/MenuBar", "--method",
                "com.canonical.dbusmenu.GetProperty", "\(id)", "icon-data",
            ]).1
        }
        let (aliceIcon, bobIcon) = (try rowIcon(aliceRow.id), try rowIcon(row.id))
        let pngMagic = "0x89, 0x50, 0x4e, 0x47"
        #expect(aliceIcon.contains(pngMagic) && bobIcon.contains(pngMagic), "\(aliceIcon.prefix(80))")
        #expect(aliceIcon != bobIcon)
        #expect(try desktop.click(name, id: row.id).0 == 0)
        let paths = env.paths
        _ = try await eventually("bob is active") {
            try Registry(paths: paths).load().active?.name ?? ""
        } until: {
            $0 == "bob"
        }
        let switchEvent = try #require(EventLog(paths: env.paths).read().last { $0["event"]?.string == "switch" })
        #expect(switchEvent["source"]?.string == "tray" && switchEvent["to"]?.string == "bob", "\(switchEvent)")
        #expect(try env.run("events").stdout.contains("by tray"))
        // The switch to a slot at its limit is said at once, with a way out.
        _ = try await eventually("the switch to a slot at its limit is said") {
            try server.summaries()
        } until: {
            $0.contains("bob is at its limit until \(clockTime(resetAt))")
        }
        let said = try #require(
            try server.notifications().first {
                ($0["summary"] as? String)?.hasPrefix("bob is at its limit") == true
            }
        )
        #expect(said["body"] as? String == "Lanyard switched to it, but it cannot be used until then.", "\(said)")
        #expect((said["actions"] as? [String])?.first == "switch:alice", "\(said)")
        _ = try await eventually("the label follows") {
            try desktop.itemProperty(name, "XAyatanaLabel")
        } until: {
            $0 == "(<'bob'>,)\n"
        }
        // A switch in a terminal to a slot that must sign in is said at once too, with the way back.
        #expect(try env.run("switch", "carol").status == 0)
        _ = try await eventually("the switch to a slot that must sign in is said") {
            try server.summaries()
        } until: {
            $0.contains("carol must sign in again")
        }
        let mustSignIn = try #require(
            try server.notifications().first {
                $0["summary"] as? String == "carol must sign in again"
            }
        )
        let offered = Array((mustSignIn["actions"] as? [String] ?? []).prefix(2))
        #expect(offered == ["sign-in:carol", "Sign in again\u{2026}"], "\(mustSignIn)")
        #expect(desktop.stopTray().0 == 0)

        // `label = off`: no label at all.
        try env.home.writeConfig(
            try String(contentsOfFile: env.paths.configFile, encoding: .utf8)
                .replacingOccurrences(of: "label = slot", with: "label = off")
        )
        let again = try desktop.startTray(env.home)
        _ = try await eventually("the restarted tray shows bob") {
            try desktop.dump(again)
        } until: {
            $0.contains(asDumped("bob \u{2014} at limit"))
        }
        #expect(try desktop.itemProperty(again, "XAyatanaLabel") == "(<''>,)\n")
        #expect(try desktop.itemProperty(again, "XAyatanaLabelGuide") == "(<''>,)\n")
        #expect(desktop.stopTray().0 == 0)
    }

    /// At start the active slot is already past 80 %: its warning waits for the other slots' first
    /// figures, so its one notification offers the switch to the slot with room.
    @Test func theFirstWarningWaitsForTheOtherSlotsUsage() async throws {
        let env = try await IntegrationHome()
        let work = try #require(try await env.signIn("work", email: "work@x.com").account.accountID)
        var others: [String] = []
        for slot in ["home", "lab", "spare"] {
            others.append(try #require(try await env.signIn(slot, email: "\(slot)@x.com").account.accountID))
        }
        #expect(try env.run("switch", "work").status == 0)
        let resetAt = Int(Date().timeIntervalSince1970) + 3600
        try await setUsage(env, work, 90, resetAt: resetAt)
        for (account, used) in zip(others, [40, 6, 70]) { try await setUsage(env, account, used, resetAt: resetAt) }
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let server = try NotificationServer(desktop, folder: env.home.root)
        let name = try desktop.startTray(env.home)
        _ = try await eventually("the warning") {
            try server.summaries()
        } until: {
            $0.contains("work has used 90 %")
        }
        let warning = try #require(try server.notifications().first)
        let buttons = ["switch:lab", "Switch to lab (6 %)", "dismiss", "Dismiss"]
        #expect(warning["actions"] as? [String] == buttons, "\(warning)")
        _ = try await eventually("every slot's figures") {
            try desktop.dump(name)
        } until: {
            $0.contains(asDumped("spare \u{2014} 70 %"))
        }
        #expect(try server.notifications().count == 1, "\((try? server.summaries()) ?? "")")
        #expect(desktop.stopTray().0 == 0)
    }

    /// A switch from the menu that Codex cannot follow (Codex keeps its sign-in in memory only)
    /// is undone and said by notification, not only on the tray's stderr.
    @Test func aSwitchThatFailsIsSaidByNotification() async throws {
        let env = try await IntegrationHome(extraConfig: "[integrations]\ncodex = true")
        try await env.signIn("home", email: "home@x.com")
        try await env.signIn("work", email: "work@x.com")
        #expect(try env.run("switch", "work").status == 0)
        try Data("cli_auth_credentials_store = \"ephemeral\"\n".utf8)
            .write(to: URL(fileURLWithPath: env.codexHome + "/config.toml"))
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let server = try NotificationServer(desktop, folder: env.home.root)
        let name = try desktop.startTray(env.home, extraEnvironment: ["CODEX_HOME": env.codexHome])
        let dump = try await eventually("the menu has both slots") {
            try desktop.dump(name)
        } until: {
            $0.contains("home@x.com") && $0.contains("work@x.com")
        }
        let home = try #require(dumpedEntries(dump).first { $0.toggle != nil && $0.label.hasPrefix("home") })
        #expect(try desktop.click(name, id: home.id).0 == 0)
        _ = try await eventually("the failed switch is said") {
            try server.summaries()
        } until: {
            $0.contains("Lanyard did not switch to home")
        }
        let said = try #require(
            try server.notifications().first {
                $0["summary"] as? String == "Lanyard did not switch to home"
            }
        )
        let body = said["body"] as? String ?? ""
        #expect(body.contains("work is still the active slot") && body.contains("ephemeral"), "\(body)")
        #expect(try Registry(paths: env.paths).loadInTest().active?.name == "work")
        let (status, errors) = desktop.stopTray()
        #expect(status == 0 && errors.contains("did not switch to home"), "\(errors)")
    }

    /// "Sign in again…" without a terminal on a desktop: the browser sign-in runs in the
    /// background (a stand-in xdg-open fetches the page as a browser does) and its outcome is said
    /// by notification, a refusal and then a sign-in. With neither a terminal nor a browser, a
    /// notification says why nothing happened.
    @Test func signInAgainWithoutATerminal() async throws {
        let port = try freeLoopbackPort()
        let env = try await IntegrationHome(emulatorArguments: registeredRedirects([port]))
        try await env.signIn("work", email: "work@x.com")
        try await env.signIn("gone", email: "gone@x.com")
        #expect(try env.run("switch", "work").status == 0)
        try Registry(paths: env.paths).updateInTest { $0.slots[try Slot("gone")]?.state = .reauthenticationRequired }
        let bin = env.home.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        // The "browser": fetches the page and follows the redirects, in the background as xdg-open does.
        try "#!/bin/sh\nexec /usr/bin/curl -sS -L -o /dev/null --max-time 60 \"$1\"\n"
            .write(toFile: bin + "/xdg-open", atomically: true, encoding: .utf8)
        chmod(bin + "/xdg-open", 0o755)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let server = try NotificationServer(desktop, folder: env.home.root)
        // PATH holds the stand-in xdg-open and no x-terminal-emulator.
        var name = try desktop.startTray(
            env.home,
            extraEnvironment: [
                "PATH": bin, "DISPLAY": ":0",
                "LANYARD_TEST_CALLBACK_PORTS": "\(port)",
            ]
        )
        let dump = try await eventually("the menu offers to sign gone in again") {
            try desktop.dump(name)
        } until: {
            $0.contains("Sign in again")
        }
        // "gone" is under Details, Refresh now and, last, under Sign in again….
        let signIn = try #require(dumpedEntries(dump).last { $0.label == "gone" }, "\(dump)")

        // Cancel is pressed in the browser.
        try await env.server.hook("/_test/browser", ["action": "deny"])
        #expect(try desktop.click(name, id: signIn.id).0 == 0)
        _ = try await eventually("the refusal is said") {
            try server.summaries()
        } until: {
            $0.contains("gone is not signed in")
        }
        func notSignedIn(_ note: [String: Any]) -> Bool { note["summary"] as? String == "gone is not signed in" }
        let refused = try #require(try server.notifications().first(where: notSignedIn))
        let why = refused["body"] as? String ?? ""
        #expect(why.hasPrefix("Signing in failed: ") && why.contains("access_denied"), "\(why)")
        #expect(try Registry(paths: env.paths).loadInTest().slots[try Slot("gone")]?.state == .reauthenticationRequired)

        // Then the sign-in is approved: the slot is signed in, and that is said.
        try await env.server.hook("/_test/browser", ["email": "gone@x.com"])
        #expect(try desktop.click(name, id: signIn.id).0 == 0)
        _ = try await eventually("the sign-in is said") {
            try server.summaries()
        } until: {
            $0.contains("gone is signed in again")
        }
        #expect(try Registry(paths: env.paths).loadInTest().slots[try Slot("gone")]?.state.isSignedIn == true)
        #expect(try await env.server.stat("authorize_requests") == 2)
        #expect(desktop.stopTray().0 == 0)

        // Neither a terminal nor a browser (no graphical session): a notification says why.
        try Registry(paths: env.paths).updateInTest { $0.slots[try Slot("gone")]?.state = .reauthenticationRequired }
        name = try desktop.startTray(env.home, extraEnvironment: ["PATH": bin])
        let again = try await eventually("the menu offers it again") {
            try desktop.dump(name)
        } until: {
            $0.contains("Sign in again")
        }
        let entry = try #require(dumpedEntries(again).last { $0.label == "gone" }, "\(again)")
        #expect(try desktop.click(name, id: entry.id).0 == 0)
        _ = try await eventually("why nothing happened is said") {
            try server.summaries()
        } until: {
            $0.components(separatedBy: "gone is not signed in").count == 3
        }
        let nothing = try #require(try server.notifications().last(where: notSignedIn))
        #expect(
            nothing["body"] as? String == "No terminal to run `lanyard login gone` in (x-terminal-emulator is not "
                + "installed) and no browser to sign in with (no graphical session). Run `lanyard login gone` in a "
                + "terminal.",
            "\(nothing)"
        )
        #expect(try await env.server.stat("authorize_requests") == 2)
        #expect(desktop.stopTray().0 == 0)
    }
}
