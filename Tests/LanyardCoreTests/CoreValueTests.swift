import Foundation
import LanyardCore
import LanyardSupport
import Testing

@Suite struct SlotNameTests {
    @Test(arguments: ["work", "a", "0", "personal-2", "alice.smith", "a_b", String(repeating: "x", count: 64)])
    func acceptsValidNames(_ name: String) throws {
        #expect(try Slot(name).name == name)
    }

    @Test func rejectsEachMalformedShapeWithItsOwnError() {
        #expect(throws: SlotNameError.empty) { try Slot("") }
        #expect(throws: SlotNameError.tooLong(count: 65)) { try Slot(String(repeating: "x", count: 65)) }
        #expect(throws: SlotNameError.badFirstCharacter("-work")) { try Slot("-work") }
        #expect(throws: SlotNameError.badFirstCharacter(".hidden")) { try Slot(".hidden") }
        #expect(throws: SlotNameError.badFirstCharacter("Work")) { try Slot("Work") }
        #expect(throws: SlotNameError.badCharacter("wo rk", position: 3)) { try Slot("wo rk") }
        #expect(throws: SlotNameError.badCharacter("a/b", position: 2)) { try Slot("a/b") }
        #expect(throws: SlotNameError.badCharacter("café", position: 4)) { try Slot("café") }
    }

    /// The machine's fleet keys live in the same stores as slots, under names no door accepts:
    /// not `login`, a pin, the registry, a server or a fleet value (they all make a `Slot`).
    @Test func theReservedNamespaceIsRefusedAtTheDoorAndReadBackFromStores() throws {
        #expect(throws: SlotNameError.reserved("lanyard-fleet-identity")) { try Slot("lanyard-fleet-identity") }
        #expect(throws: SlotNameError.reserved("lanyard-fleet-x")) { try Slot("lanyard-fleet-x") }
        #expect(try Slot("lanyard-fleetwood").name == "lanyard-fleetwood")
        let reserved = Slot(reserved: "identity")
        #expect(reserved.isReserved && reserved.name == "lanyard-fleet-identity")
        #expect(try Slot(stored: "lanyard-fleet-identity") == reserved)
        #expect(try !Slot(stored: "work").isReserved)
        #expect(throws: SlotNameError.self) { try Slot(stored: "lanyard-fleet-") }
        #expect(SlotNameError.reserved("lanyard-fleet-identity").localizedDescription.contains("reserved"))
    }

    @Test func errorMessagesSayWhatIsAllowed() {
        let message = SlotNameError.badCharacter("a/b", position: 2).localizedDescription
        #expect(message.contains("position 2") && message.contains("a-z"))
    }

    @Test func suggestsANameFromAnEmailLocalPart() {
        #expect(Slot.suggested(from: "Alice.Smith")?.name == "alice.smith")
        #expect(Slot.suggested(from: "bob+work")?.name == "bob")
        #expect(Slot.suggested(from: "__x y")?.name == "x-y")
        #expect(Slot.suggested(from: "???") == nil)
    }

}

@Suite struct PlanTests {
    static let known: [(String, Plan.Kind, String)] = [
        ("free", .free, "Free"), ("go", .go, "Go"), ("plus", .plus, "Plus"), ("pro", .pro, "Pro"),
        ("prolite", .proLite, "Pro Lite"), ("team", .team, "Team"),
        ("self_serve_business_usage_based", .selfServeBusinessUsageBased, "Business (usage-based)"),
        ("business", .business, "Business"),
        ("enterprise_cbp_usage_based", .enterpriseCBPUsageBased, "Enterprise (usage-based)"),
        ("enterprise", .enterprise, "Enterprise"), ("hc", .enterprise, "Enterprise"),
        ("edu", .edu, "Edu"), ("education", .edu, "Edu"),
    ]

    @Test func parsesEveryListedPlan() {
        for (raw, kind, display) in Self.known {
            let plan = Plan(rawValue: raw)
            #expect(plan.kind == kind, "\(raw)")
            #expect(plan.displayName == display, "\(raw)")
            #expect(plan.rawValue == raw)
        }
        #expect(Set(Self.known.map(\.1)) == Set(Plan.Kind.allCases))
    }

    @Test func isCaseInsensitiveAndKeepsTheRawValue() {
        let plan = Plan(rawValue: "ProLite")
        #expect(plan.kind == .proLite)
        #expect(plan.rawValue == "ProLite")
        #expect(Plan(rawValue: "ENTERPRISE").kind == .enterprise)
        #expect(Plan(rawValue: "Self_Serve_Business_Usage_Based").displayName == "Business (usage-based)")
    }

    @Test func keepsUnknownValuesRaw() {
        let plan = Plan(rawValue: "galaxy_brain")
        #expect(plan.kind == nil)
        #expect(plan.displayName == "galaxy_brain")
    }

    @Test func encodesAsTheRawString() throws {
        let info = AccountInfo(plan: Plan(rawValue: "Pro"))
        #expect(info.json.serialized() == #"{"fedramp":false,"plan":"Pro"}"#)
    }
}

@Suite struct AuthStateTests {
    @Test func roundTripsEveryState() throws {
        let states: [AuthState] = [
            .signedOut, .signingIn,
            .awaitingDeviceCode(userCode: "ABCD-1234", verificationURL: URL(string: "https://x.test/device")!),
            .signedIn(expiresAt: Date(timeIntervalSince1970: 1_800_000_000)), .signedIn(expiresAt: nil),
            .reauthenticationRequired, .failed("boom"),
        ]
        for state in states {
            #expect(try AuthState.decode(state.jsonData(), source: "t") == state)
        }
    }

    @Test func rejectsUnknownStateNames() {
        #expect(throws: DecodeError.self) {
            try AuthState.decode(Data(#"{"state":"sleeping"}"#.utf8), source: "t")
        }
    }
}
