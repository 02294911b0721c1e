import Foundation
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

/// A machine's first commands in a fleet (issue 33, "the newcomer's second hour").
@Suite struct FleetSecondHourTests {
    /// A machine just approved into the fleet has synced nothing: `token work` brings work from
    /// the fleet (one sync of that slot) instead of saying there is no such slot.
    @Test func aJustApprovedMachineFetchesASharedSlotOnFirstUse() async throws {
        let h = try await FleetHarness(machines: 1)
        let m2 = try FleetMachine("m2", fleet: h.fleet, cluster: h.cluster, server: h.server)
        try m2.join(through: h.machines[0])
        #expect(try Registry(paths: m2.paths).loadInTest().slots.isEmpty, "nothing synced yet")

        let token = try m2.run("token", "work")
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout == (try h.machines[0].stored("work").tokens.accessToken) + "\n")
        #expect(
            token.stderr.contains("lanyard: work was not on this machine yet: brought it from fleet \(h.fleet)"),
            "\(token.stderr)"
        )
        #expect(try m2.stored("work").account.email == "fleet@example.com")
        let again = try m2.run("token", "work")
        #expect(again.status == 0 && !again.stderr.contains("brought it"), "once here, it is here: \(again.stderr)")

        // A name the fleet does not share is the plain unknown slot.
        let none = try m2.run("token", "nope")
        #expect(
            none.status == 3 && none.stderr.contains("no slot named nope") && !none.stderr.contains("fleet sync"),
            "\(none.stderr)"
        )
    }

    /// A machine whose fleet cannot hand it the slot (here: not approved yet) is told so, with
    /// `lanyard fleet sync` named.
    @Test func aSlotTheFleetCannotHandOverNamesFleetSync() async throws {
        let h = try await FleetHarness(machines: 1)
        let outsider = try FleetMachine("m2", fleet: h.fleet, cluster: h.cluster, server: h.server)
        let r = try outsider.run("token", "work", "--json")
        #expect(r.status == 3, "\(r.stdout)\(r.stderr)")
        let error =
            (try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])?["error"] as? [String: Any]
        #expect(error?["code"] as? String == "unknown_slot")
        let message = error?["message"] as? String ?? ""
        #expect(
            message.hasPrefix("no slot named work here, and fleet \(h.fleet) could not be asked for it ("),
            "\(message)"
        )
        #expect(
            message.hasSuffix("`lanyard fleet sync` brings the fleet's shared slots here once it answers"),
            "\(message)"
        )
    }

    /// `fleet sync` on a machine with its own slot of a shared slot's name reports `conflict` with
    /// the reason and the fix; after the fix the fleet's slot comes.
    @Test func syncReportsAConflictWithItsReasonAndTheFix() async throws {
        let h = try await FleetHarness(machines: 1)
        let m2 = try FleetMachine("m2", fleet: h.fleet, cluster: h.cluster, server: h.server)
        try await h.server.signIn(m2.manager(), slot: "work", email: "mine@example.com")
        try m2.join(through: h.machines[0])

        let sync = try m2.run("fleet", "sync")
        let expected =
            "conflict: a slot named work exists on this machine and is not shared, "
            + "so the fleet's work was not brought here: "
            + "rename this one (`lanyard rename work work-local`) or remove it "
            + "(`lanyard remove work`), then run `lanyard fleet sync` again"
        #expect(sync.stdout.contains(expected), "\(sync.stdout)")
        let json = try m2.run("fleet", "sync", "--json")
        let slots =
            (try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["slots"]
            as? [[String: Any]] ?? []
        #expect(
            slots.first?["outcome"] as? String == "conflict"
                && (slots.first?["message"] as? String)?.contains("lanyard rename work") == true,
            "\(json.stdout)"
        )
        #expect(try m2.stored("work").account.email == "mine@example.com", "the local slot is left alone")

        #expect(try m2.run("rename", "work", "work-local").status == 0)
        let fixed = try m2.run("fleet", "sync", "--json")
        let after =
            (try JSONSerialization.jsonObject(with: Data(fixed.stdout.utf8)) as? [String: Any])?["slots"]
            as? [[String: Any]] ?? []
        #expect(after.first { $0["slot"] as? String == "work" }?["outcome"] as? String == "added", "\(fixed.stdout)")
        #expect(try m2.stored("work").account.email == "fleet@example.com")
    }
}
