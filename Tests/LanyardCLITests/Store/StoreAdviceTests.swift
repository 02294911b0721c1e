import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// Error advice that leads somewhere.
@Suite struct StoreAdviceTests {
    /// `list --names --json` prints the names as JSON (it printed the whole list before).
    @Test func listNamesJSON() async throws {
        let cli = CLIHarness()
        try cli.addSlot("bob")
        try cli.addSlot("alice", active: true)
        let r = await cli.run("list", "--names", "--json")
        #expect(r.status == 0)
        #expect(
            try JSONValue.parse(Data(r.stdout.utf8)) == .object(["names": .array([.string("alice"), .string("bob")])])
        )
        #expect(await cli.run("list", "--names").stdout == "alice\nbob\n")
    }

    /// A mistyped slot gets "did you mean", as mistyped commands and options do.
    @Test func aMistypedSlotSuggestsTheClosestOne() async throws {
        let cli = CLIHarness()
        try cli.addSlot("alice", active: true)
        try cli.addSlot("work-laptop")
        let r = await cli.run("status", "alcie")
        #expect(r.status == 3)
        #expect(r.stderr == "lanyard: no slot named alcie; did you mean alice? (see `lanyard list`)\n", "\(r.stderr)")
        #expect(await cli.run("token", "work-laptpo").stderr.contains("did you mean work-laptop?"))
        #expect(await cli.run("switch", "zzzzzz").stderr == "lanyard: no slot named zzzzzz (see `lanyard list`)\n")
        let json = await cli.run("status", "alcie", "--json")
        #expect(
            (json.json["error"] as? [String: Any])?["message"] as? String
                == "no slot named alcie; did you mean alice? (see `lanyard list`)"
        )
    }

    /// A slot kept in the keyring, with no keyring to reach: `backend = file` alone changes nothing
    /// for it, so the advice names `lanyard store migrate` too.
    @Test func aKeyringSlotWithoutAKeyringPointsAtStoreMigrate() async throws {
        let home = TestHome()
        let paths = Paths(environment: home.environment)
        try Registry(paths: paths).updateInTest { doc in
            doc.slots[try Slot("work")] = SlotRecord(
                provider: "openai",
                backend: .secretService,
                account: AccountInfo(email: "w@example.com"),
                state: .signedIn(expiresAt: Date() + 3600),
                createdAt: Date()
            )
            doc.active = try Slot("work")
        }
        let runtime = home.root + "/run"
        #expect(!FileManager.default.fileExists(atPath: runtime + "/bus"))
        let r = try home.run(
            ["token", "work"],
            extraEnvironment: ["DBUS_SESSION_BUS_ADDRESS": "", "PATH": "/usr/bin:/bin"]
        )
        #expect(r.status == 5, "\(r.stderr)")
        #expect(r.stderr.contains("`lanyard store migrate --to file`"), "\(r.stderr)")
        #expect(r.stderr.contains("`lanyard store init`"))
    }
}
