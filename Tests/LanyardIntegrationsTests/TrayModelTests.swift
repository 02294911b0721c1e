import Foundation
import Testing
@testable import LanyardAuth
@testable import LanyardCore
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
}
