import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import Testing

/// `RegistryView` answers "which slot is active" and "this slot's record" without decoding the
/// other slots; it must always agree with the full decode, and fall back to it for any file that
/// is not in the layout Lanyard writes.
@Suite struct RegistryViewTests {
    let temp = TempDirectory()

    func record(
        _ n: Int,
        state: AuthState = .signedIn(expiresAt: Date(timeIntervalSince1970: 1_800_000_000))
    ) -> SlotRecord {
        SlotRecord(
            provider: n % 2 == 0 ? "openai" : "github",
            backend: n % 3 == 0 ? .file : .secretService,
            account: AccountInfo(email: "user\(n)@example.com", accountID: "acct-\(n)", plan: Plan(rawValue: "pro")),
            state: state,
            lastRefresh: Date(timeIntervalSince1970: 1_799_000_000),
            lastErrorCode: n % 5 == 0 ? "boom" : nil
        )
    }

    /// Names that are also the registry's own keys, or prefixes of each other.
    static let names = ["active", "slots", "version", "work", "work-2", "w", "a.b_c-d", "provider", "account"]

    func populated() throws -> Registry {
        let registry = Registry(paths: temp.paths)
        try registry.update { doc in
            for (n, name) in Self.names.enumerated() { doc.slots[try Slot(name)] = record(n) }
            doc.slots[try Slot("gone")] = record(99, state: .failed("a \"quoted\"\nmessage"))
            doc.active = try Slot("work-2")
        }
        return registry
    }

    @Test func agreesWithTheFullDecodeForEverySlot() throws {
        let registry = try populated()
        let document = try registry.load()
        let view = try registry.view()
        #expect(try view.active() == document.active)
        for (slot, record) in document.slots { #expect(try view.record(of: slot) == record, "\(slot.name)") }
        #expect(try view.record(of: try Slot("missing")) == nil)
        #expect(try view.record(of: try Slot("wor")) == nil)
    }

    @Test func aFileInAnotherLayoutIsDecodedWhole() throws {
        let registry = try populated()
        let document = try registry.load()
        // Compact (no newlines): none of the fast paths applies.
        try document.jsonData(pretty: false).write(to: URL(fileURLWithPath: registry.path))
        let view = try registry.view()
        #expect(try view.active() == document.active)
        #expect(try view.record(of: try Slot("work")) == document.slots[try Slot("work")])
        #expect(try view.record(of: try Slot("missing")) == nil)
    }

    @Test func anActiveSlotWithoutARecordIsReportedAsTheFullDecodeReportsIt() throws {
        let registry = try populated()
        var text = try String(contentsOfFile: registry.path, encoding: .utf8)
        text = text.replacingOccurrences(of: "\"active\": \"work-2\"", with: "\"active\": \"nobody\"")
        try text.write(toFile: registry.path, atomically: false, encoding: .utf8)
        #expect(throws: RegistryError.self) { try registry.view().active() }
    }

    @Test func aDamagedRecordFallsBackToTheFullDecodeAndIsReported() throws {
        let registry = try populated()
        var text = try String(contentsOfFile: registry.path, encoding: .utf8)
        text = text.replacingOccurrences(of: "\"provider\": \"openai\"", with: "\"provider\": 7")
        try text.write(toFile: registry.path, atomically: false, encoding: .utf8)
        #expect(throws: RegistryError.self) { try registry.view().record(of: try Slot("active")) }
    }

    @Test func noRegistryMeansNoSlots() throws {
        let view = try Registry(paths: temp.paths).view()
        #expect(try view.active() == nil)
        #expect(try view.record(of: try Slot("work")) == nil)
    }

    @Test func setActiveWritesWhatAFullUpdateWrites() throws {
        let registry = try populated()
        let (previous, record) = try registry.setActive(try Slot("active"))
        #expect(previous == (try Slot("work-2")))
        #expect(record == (try registry.load().slots[try Slot("active")]))
        let spliced = try Data(contentsOf: URL(fileURLWithPath: registry.path))
        var expected = try registry.load()
        expected.active = try Slot("active")
        #expect(spliced == expected.jsonData(pretty: true), "the spliced file is not the canonical document")
        #expect(try registry.load().active == (try Slot("active")))
        #expect(FileManager.default.fileExists(atPath: registry.path + ".prev"))
    }

    @Test func setActiveRefusesAnUnknownSlotAndChangesNothing() throws {
        let registry = try populated()
        let before = try Data(contentsOf: URL(fileURLWithPath: registry.path))
        let nobody = try Slot("nobody")
        #expect(throws: RegistryError.unknownSlot(nobody)) { try registry.setActive(nobody) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: registry.path)) == before)
    }

    @Test func setActiveOnAnotherLayoutGoesThroughTheFullUpdate() throws {
        let registry = try populated()
        try registry.load().jsonData(pretty: false).write(to: URL(fileURLWithPath: registry.path))
        _ = try registry.setActive(try Slot("w"))
        #expect(try registry.load().active == (try Slot("w")))
    }
}
