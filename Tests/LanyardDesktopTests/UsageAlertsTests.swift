import Foundation
import LanyardAuth
import LanyardCore
import LanyardDesktop
import LanyardIntegrations
import LanyardStore
import Testing

/// Which usage notifications `lanyard tray` owes (pure; the D-Bus side is TrayTests in
/// LanyardCLITests).
@Suite struct UsageAlertsTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let work = try! Slot("work"), home = try! Slot("home")

    func report(_ five: Double?, resetsIn: TimeInterval = 3600, weekly: Double? = nil) -> UsageReport {
        UsageReport(
            primary: five.map { UsageWindow(usedPercent: $0, windowSeconds: 18000, resetsAt: now + resetsIn) },
            secondary: weekly.map { UsageWindow(usedPercent: $0, windowSeconds: 604_800, resetsAt: now + 400_000) }
        )
    }

    func percents(_ alerts: [UsageAlert]) -> [String] {
        alerts.map {
            switch $0 {
            case .crossed(let slot, let window, let percent): "\(slot.name) \(window.length!.className) \(percent)"
            case .reset(let slot, let window): "\(slot.name) \(window.length!.className) reset"
            }
        }
    }

    @Test func eachCrossingIsSaidOncePerWindow() {
        var alerts = UsageAlerts(percents: [80, 95])
        #expect(alerts.observe(slot: work, report: report(79), isActive: true).isEmpty)
        #expect(percents(alerts.observe(slot: work, report: report(80), isActive: true)) == ["work 5h 80"])
        // Polled again, the same window (its reset a few seconds off, as reset_after_seconds gives it): nothing.
        #expect(alerts.observe(slot: work, report: report(83, resetsIn: 3590), isActive: true).isEmpty)
        #expect(alerts.observe(slot: work, report: report(81, resetsIn: 3600), isActive: true).isEmpty)
        #expect(percents(alerts.observe(slot: work, report: report(96), isActive: true)) == ["work 5h 95"])
        #expect(alerts.observe(slot: work, report: report(99), isActive: true).isEmpty)
        #expect(alerts.notified == [NotifiedWindow(slot: work, window: "5h", resetsAt: now + 3600, percent: 95)])
    }

    @Test func aJumpPastSeveralSaysTheHighestOnly() {
        var alerts = UsageAlerts(percents: [50, 80, 95])
        #expect(
            percents(alerts.observe(slot: work, report: report(97, weekly: 85), isActive: true)) == [
                "work 5h 95", "work weekly 80",
            ]
        )
        #expect(alerts.observe(slot: work, report: report(97, weekly: 90), isActive: true).isEmpty)
    }

    @Test func aResetIsSaidOnceAndTheNextWindowCountsAnew() {
        var alerts = UsageAlerts(percents: [80, 95])
        _ = alerts.observe(slot: work, report: report(85), isActive: true)
        // The next 5 h window: it resets 5 h after the last one (usage already high again counts anew).
        #expect(
            percents(alerts.observe(slot: work, report: report(3, resetsIn: 3600 + 18000), isActive: true)) == [
                "work 5h reset"
            ]
        )
        #expect(alerts.observe(slot: work, report: report(4, resetsIn: 3600 + 18000), isActive: true).isEmpty)
        #expect(
            percents(alerts.observe(slot: work, report: report(90, resetsIn: 3600 + 18000), isActive: true)) == [
                "work 5h 80"
            ]
        )
        // A new window already past the percentage: the reset, then the crossing.
        #expect(
            percents(alerts.observe(slot: work, report: report(82, resetsIn: 3600 + 36000), isActive: true))
                == ["work 5h reset", "work 5h 80"]
        )
        // Usage back under the lowest percentage in the same window (credits) also ends it.
        #expect(
            percents(alerts.observe(slot: work, report: report(10, resetsIn: 3600 + 36000), isActive: true)) == [
                "work 5h reset"
            ]
        )
        #expect(alerts.notified.isEmpty)
        // `notify` raised to 90 after 80 was said: 85 in the same window is no reset.
        _ = alerts.observe(slot: work, report: report(85), isActive: true)
        var raised = UsageAlerts(percents: [90], notified: alerts.notified)
        #expect(raised.observe(slot: work, report: report(85), isActive: true).isEmpty)
        #expect(percents(raised.observe(slot: work, report: report(70), isActive: true)) == ["work 5h reset"])
    }

    @Test func onlyTheActiveSlotCrossesButAnySlotResets() {
        var alerts = UsageAlerts(percents: [80, 95])
        #expect(alerts.observe(slot: home, report: report(90), isActive: false).isEmpty)
        _ = alerts.observe(slot: work, report: report(90), isActive: true)
        // Switched away; work's window resets and is seen when the menu opens.
        #expect(
            percents(alerts.observe(slot: work, report: report(0, resetsIn: 30000), isActive: false)) == [
                "work 5h reset"
            ]
        )
    }

    @Test func offSaysNothingAndForgettingASlotDropsItsWindows() {
        var off = UsageAlerts(percents: [])
        #expect(off.observe(slot: work, report: report(100), isActive: true).isEmpty)
        var alerts = UsageAlerts(percents: [80])
        _ = alerts.observe(slot: work, report: report(90), isActive: true)
        let keptBoth = alerts.forget(keeping: [work, home])
        #expect(!keptBoth)
        let droppedWork = alerts.forget(keeping: [home])
        #expect(droppedWork && alerts.notified.isEmpty)
    }

    @Test func aWindowOfNoKnownLengthIsNamedByItsField() {
        var alerts = UsageAlerts(percents: [80])
        _ = alerts.observe(
            slot: work,
            report: UsageReport(
                primary: UsageWindow(usedPercent: 90),
                secondary: UsageWindow(usedPercent: 85, windowSeconds: 5400)
            ),
            isActive: true
        )
        #expect(alerts.notified.map(\.window) == ["primary", "5400s"])
    }

    @Test func theSwitchTargetIsTheLeastUsedOtherSlotWithHeadroom() throws {
        var document = RegistryDocument()
        for (name, state) in [
            ("work", AuthState.signedIn(expiresAt: nil)), ("home", .signedIn(expiresAt: nil)),
            ("full", .signedIn(expiresAt: nil)),
            ("gone", .reauthenticationRequired), ("side", .signedIn(expiresAt: nil)),
        ] {
            document.slots[try Slot(name)] = SlotRecord(
                provider: "openai",
                backend: .file,
                account: AccountInfo(email: "\(name)@x.com"),
                state: state
            )
        }
        document.active = work
        let usage: [Slot: SlotUsage] = [
            work: SlotUsage(report: report(85), fetchedAt: now),
            home: SlotUsage(report: report(8, weekly: 20), fetchedAt: now),
            try Slot("full"): SlotUsage(report: report(100), fetchedAt: now),
            try Slot("gone"): SlotUsage(report: report(1), fetchedAt: now),
            try Slot("side"): SlotUsage(report: report(1), fetchedAt: now, limit: .init(resetsAt: nil)),
        ]
        let target = try #require(
            UsageAlerts.switchTarget(from: work, activeUsed: 85, document: document, usage: usage)
        )
        #expect(target.slot == home && target.usedPercent == 20)
        #expect(UsageAlertText.switchLabel(target.slot, used: target.usedPercent) == "Switch to home (20 %)")
        // None less used than the active slot: no button.
        #expect(UsageAlerts.switchTarget(from: work, activeUsed: 15, document: document, usage: usage) == nil)
    }

    @Test func theWordsSayTheSlotWindowAndReset() {
        let crossed = UsageAlertText.text(
            .crossed(
                slot: work,
                window: UsageWindow(usedPercent: 83.7, windowSeconds: 18000, resetsAt: now + 600),
                percent: 80
            ),
            describe: { "in \(Int($0.timeIntervalSince(now) / 60)) min" },
            clock: { _ in "" }
        )
        #expect(crossed.summary == "work has used 83 % of its 5 h window" && crossed.body == "It resets in 10 min.")
        let reset = UsageAlertText.text(
            .reset(slot: work, window: UsageWindow(usedPercent: 2, windowSeconds: 604_800)),
            describe: { _ in "" },
            clock: { _ in "" }
        )
        #expect(reset.summary == "work's weekly window has reset" && reset.body == "work has used 2 % of it now.")
        let limit = UsageAlertText.text(
            .crossed(
                slot: work,
                window: UsageWindow(usedPercent: 100, windowSeconds: 18000, resetsAt: now + 600),
                percent: 100
            ),
            describe: { "in \(Int($0.timeIntervalSince(now) / 60)) min" },
            clock: { _ in "21:11" }
        )
        #expect(
            limit.summary == "work is at its limit until 21:11"
                && limit.body == "Its 5 h window is used up; it resets in 10 min."
        )
    }

    /// The limit itself is announced, once per window, after the warnings and whatever `notify`
    /// lists; the next window announces it anew.
    @Test func theLimitIsSaidOncePerWindow() {
        var alerts = UsageAlerts(percents: [80, 95])
        #expect(percents(alerts.observe(slot: work, report: report(96), isActive: true)) == ["work 5h 95"])
        #expect(alerts.observe(slot: work, report: report(99.5), isActive: true).isEmpty)
        #expect(percents(alerts.observe(slot: work, report: report(100), isActive: true)) == ["work 5h 100"])
        #expect(alerts.observe(slot: work, report: report(100, resetsIn: 3500), isActive: true).isEmpty)
        #expect(
            percents(alerts.observe(slot: work, report: report(100, resetsIn: 3600 + 18000), isActive: true)) == [
                "work 5h reset", "work 5h 100",
            ]
        )
        // Off is off: not even the limit.
        var off = UsageAlerts(percents: [])
        #expect(off.observe(slot: work, report: report(100), isActive: true).isEmpty)
    }

    @Test func whatWasSaidSurvivesARestartAndADamagedFileIsIgnored() throws {
        let folder = NSTemporaryDirectory() + "/lanyard-alerts-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let paths = Paths(
            configDirectory: folder + "/config",
            dataDirectory: folder + "/data",
            stateDirectory: folder + "/state",
            runtimeDirectory: folder + "/run"
        )
        #expect(UsageAlerts.load(paths).notified.isEmpty && UsageAlerts.load(paths).problem == nil)
        var alerts = UsageAlerts(percents: [80, 95])
        _ = alerts.observe(slot: work, report: report(85, weekly: 96), isActive: true)
        try alerts.save(paths)
        let path = UsageAlerts.path(paths)
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == 0o600)
        let loaded = UsageAlerts.load(paths)
        #expect(loaded.problem == nil && loaded.notified == alerts.notified)
        var restarted = UsageAlerts(percents: [80, 95], notified: loaded.notified)
        #expect(restarted.observe(slot: work, report: report(86, weekly: 97), isActive: true).isEmpty)

        for damaged in [
            "{", "[]", "{\"version\": 2, \"windows\": []}",
            "{\"version\": 1, \"windows\": [{\"slot\": \"Bad Slot!\", \"window\": \"5h\", \"percent\": 80}]}",
        ] {
            try Data(damaged.utf8).write(to: URL(fileURLWithPath: path))
            let result = UsageAlerts.load(paths)
            #expect(result.notified.isEmpty, "\(damaged)")
            #expect(
                result.problem?.contains("is damaged") == true
                    && result.problem?.contains("notifications may repeat") == true,
                "\(damaged)"
            )
        }
    }
}
