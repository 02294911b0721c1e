import Foundation
import LanyardAuth
import LanyardCore
import LanyardDesktop
import LanyardIntegrations
import LanyardStore
import Testing

/// `lanyard tray`'s menu, icon and tooltip from the registry and the usage known (pure; the
/// D-Bus side is TrayTests in LanyardCLITests).
@Suite struct TrayModelTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    func describe(_ date: Date) -> String { "in \(Int(date.timeIntervalSince(now) / 60)) min" }

    func document(_ slots: [(String, String?, AuthState)], active: String?) throws -> RegistryDocument {
        var document = RegistryDocument()
        for (name, email, state) in slots {
            document.slots[try Slot(name)] = SlotRecord(
                provider: "openai",
                backend: .file,
                account: AccountInfo(email: email, plan: Plan(rawValue: "plus")),
                state: state
            )
        }
        document.active = try active.map { try Slot($0) }
        return document
    }

    var clock: TrayModel.Clock {
        let now = now
        return TrayModel.Clock(
            now: now,
            describe: { "in \(Int($0.timeIntervalSince(now) / 60)) min" },
            clock: { _ in "21:11" }
        )
    }

    func known(_ report: UsageReport, minutesAgo: Double = 0, failure: String? = nil) -> SlotUsage {
        SlotUsage(report: report, fetchedAt: now - minutesAgo * 60, failure: failure)
    }

    func fiveHours(_ used: Double, weekly: Double? = nil) -> UsageReport {
        UsageReport(
            plan: Plan(rawValue: "pro"),
            primary: UsageWindow(usedPercent: used, windowSeconds: 18000, resetsAt: now + 600),
            secondary: weekly.map { UsageWindow(usedPercent: $0, windowSeconds: 604_800, resetsAt: now + 6000) }
        )
    }

    @Test func theStateIsTheActiveSlots() throws {
        let doc = try document(
            [("work", "w@x.com", .signedIn(expiresAt: nil)), ("gone", nil, .reauthenticationRequired)],
            active: "work"
        )
        let work = try Slot("work")
        func state(_ usage: SlotUsage) -> TrayState {
            TrayModel(document: doc, usage: [work: usage], clock: clock).state
        }
        #expect(state(SlotUsage()) == .ok)
        #expect(state(known(fiveHours(79))) == .ok)
        #expect(state(known(fiveHours(80))) == .nearThreshold)
        #expect(state(known(fiveHours(100))) == .atLimit)
        #expect(state(SlotUsage(limit: .init(resetsAt: nil))) == .atLimit)
        var gone = doc
        gone.active = try Slot("gone")
        let model = TrayModel(document: gone, usage: [:], clock: clock)
        #expect(
            model.state == .mustSignIn && model.state.itemStatus == "NeedsAttention" && model.icon.state == .mustSignIn
        )
        #expect(TrayModel(document: RegistryDocument(), usage: [:], clock: clock).state == .noSlot)
    }

    /// Rows start with the slot's state, a name and its busiest window, and stay narrow; the
    /// details (email, plan, each window with its reset) are in a submenu.
    @Test func rowsSayTheStateFirstAndTheDetailsAreInASubmenu() throws {
        let doc = try document(
            [
                ("work", "w@x.com", .signedIn(expiresAt: nil)), ("bob", "b@x.com", .signedIn(expiresAt: nil)),
                ("gone", nil, .reauthenticationRequired), ("new", nil, .signedIn(expiresAt: nil)),
            ],
            active: "work"
        )
        let usage = [try Slot("work"): known(fiveHours(42.4, weekly: 7)), try Slot("bob"): known(fiveHours(100))]
        let model = TrayModel(document: doc, usage: usage, clock: clock)
        let rows = model.entries.filter { $0.radio != nil }
        #expect(
            rows.map(\.label) == [
                "bob \u{2014} at limit until 21:11", "gone \u{2014} must sign in", "new", "work \u{2014} 42 % of 5 h",
            ]
        )
        #expect(rows.map(\.radio) == [false, false, false, true])
        #expect(rows.allSatisfy { $0.icon != nil }, "each row has its meter")
        #expect(
            model.entries.allSatisfy { $0.label.count <= TrayModel.widestLabel + 16 },
            "\(model.entries.map(\.label))"
        )
        let details = try #require(model.entries.first { $0.label == "Details" })
        let work = try #require(model.entries.first { $0.parent == details.id && $0.label == "work" })
        #expect(
            model.entries.filter { $0.parent == work.id }.map(\.label)
                == [
                    "w@x.com", "Plan: Pro", "5 h: 42 % \u{2014} resets in 10 min",
                    "weekly: 7 % \u{2014} resets in 100 min", "Updated just now",
                ]
        )
        #expect(model.entries.filter { $0.parent == work.id }.allSatisfy { !$0.enabled })
        #expect(model.tooltipTitle == "work \u{2014} 42 % of 5 h")
        #expect(model.label == "42 %")
        #expect(TrayModel(document: doc, usage: usage, clock: clock, label: .slot).label == "work")
        #expect(TrayModel(document: doc, usage: usage, clock: clock, label: .off).label == "")
        // Every action stays reachable.
        let signIn = try #require(model.entries.first { $0.label == "Sign in again\u{2026}" })
        #expect(model.entries.filter { $0.parent == signIn.id }.map(\.label) == ["gone"])
        #expect(
            model.actions.values.filter {
                if case .refresh = $0 { return true }
                return false
            }.count == 4
        )
        #expect(
            model.actions.values.contains(.best) && model.actions.values.contains(.openUsage)
                && model.actions.values.contains(.quit)
        )
    }

    /// A failed check keeps the last figures, marked stale with their age and a reason for
    /// people, never an internal code.
    @Test func figuresSurviveAFailedCheck() throws {
        let doc = try document([("work", "w@x.com", .signedIn(expiresAt: nil))], active: "work")
        var usage = known(fiveHours(42), minutesAgo: 3)
        usage.recordFailure("the server answered 503")
        let model = TrayModel(document: doc, usage: [try Slot("work"): usage], clock: clock)
        let row = try #require(model.entries.first { $0.radio != nil })
        #expect(row.label == "work \u{2014} 42 % of 5 h \u{00B7} 3 min ago")
        #expect(
            model.tooltipBody.contains("42 % \u{00B7} 3 min ago \u{2014} the server answered 503"),
            "\(model.tooltipBody)"
        )
        #expect(model.icon.stale && model.icon.bars == [0.42])
        #expect(!model.entries.contains { $0.label.contains("http_error") || $0.label.contains("unknown (") })
        // No figures at all: said so, with the reason.
        let none = TrayModel(
            document: doc,
            usage: [try Slot("work"): SlotUsage(failure: "the server could not be reached")],
            clock: clock
        )
        #expect(none.entries.contains { $0.label == "work \u{2014} usage unknown" })
        #expect(none.tooltipBody.contains("Usage unknown \u{2014} the server could not be reached"))
        // Fresh figures end it.
        usage.record(fiveHours(50), at: now)
        #expect(!usage.isStale && usage.failure == nil)
    }

    @Test func outsideTextIsEscapedUnderscoresDoubledAndLongTextCut() throws {
        let long = String(repeating: "x", count: 80) + "@x.com"
        let doc = try document(
            [
                ("my_slot", "a_b\u{1B}[31m@x.com", .signedIn(expiresAt: nil)),
                ("other", long, .signedIn(expiresAt: nil)),
            ],
            active: "my_slot"
        )
        let model = TrayModel(document: doc, usage: [:], clock: clock)
        #expect(model.entries.first?.label == "my__slot")
        #expect(
            model.entries.contains { $0.label == "a__b\\u{1B}[31m@x.com" && !$0.enabled },
            "\(model.entries.map(\.label))"
        )
        let cut = try #require(model.entries.first { $0.label.hasPrefix("xxxx") })
        #expect(cut.label.count == TrayModel.widestLabel && cut.label.hasSuffix("\u{2026}"))
    }

    /// An entry keeps its id across rebuilds, whatever is added or removed around it: a host's
    /// click on an older layout still means the entry it showed.
    @Test func entryIDsStayTheSameAcrossRebuilds() throws {
        var ids = TrayMenuIDs()
        let first = TrayModel(
            document: try document(
                [("home", nil, .signedIn(expiresAt: nil)), ("work", nil, .signedIn(expiresAt: nil))],
                active: "work"
            ),
            usage: [:],
            ids: &ids,
            clock: clock
        )
        let second = TrayModel(
            document: try document(
                [
                    ("alpha", nil, .signedIn(expiresAt: nil)), ("home", nil, .reauthenticationRequired),
                    ("work", nil, .signedIn(expiresAt: nil)),
                ],
                active: "home"
            ),
            usage: [:],
            ids: &ids,
            clock: clock
        )
        func id(_ model: TrayModel, _ action: TrayAction) -> Int32? { model.actions.first { $0.value == action }?.key }
        for action in [
            TrayAction.switchTo(try Slot("home")), .switchTo(try Slot("work")), .refresh(try Slot("work")), .best,
            .openUsage, .quit,
        ] {
            #expect(id(first, action) != nil && id(first, action) == id(second, action), "\(action)")
        }
        // New entries get new ids; no id means two things.
        let alpha = try #require(id(second, .switchTo(try Slot("alpha"))))
        #expect(!first.entries.map(\.id).contains(alpha))
        #expect(Set(second.entries.map(\.id)).count == second.entries.count)
        #expect(id(second, .signIn(try Slot("home"))) != nil)
    }

    /// The icon is a meter drawn from usage: pixels only (no theme name to be replaced), a
    /// 10 % and a 90 % slot drawn differently, each state with a mark that needs no colour.
    @Test func theIconIsAMeterOfTheBusiestWindows() throws {
        let ten = TrayIcon(state: .ok, bars: [0.1])
        let ninety = TrayIcon(state: .nearThreshold, bars: [0.9])
        for size in TrayIcon.pixmapSizes {
            let a = ten.pixels(size: size)
            let b = ninety.pixels(size: size)
            #expect(a.count == size * size * 4 && b.count == size * size * 4)
            #expect(a[3] == 0, "a transparent corner")
            let middle = (size / 2 * size + size / 2) * 4
            #expect(a[middle] == 255, "an opaque middle")
            // The bar's right half: empty track at 10 %, filled at 90 %.
            let x = size * 11 / 16
            let y = size / 2
            let i = (y * size + x) * 4
            #expect(Array(a[i + 1...i + 3]) != Array(b[i + 1...i + 3]), "\(size) px: 10 % and 90 % differ at the right")
        }
        // Without colour: grey levels differ between the states' marks.
        func grey(_ icon: TrayIcon) -> [Int] {
            let p = icon.pixels(size: 32)
            return stride(from: 0, to: p.count, by: 4).map {
                (Int(p[$0 + 1]) * 30 + Int(p[$0 + 2]) * 59 + Int(p[$0 + 3]) * 11) / 100
            }
        }
        let looks = [
            TrayIcon(state: .ok, bars: [0.5, 0.2]), TrayIcon(state: .ok, bars: [0.5, 0.2], stale: true),
            TrayIcon(state: .atLimit, bars: [1, 0.2]), TrayIcon(state: .mustSignIn), TrayIcon(state: .ok),
        ]
        #expect(Set(looks.map(grey)).count == looks.count)
        // The same drawing as a PNG for menu rows.
        let png = ten.png(size: 16)
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    }
}
