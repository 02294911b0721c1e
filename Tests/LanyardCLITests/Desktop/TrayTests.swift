import Foundation
import LanyardAuth
import LanyardCore
import LanyardDesktop
import LanyardIntegrations
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// A D-Bus session bus of one test's own (tests run in parallel, and only one
/// org.kde.StatusNotifierWatcher can own its name on a bus) with a real watcher
/// (status-notifier-watcher, haskell-status-notifier-item-utils) and libdbusmenu's own client
/// (dbusmenu-dumper, libdbusmenu-tools) to read the menu. Missing tools fail the test: they are
/// in scripts/deps.sh.
final class TrayDesktop: @unchecked Sendable {
    static let watcherBinary = "/usr/bin/status-notifier-watcher"
    static let dumperBinary = "/usr/libexec/dbusmenu-dumper"

    let address: String
    private let folder: String
    private let bus: PrivateSessionBus
    private var watcher: Process?
    private var tray: Process?
    private var trayErrors: Pipe?

    init(root: String) throws {
        try Self.requireTools()
        folder = root + "/bus"
        bus = try PrivateSessionBus(folder: folder)
        address = bus.address
    }

    /// Skips the test (or fails it under `make test`) without the watcher and the menu dumper; a
    /// function of its own, as a never-returning call in an initialiser leaves code the compiler
    /// warns about.
    private static func requireTools() throws {
        for tool in [watcherBinary, dumperBinary] where !FileManager.default.isExecutableFile(atPath: tool) {
            try TestServices.missing(
                "needs \(tool) (scripts/deps.sh)",
                failure: ServerError(
                    "\(tool) is missing: run scripts/deps.sh (haskell-status-notifier-item-utils, libdbusmenu-tools)"
                )
            )
        }
    }

    deinit {
        let processes = [tray, watcher].compactMap { $0 }.filter(\.isRunning)
        // SIGKILL: the test process ignores SIGTERM, and children started with Foundation's
        // Process inherit that (the watcher keeps it; lanyard sets its own handling).
        for process in processes { kill(process.processIdentifier, SIGKILL) }
        for process in processes { process.waitUntilExit() }
    }

    var environment: [String: String] {
        ["DBUS_SESSION_BUS_ADDRESS": address, "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"]
    }

    /// Where the watcher's own log goes (its INFO level: each registration, each item gone).
    var watcherLogPath: String { folder + "/watcher.log" }

    /// Starts (or starts again) the watcher, its log appended to ``watcherLogPath``.
    func startWatcher() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.watcherBinary)
        p.arguments = ["--log-level", "INFO"]
        p.environment = environment
        p.standardOutput = FileHandle.nullDevice
        if !FileManager.default.fileExists(atPath: watcherLogPath) {
            _ = FileManager.default.createFile(atPath: watcherLogPath, contents: nil)
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: watcherLogPath))
        try log.seekToEnd()
        p.standardError = log
        try p.run()
        try log.close()
        watcher = p
    }

    /// The watcher's log so far, without its every-poll lines ("… Called"), for a failure message.
    func watcherLog() -> String {
        let text = (try? String(contentsOfFile: watcherLogPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { !$0.hasSuffix(" Called") }.joined(separator: "\n")
    }

    func stopWatcher() {
        guard let watcher else { return }
        kill(watcher.processIdentifier, SIGKILL)  // it inherits this process's ignored SIGTERM
        watcher.waitUntilExit()
        self.watcher = nil
    }

    /// Starts `lanyard tray` in `home` on this bus; returns its bus name.
    func startTray(_ home: TestHome, extraEnvironment: [String: String] = [:]) throws -> String {
        // A strict cooperative pool (one thread): a blocking call on it would stall the tray.
        // Its start-up and registration traced on stderr, which a failed wait shows.
        let (p, _, err) = try home.start(
            ["tray"],
            extraEnvironment: [
                "DBUS_SESSION_BUS_ADDRESS": address, "LANYARD_TRACE_TRAY": "1",
                "LIBDISPATCH_COOPERATIVE_POOL_STRICT": "1",
            ].merging(extraEnvironment) { $1 }
        )
        tray = p
        trayErrors = err
        return "org.kde.StatusNotifierItem-\(p.processIdentifier)-1"
    }

    /// Ends the tray with SIGTERM; its exit status and stderr.
    func stopTray() -> (Int32, String) {
        guard let tray else { return (-1, "") }
        tray.terminate()
        let errors = trayErrors?.fileHandleForReading.readDataToEndOfFile() ?? Data()
        tray.waitUntilExit()
        self.tray = nil
        return (tray.terminationStatus, String(decoding: errors, as: UTF8.self))
    }

    var trayIsRunning: Bool { tray?.isRunning ?? false }

    /// What the running tray has written to stderr so far (without waiting for more).
    func trayStderrSoFar() -> String {
        guard let trayErrors else { return "" }
        stderrSeen += availableText(trayErrors)
        return stderrSeen
    }
    private var stderrSeen = ""

    func gdbus(_ arguments: [String]) throws -> (Int32, String, String) {
        try runProcess("/usr/bin/gdbus", arguments, environment: environment)
    }

    /// Fails at once, with what the tray said, when the tray this test started has ended: a
    /// wait for it to show something would otherwise run out its whole bound in silence.
    func checkTrayRuns() throws {
        guard let tray, !tray.isRunning else { return }
        let said = String(decoding: trayErrors?.fileHandleForReading.readDataToEndOfFile() ?? Data(), as: UTF8.self)
        throw ServerError("the tray ended (status \(tray.terminationStatus)): \(said)")
    }

    /// The watcher's RegisteredStatusNotifierItems, as gdbus prints it ("" while none runs).
    func registeredItems() throws -> String {
        try checkTrayRuns()
        return try gdbus([
            "call", "--session", "--dest", "org.kde.StatusNotifierWatcher", "--object-path", "/StatusNotifierWatcher",
            "--method", "org.freedesktop.DBus.Properties.Get", "org.kde.StatusNotifierWatcher",
            "RegisteredStatusNotifierItems",
        ]).1
    }

    /// libdbusmenu's own reading of the menu (JSON-like, one property a line).
    func dump(_ name: String) throws -> String {
        try checkTrayRuns()
        // Bounded: the dumper waits forever when the layout changes while it reads it (its wait
        // for the root item is not told again); a dump cut short is "" and the caller asks again.
        return try runProcess(
            "/usr/bin/timeout",
            ["-k", "5", "20", Self.dumperBinary, "--dbus-name=\(name)", "--dbus-object=/MenuBar"],
            environment: environment
        ).1
    }

    /// Sends dbusmenu's Event "clicked" for `id`, as a host does when the entry is chosen.
    func click(_ name: String, id: Int) throws -> (Int32, String, String) {
        try gdbus([
            "call", "--session", "--dest", name, "--object-path", "/MenuBar", "--method",
            "com.canonical.dbusmenu.Event",
            "\(id)", "clicked", "<int32 0>", "0",
        ])
    }

    func itemProperty(_ name: String, _ property: String) throws -> String {
        try gdbus([
            "call", "--session", "--dest", name, "--object-path", "/StatusNotifierItem", "--method",
            "org.freedesktop.DBus.Properties.Get", "org.kde.StatusNotifierItem", property,
        ]).1
    }
}

/// The dumped entries, in order: (id, label, toggle-state). dbusmenu-dumper prints each entry's
/// properties in name order after its id, so an entry ends where the next id begins.
func dumpedEntries(_ dump: String) -> [(id: Int, label: String, toggle: Int?)] {
    var entries: [(id: Int, label: String, toggle: Int?)] = []
    func value(_ line: String, _ key: String) -> String? {
        guard line.hasPrefix("\"\(key)\": ") else { return nil }
        var text = String(line.dropFirst(key.count + 4))
        if text.hasSuffix(",") { text.removeLast() }
        if text.hasPrefix("'") && text.hasSuffix("'") && text.count >= 2 { text = String(text.dropFirst().dropLast()) }
        return text
    }
    for line in dump.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
        if let id = value(line, "id").flatMap(Int.init) { entries.append((id, "", nil)) }
        guard !entries.isEmpty else { continue }
        if let label = value(line, "label") { entries[entries.count - 1].label = label }
        if let toggle = value(line, "toggle-state").flatMap(Int.init) { entries[entries.count - 1].toggle = toggle }
    }
    return entries.filter { !$0.label.isEmpty }
}

@Suite(.serialized) struct TrayTests {
    /// The whole path, as a desktop drives it: the item registers with a real watcher, libdbusmenu
    /// reads every slot with its usage, a click switches, a switch in a terminal shows, and a
    /// restarted watcher gets the item back.
    @Test func menuShowsUsageSwitchesAndFollowsTheRegistry() async throws {
        let env = try await IntegrationHome()
        var accounts: [String: String] = [:]
        for (slot, email) in [("home", "home@x.com"), ("work", "work@x.com")] {
            accounts[slot] = try await env.signIn(slot, email: email, plan: slot == "work" ? "pro" : "plus").account
                .accountID
        }
        #expect(try env.run("switch", "work").status == 0)
        func window(_ used: Int, _ seconds: Int) -> [String: Any] {
            ["used_percent": used, "limit_window_seconds": seconds, "reset_after_seconds": 600]
        }
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": accounts["work"]!, "primary_window": window(83, 18000),
                "secondary_window": window(30, 604800),
            ]
        )
        try await env.server.hook(
            "/_test/usage",
            ["account_id": accounts["home"]!, "primary_window": window(12, 18000)]
        )
        let desktop = try TrayDesktop(root: env.home.root)
        // The tray starts first: it must wait for the watcher and register when it appears.
        let name = try desktop.startTray(env.home)
        _ = try await eventually("the tray owns its name") {
            try desktop.gdbus(["introspect", "--session", "--dest", name, "--object-path", "/MenuBar"]).1
        } until: {
            $0.contains("com.canonical.dbusmenu")
        }
        try desktop.startWatcher()
        _ = try await eventually("the watcher lists the item") {
            try desktop.registeredItems()
        } until: {
            $0.contains(name)
        }

        let dump = try await eventually("the menu shows both slots' usage") {
            try desktop.dump(name)
        } until: {
            $0.contains("83 % of 5 h") && $0.contains("weekly: 30 %") && $0.contains("12 % of 5 h")
        }
        let entries = dumpedEntries(dump)
        // One row a slot, its state first; email, plan and each window with its reset in Details.
        let work = try #require(entries.first { $0.toggle != nil && $0.label.hasPrefix("work ") }, "\(dump)")
        let home = try #require(entries.first { $0.toggle != nil && $0.label.hasPrefix("home ") }, "\(dump)")
        #expect(
            work.label.hasSuffix("83 % of 5 h") && home.label.hasSuffix("12 % of 5 h"),
            "\(work.label) \(home.label)"
        )
        for detail in ["work@x.com", "Plan: Pro", "home@x.com", "Plan: Plus"] {
            #expect(entries.contains { $0.label == detail }, "\(detail) in\n\(dump)")
        }
        #expect(entries.contains { $0.label.hasPrefix("5 h: 83 %") && $0.label.contains("resets in ") }, "\(dump)")
        #expect(work.toggle == 1 && home.toggle == 0)
        for label in ["Details", "Best account now", "Refresh now", "Open usage details", "Quit"] {
            #expect(entries.contains { $0.label == label }, "\(label) in\n\(dump)")
        }
        #expect(dump.contains("\"toggle-type\": 'radio'"))
        // Lanyard's own icon: no theme name a theme could draw instead; the tooltip and the
        // label name the slot's busiest window.
        #expect(try desktop.itemProperty(name, "IconName") == "(<''>,)\n")
        #expect(try desktop.itemProperty(name, "ToolTip").contains("83 % of 5 h"))
        #expect(try desktop.itemProperty(name, "XAyatanaLabel") == "(<'83 %'>,)\n")

        // A click on home's entry switches, as `lanyard switch home` does.
        let clicked = try desktop.click(name, id: home.id)
        #expect(clicked.0 == 0, "\(clicked.2)")
        _ = try await eventually("the click switched to home") {
            try Registry(paths: env.paths).load().active?.name ?? ""
        } until: {
            $0 == "home"
        }
        _ = try await eventually("the menu checks home") {
            try desktop.dump(name)
        } until: { dump in
            dumpedEntries(dump).contains { $0.label.hasPrefix("home") && $0.toggle == 1 }
        }
        // A switch made in a terminal is in the next dump (inotify, no poll).
        #expect(try env.run("switch", "work").status == 0)
        _ = try await eventually("the menu follows `lanyard switch work`", seconds: 30) {
            try desktop.dump(name)
        } until: { dump in
            dumpedEntries(dump).contains { $0.label.hasPrefix("work") && $0.toggle == 1 }
        }
        // An unknown entry is an error, not a crash.
        #expect(try desktop.click(name, id: 9999).0 != 0)

        // The watcher restarts: the item registers again.
        desktop.stopWatcher()
        _ = try await eventually("the watcher is gone") {
            try desktop.registeredItems()
        } until: {
            !$0.contains(name)
        }
        try desktop.startWatcher()
        _ = try await eventually("the restarted watcher lists the item") {
            try desktop.registeredItems()
        } until: {
            $0.contains(name)
        }

        #expect(desktop.trayIsRunning)
        let (status, errors) = desktop.stopTray()
        #expect(status == 0, "\(errors)")
        #expect(!errors.contains("AT-") && !errors.contains("RT-"))
    }

    /// Without a session bus: exit 1 (integration_unsupported) with GIO's reason, at once.
    @Test func noSessionBusIsAClearError() async throws {
        let env = try await IntegrationHome()  // its commands run with DBUS_SESSION_BUS_ADDRESS=disabled:
        let result = try env.run("tray")
        #expect(result.status == 1)
        #expect(result.stderr.contains("cannot show the tray item"), "\(result.stderr)")
    }

    /// "Quit" ends the tray with 0.
    @Test func quitEndsTheTray() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("solo", email: "solo@x.com")
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let name = try desktop.startTray(env.home)
        let dump = try await eventually("the menu has the slot") {
            try desktop.dump(name)
        } until: {
            $0.contains("solo@x.com")
        }
        let entries = dumpedEntries(dump)
        // One slot: no "Best account now".
        #expect(entries.filter { $0.toggle != nil }.count == 1)
        #expect(!entries.contains { $0.label == "Best account now" })
        let quit = try #require(entries.first { $0.label == "Quit" })
        _ = try desktop.click(name, id: quit.id)
        _ = try await eventually("the tray ends") {
            desktop.trayIsRunning ? "running" : "ended"
        } until: {
            $0 == "ended"
        }
        #expect(desktop.stopTray().0 == 0)
    }

    /// No slot: the menu says how to add one; 20 slots: 20 radio entries, in name order; outside
    /// text escaped and underscores doubled.
    @Test func menuWithNoSlotsTwentySlotsAndHostileText() async throws {
        let env = try await IntegrationHome()
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let name = try desktop.startTray(env.home)
        let empty = try await eventually("the empty menu") {
            try desktop.dump(name)
        } until: {
            $0.contains("No slots yet")
        }
        #expect(dumpedEntries(empty).allSatisfy { $0.toggle == nil })
        // Shown even so (hosts hide a Passive item): the menu is where a new user adds a slot.
        #expect(try desktop.itemProperty(name, "Status").contains("Active"))

        let names = (1...20).map { String(format: "slot%02d", $0) }
        try Registry(paths: env.paths).updateInTest { document in
            for slotName in names {
                let email = slotName == "slot07" ? "evil_\u{1B}]52;c;SGVsbG8=\u{07}@x.com" : "\(slotName)@x.com"
                let plan = slotName == "slot07" ? Plan(rawValue: "\u{202E}gold_plan") : Plan(rawValue: "plus")
                document.slots[try Slot(slotName)] = SlotRecord(
                    provider: "openai",
                    backend: .file,
                    account: AccountInfo(email: email, accountID: "acct-\(slotName)", plan: plan),
                    state: slotName == "slot20" ? .reauthenticationRequired : .signedIn(expiresAt: nil)
                )
            }
            document.active = try Slot("slot03")
        }
        let full = try await eventually("20 slots in the menu") {
            try desktop.dump(name)
        } until: {
            $0.contains("slot20")
        }
        let radios = dumpedEntries(full).filter { $0.toggle != nil }
        #expect(radios.map { String($0.label.prefix(6)) } == names, "\(full)")
        #expect(radios.filter { $0.toggle == 1 }.map { String($0.label.prefix(6)) } == ["slot03"])
        #expect(!full.contains("\u{1B}") && !full.contains("\u{07}") && !full.contains("\u{202E}"))
        let entries = dumpedEntries(full)
        let email = try #require(entries.first { $0.label.hasPrefix("evil") }, "\(full)")
        #expect(
            email.label.contains("evil__")
                && (email.label.contains("\\\\u{1B}]52") || email.label.contains("\\u{1B}]52")),
            "\(email.label)"
        )
        #expect(entries.contains { $0.label.contains("gold__plan") }, "\(full)")
        // slot20 must sign in again: its own row says so first, and "Sign in again…" lists it.
        #expect(radios.first { $0.label.hasPrefix("slot20") }?.label.hasSuffix("must sign in") == true)
        #expect(full.contains("Sign in again"))
        #expect(desktop.stopTray().0 == 0)
    }

    /// A host clicks with the ids of the layout it showed; a slot added meanwhile (sorting first)
    /// must not turn a click on home into a switch to the new slot. Codex follows the click, as it
    /// follows `lanyard switch`.
    @Test func aClickMeansTheSameEntryAfterTheMenuChangesAndCodexFollows() async throws {
        let env = try await IntegrationHome(extraConfig: "[integrations]\ncodex = true")
        var accounts: [String: String] = [:]
        for (slot, email) in [("home", "home@x.com"), ("work", "work@x.com")] {
            accounts[slot] = try await env.signIn(slot, email: email).account.accountID
        }
        #expect(try env.run("switch", "work").status == 0)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let name = try desktop.startTray(env.home, extraEnvironment: ["CODEX_HOME": env.codexHome])
        let before = try await eventually("the menu has both slots") {
            try desktop.dump(name)
        } until: {
            $0.contains("home@x.com") && $0.contains("work@x.com")
        }
        let home = try #require(dumpedEntries(before).first { $0.toggle != nil && $0.label.hasPrefix("home") })
        try Registry(paths: env.paths).updateInTest { document in
            document.slots[try Slot("alpha")] = SlotRecord(
                provider: "openai",
                backend: .file,
                account: AccountInfo(email: "alpha@x.com", accountID: "acct-alpha", plan: Plan(rawValue: "plus")),
                state: .signedIn(expiresAt: nil)
            )
        }
        let after = try await eventually("the menu has alpha") {
            try desktop.dump(name)
        } until: {
            $0.contains("alpha@x.com")
        }
        #expect(
            dumpedEntries(after).first { $0.toggle != nil && $0.label.hasPrefix("home") }?.id == home.id,
            "\(after)"
        )
        #expect(try desktop.click(name, id: home.id).0 == 0)
        _ = try await eventually("the old id still switched to home") {
            try Registry(paths: env.paths).load().active?.name ?? ""
        } until: {
            $0 == "home"
        }
        // The switch writes the registry, then Codex's auth.json: wait for the second.
        let auth = try await eventually("Codex's auth.json follows the click") {
            (try? String(contentsOfFile: env.codexHome + "/auth.json", encoding: .utf8)) ?? ""
        } until: {
            $0.contains(accounts["home"]!)
        }
        #expect(!auth.contains(accounts["work"]!))
        #expect(desktop.stopTray().0 == 0)
    }

    /// A `usage_limit_reached` another process logged (Codex through `lanyard exec`, say) shows at
    /// once, without waiting for the next poll; hosts without the themed icon get pixels.
    @Test func aLimitInTheEventLogShowsAtOnceAndTheIconHasPixels() async throws {
        let env = try await IntegrationHome()
        let account = try #require(try await env.signIn("work", email: "work@x.com").account.accountID)
        #expect(try env.run("switch", "work").status == 0)
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": account,
                "primary_window": ["used_percent": 20, "limit_window_seconds": 18000, "reset_after_seconds": 600],
            ]
        )
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let name = try desktop.startTray(env.home)
        _ = try await eventually("the menu shows work's usage") {
            try desktop.dump(name)
        } until: {
            $0.contains("20 % of 5 h")
        }
        #expect(try desktop.itemProperty(name, "IconName") == "(<''>,)\n")
        let pixmaps = try desktop.itemProperty(name, "IconPixmap")
        for size in TrayIcon.pixmapSizes { #expect(pixmaps.contains("(\(size), \(size), "), "\(pixmaps.prefix(200))") }

        EventLog(paths: env.paths).appendInTest(
            "error",
            slot: try Slot("work"),
            fields: [
                "code": .string("usage_limit_reached"), "message": .string("limit reached"),
                "resets_at": .date(Date() + 3600),
            ]
        )
        _ = try await eventually("the menu says work is at its limit") {
            try desktop.dump(name)
        } until: {
            $0.contains("at limit until ")
        }
        #expect(try desktop.itemProperty(name, "IconPixmap") != pixmaps, "the icon changed")
        #expect(try desktop.itemProperty(name, "IconName") == "(<''>,)\n")
        #expect(desktop.stopTray().0 == 0)
    }

    /// "Sign in again…" and "Open usage details" start the desktop's terminal
    /// (x-terminal-emulator) with `lanyard login SLOT` and `lanyard usage --all`. A stand-in
    /// terminal records what it was asked to run, and runs the usage command as a terminal would.
    @Test func signInAgainAndUsageDetailsOpenATerminal() async throws {
        let env = try await IntegrationHome()
        let account = try #require(try await env.signIn("work", email: "work@x.com").account.accountID)
        try await env.signIn("gone", email: "gone@x.com")
        #expect(try env.run("switch", "work").status == 0)
        try Registry(paths: env.paths).updateInTest { $0.slots[try Slot("gone")]?.state = .reauthenticationRequired }
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": account,
                "primary_window": ["used_percent": 41, "limit_window_seconds": 18000, "reset_after_seconds": 600],
            ]
        )
        let bin = env.home.root + "/bin"
        let log = env.home.root + "/terminal"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: log, withIntermediateDirectories: true)
        try """
        #!/bin/sh
        # A stand-in for the desktop's terminal: `-e COMMAND…` runs COMMAND; Enter is pressed for it.
        [ "$1" = -e ] && shift
        case "$*" in *" usage --all") printf '\n' | "$@" > "$LANYARD_TEST_TERMINAL_LOG/usage.tmp" 2>&1
                                      mv "$LANYARD_TEST_TERMINAL_LOG/usage.tmp" \
        "$LANYARD_TEST_TERMINAL_LOG/usage" ;; esac
        printf '%s\n' "$@" > "$LANYARD_TEST_TERMINAL_LOG/$$.tmp" && mv \
        "$LANYARD_TEST_TERMINAL_LOG/$$.tmp" "$LANYARD_TEST_TERMINAL_LOG/$$.args"
        """.write(toFile: bin + "/x-terminal-emulator", atomically: true, encoding: .utf8)
        chmod(bin + "/x-terminal-emulator", 0o755)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        let name = try desktop.startTray(
            env.home,
            extraEnvironment: ["PATH": "\(bin):/usr/bin:/bin", "LANYARD_TEST_TERMINAL_LOG": log]
        )
        let dump = try await eventually("the menu offers to sign gone in again") {
            try desktop.dump(name)
        } until: {
            $0.contains("Sign in again") && $0.contains("41 % of 5 h")
        }
        let entries = dumpedEntries(dump)
        // "gone" is under Refresh now and, last, under Sign in again….
        let signIn = try #require(entries.last { $0.label == "gone" }, "\(dump)")
        let usage = try #require(entries.first { $0.label == "Open usage details" })
        #expect(try desktop.click(name, id: signIn.id).0 == 0)
        #expect(try desktop.click(name, id: usage.id).0 == 0)

        func commands() throws -> [[String]] {
            try FileManager.default.contentsOfDirectory(atPath: log).filter { $0.hasSuffix(".args") }.map { file in
                try String(contentsOfFile: log + "/" + file, encoding: .utf8).split(separator: "\n").map(String.init)
            }
        }
        _ = try await eventually("the terminal was started twice") {
            "\(try commands().count)"
        } until: {
            $0 == "2"
        }
        let started = try commands()
        // sh -c SCRIPT LANYARD ARGS…: the program and its arguments are positional parameters.
        #expect(
            started.allSatisfy { $0.count >= 4 && $0[0] == "sh" && $0[1] == "-c" && $0[3].hasSuffix("/lanyard") },
            "\(started)"
        )
        #expect(Set(started.map { Array($0.dropFirst(4)) }) == [["login", "gone"], ["usage", "--all"]], "\(started)")
        let shown = try String(contentsOfFile: log + "/usage", encoding: .utf8)
        #expect(shown.contains("work") && shown.contains("41%") && shown.contains("Press Enter to close"), "\(shown)")
        #expect(desktop.stopTray().0 == 0)
    }

    /// No terminal to run `lanyard usage --all` in: "Open usage details" opens the active slot's
    /// provider's usage page in the browser (xdg-open; a stand-in records the URL) and says why.
    @Test func usageDetailsWithoutATerminalOpenTheProvidersPage() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("work", email: "work@x.com")
        #expect(try env.run("switch", "work").status == 0)
        let bin = env.home.root + "/bin"
        let opened = env.home.root + "/opened"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try """
        #!/bin/sh
        # A stand-in for xdg-open: records the URL it was given.
        printf '%s\\n' "$@" > "\(opened).tmp" && /bin/mv "\(opened).tmp" "\(opened)"
        """.write(toFile: bin + "/xdg-open", atomically: true, encoding: .utf8)
        chmod(bin + "/xdg-open", 0o755)
        let desktop = try TrayDesktop(root: env.home.root)
        try desktop.startWatcher()
        // PATH holds the stand-in xdg-open and no x-terminal-emulator.
        let name = try desktop.startTray(env.home, extraEnvironment: ["PATH": bin])
        let dump = try await eventually("the menu has work") {
            try desktop.dump(name)
        } until: {
            $0.contains("work@x.com")
        }
        let usage = try #require(dumpedEntries(dump).first { $0.label == "Open usage details" })
        #expect(try desktop.click(name, id: usage.id).0 == 0)
        let url = try await eventually("the usage page was opened") {
            (try? String(contentsOfFile: opened, encoding: .utf8)) ?? ""
        } until: {
            !$0.isEmpty
        }
        #expect(url == "https://chatgpt.com/codex/settings/usage\n")
        let (status, errors) = desktop.stopTray()
        #expect(status == 0)
        #expect(
            errors.contains("x-terminal-emulator is not installed): opening the usage page in the browser instead"),
            "\(errors)"
        )
    }
}
