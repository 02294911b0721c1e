import Foundation
import Testing
@testable import LanyardAuth
@testable import LanyardCore
@testable import LanyardDesktop
@testable import LanyardIntegrations
@testable import LanyardStore

/// `lanyard tray`'s menu, icon and tooltip from the registry and the usage known (pure; the
/// D-Bus side is TrayTests in LanyardCLITests).
@Suite struct TrayModelTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    func describe(_ date: Date) -> String { "in \(Int(date.timeIntervalSince(now) / 60)) min" }

    func document(_ slots: [(String, String?, AuthState)], active: String?) throws -> RegistryDocument {
        var document = RegistryDocument()
        for (name, email, state) in slots {
            document.slots[try Slot(name)] = SlotRecord(provider: "openai", backend: .file,
                                                        account: AccountInfo(email: email, plan: Plan(rawValue: "plus")), state: state)
        }
        document.active = try active.map { try Slot($0) }
        return document
    }

    @Test func theIconSaysTheActiveSlotsState() throws {
        let doc = try document([("work", "w@x.com", .signedIn(expiresAt: nil)), ("gone", nil, .reauthenticationRequired)], active: "work")
        let work = try Slot("work")
        func state(_ usage: TrayUsage) -> TrayState { TrayModel(document: doc, usage: [work: usage], describe: describe).state }
        #expect(state(.unknown) == .ok)
        #expect(state(.report(UsageReport(primary: UsageWindow(usedPercent: 79, windowSeconds: 18000)))) == .ok)
        #expect(state(.report(UsageReport(primary: UsageWindow(usedPercent: 80, windowSeconds: 18000)))) == .nearThreshold)
        #expect(state(.report(UsageReport(primary: UsageWindow(usedPercent: 100, windowSeconds: 18000)))) == .atLimit)
        #expect(state(.atLimit(resetsAt: nil)) == .atLimit)
        var gone = doc
        gone.active = try Slot("gone")
        let model = TrayModel(document: gone, usage: [:], describe: describe)
        #expect(model.state == .mustSignIn && model.state.iconName == "dialog-password" && model.state.itemStatus == "NeedsAttention")
        #expect(TrayModel(document: RegistryDocument(), usage: [:], describe: describe).state == .noSlot)
    }

    @Test func eachSlotShowsEmailPlanAndEveryWindowAsUsageNamesThem() throws {
        let doc = try document([("work", "w@x.com", .signedIn(expiresAt: nil)), ("gone", nil, .reauthenticationRequired)], active: "work")
        let report = UsageReport(plan: Plan(rawValue: "pro"),
                                 primary: UsageWindow(usedPercent: 42.4, windowSeconds: 18000, resetsAt: now + 600),
                                 secondary: UsageWindow(usedPercent: 7, windowSeconds: 604_800, resetsAt: now + 6000))
        let model = TrayModel(document: doc, usage: [try Slot("work"): .report(report)], describe: describe)
        let labels = model.entries.map(\.label)
        #expect(labels.contains("work · w@x.com · Pro · 5 h 42% (resets in 10 min) · weekly 7% (resets in 100 min)"), "\(labels)")
        #expect(labels.contains("gone · Plus · must sign in again"))
        #expect(model.tooltipTitle == "Lanyard: work" && model.tooltipBody == "5 h 42% (resets in 10 min)")
        // Radio entries, the active one on; then the actions, every one reachable from the menu.
        // Slots in name order: gone, then the active work.
        #expect(model.entries.filter { $0.radio != nil }.map(\.radio) == [false, true])
        let signIn = try #require(model.entries.first { $0.label == "Sign in again\u{2026}" })
        #expect(model.entries.filter { $0.parent == signIn.id }.map(\.label) == ["gone"])
        #expect(model.actions.values.filter { if case .refresh = $0 { return true }; return false }.count == 2)
        #expect(model.actions.values.contains(.best) && model.actions.values.contains(.openUsage) && model.actions.values.contains(.quit))
    }

    @Test func outsideTextIsEscapedAndUnderscoresDoubled() throws {
        let doc = try document([("my_slot", "a_b\u{1B}[31m@x.com", .signedIn(expiresAt: nil))], active: "my_slot")
        let label = try #require(TrayModel(document: doc, usage: [:], describe: describe).entries.first?.label)
        #expect(label == "my__slot · a__b\\u{1B}[31m@x.com · Plus", "\(label)")
    }

    /// An entry keeps its id across rebuilds, whatever is added or removed around it: a host's
    /// click on an older layout still means the entry it showed.
    @Test func entryIDsStayTheSameAcrossRebuilds() throws {
        var ids = TrayMenuIDs()
        let first = TrayModel(document: try document([("home", nil, .signedIn(expiresAt: nil)), ("work", nil, .signedIn(expiresAt: nil))],
                                                     active: "work"), usage: [:], ids: &ids, describe: describe)
        let second = TrayModel(document: try document([("alpha", nil, .signedIn(expiresAt: nil)), ("home", nil, .reauthenticationRequired),
                                                       ("work", nil, .signedIn(expiresAt: nil))], active: "home"),
                               usage: [:], ids: &ids, describe: describe)
        func id(_ model: TrayModel, _ action: TrayAction) -> Int32? { model.actions.first { $0.value == action }?.key }
        for action in [TrayAction.switchTo(try Slot("home")), .switchTo(try Slot("work")), .refresh(try Slot("work")), .best, .openUsage, .quit] {
            #expect(id(first, action) != nil && id(first, action) == id(second, action), "\(action)")
        }
        // New entries get new ids; no id means two things.
        let alpha = try #require(id(second, .switchTo(try Slot("alpha"))))
        #expect(!first.entries.map(\.id).contains(alpha))
        #expect(Set(second.entries.map(\.id)).count == second.entries.count)
        #expect(id(second, .signIn(try Slot("home"))) != nil)
    }

    /// The fallback pixels: a disc (transparent corners, opaque middle) whose colour says the
    /// state, with a white mark at the limit and when the slot must sign in.
    @Test func theFallbackIconIsADiscInTheStatesColour() {
        let states: [TrayState] = [.ok, .nearThreshold, .atLimit, .mustSignIn, .noSlot]
        for size in TrayState.pixmapSizes {
            var middles: Set<[UInt8]> = []
            for state in states {
                let pixels = state.pixels(size: size)
                #expect(pixels.count == size * size * 4)
                #expect(pixels[0] == 0, "a transparent corner")
                let middle = (size / 2 * size + size / 2) * 4
                #expect(pixels[middle] == 255, "an opaque middle")
                let rgb = Array(pixels[middle + 1...middle + 3])
                #expect((rgb == [255, 255, 255]) == (state == .atLimit || state == .mustSignIn), "\(state) \(size): \(rgb)")
                // Left of the middle, off the mark: the state's colour.
                let side = (size / 2 * size + size / 2 - size * 3 / 8) * 4
                middles.insert(Array(pixels[side + 1...side + 3]))
            }
            #expect(middles.count == states.count, "each state its own colour at \(size) px")
        }
    }
}

