import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardCLI

@Suite struct ListCommandTests {
    @Test func emptyRegistry() async {
        let h = CLIHarness()
        let r = await h.run("list")
        #expect(r.status == 0)
        #expect(r.stdout == "No slots yet. Sign an account in with `lanyard login`.\n")
        let j = await h.run("list", "--json")
        #expect(j.status == 0)
        #expect(j.json["slots"] as? [Any] != nil && (j.json["slots"] as! [Any]).isEmpty)
    }

    @Test func humanTableIsAligned() async throws {
        let h = CLIHarness()
        try h.addSlot("work", email: "alice@corp.example", plan: "pro", active: true)
        try h.addSlot("personal", email: "al@home.example", plan: "prolite", state: .reauthenticationRequired)
        let r = await h.run("list")
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("   SLOT      PROVIDER  ACCOUNT"))
        #expect(lines[1].hasPrefix("   personal  openai    al@home.example     Pro Lite  sign-in required"))
        #expect(
            lines[2].hasPrefix(
                "*  work      openai    alice@corp.example  Pro       signed in         in "
                    + "2 h 10 min (\(localClock(h.clock.now() + 7800, now: h.clock.now())))"
            )
        )
        #expect(!r.stdout.contains("\u{1B}["), "no colour when stdout is not a TTY")
        #expect(!r.stdout.contains("SECRET"))
    }

    @Test func colourOnlyOnATTYAndNeverWithNoColor() async throws {
        let h = CLIHarness()
        try h.addSlot("work", active: true)
        h.tty = true
        #expect(await h.run("list").stdout.contains("\u{1B}[32m"))
        #expect(await !h.run("list", "--no-color").stdout.contains("\u{1B}["))
        h.extraEnvironment["NO_COLOR"] = "1"
        #expect(await !h.run("list").stdout.contains("\u{1B}["))
    }

    @Test func jsonListsEverySlotWithoutSecrets() async throws {
        let h = CLIHarness()
        try h.addSlot("work", plan: "pro", active: true)
        try h.addSlot("home", plan: "mystery_plan")
        let r = await h.run("list", "--json")
        #expect(r.status == 0)
        #expect(r.json["active"] as? String == "work")
        let slots = try #require(r.json["slots"] as? [[String: Any]])
        #expect(slots.map { $0["slot"] as? String } == ["home", "work"])
        #expect(slots[0]["plan"] as? String == "mystery_plan" && slots[0]["plan_name"] as? String == "mystery_plan")
        #expect(slots[1]["plan_name"] as? String == "Pro")
        #expect(slots[1]["active"] as? Bool == true && slots[1]["state"] as? String == "signed-in")
        #expect(slots[1]["expires_at"] as? String == "2027-01-15T10:10:00Z")
        #expect(!r.stdout.contains("SECRET"))
    }
}

@Suite struct StatusCommandTests {
    @Test func showsTheResolvedSlot() async throws {
        let h = CLIHarness()
        try h.addSlot("work", email: "alice@corp.example", plan: "team", active: true)
        let r = await h.run("status")
        #expect(r.status == 0)
        #expect(r.stdout.hasPrefix("work (active)\n"))
        #expect(r.stdout.contains("  plan         Team\n"))
        #expect(
            r.stdout.contains(
                "  expires      in 2 h 10 min (\(localClock(h.clock.now() + 7800, now: h.clock.now())))\n"
            )
        )
        #expect(
            r.stdout.contains("  last refresh 3 min ago (\(localClock(h.clock.now() - 180, now: h.clock.now())))\n")
        )
        #expect(r.stdout.contains("  chosen by    the active slot, set by `lanyard switch`\n"))
        let j = await h.run("status", "--json")
        #expect(j.json["slot"] as? String == "work" && j.json["chosen_by"] as? String == "active")
    }

    @Test func exitStatusFollowsTheState() async throws {
        let h = CLIHarness()
        try h.addSlot("a", state: .signedOut)
        try h.addSlot("b", state: .reauthenticationRequired)
        try h.addSlot("c", state: .failed("broken"))
        #expect(await h.run("status", "a").status == 3)
        #expect(await h.run("status", "b").status == 4)
        let c = await h.run("status", "c", "--json")
        #expect(c.status == 1)
        #expect(c.json["state_message"] as? String == "broken")
    }

    @Test func unknownOrMissingSlots() async {
        let h = CLIHarness()
        let none = await h.run("status")
        #expect(none.status == 3)
        #expect(none.stderr.contains("no slot is active"))
        let unknown = await h.run("status", "ghost", "--json")
        #expect(unknown.status == 3)
        #expect((unknown.json["error"] as? [String: Any])?["code"] as? String == "unknown_slot")
        let bad = await h.run("status", "Bad Name")
        #expect(bad.status == 2)
    }
}

@Suite struct SwitchCommandTests {
    @Test func switchesAndReports() async throws {
        let h = CLIHarness()
        try h.addSlot("work", email: "w@example.com", active: true)
        try h.addSlot("home", email: "h@example.com")
        let r = await h.run("switch", "home")
        #expect(r.status == 0)
        #expect(r.stdout == "Switched to home (h@example.com).\n")
        #expect(try h.registry.loadInTest().active?.name == "home")
        #expect(await h.run("switch", "home").stdout == "home (h@example.com) is already active.\n")
        let j = await h.run("switch", "work", "--json")
        #expect(j.json["active"] as? String == "work" && j.json["previous"] as? String == "home")
    }

    @Test func unknownSlotChangesNothing() async throws {
        let h = CLIHarness()
        try h.addSlot("work", active: true)
        let r = await h.run("switch", "wrok")
        #expect(r.status == 3)
        #expect(r.stderr.contains("no slot named wrok"))
        #expect(try h.registry.loadInTest().active?.name == "work")
    }

    @Test func withNoSlotTheOnlySlotOrTheOtherOfTwo() async throws {
        let h = CLIHarness()
        #expect(await h.run("switch").status == 3)  // no slot at all: not signed in
        try h.addSlot("work", email: "w@example.com")
        #expect(await h.run("switch").stdout == "Switched to work (w@example.com).\n")
        try h.addSlot("home", email: "h@example.com")
        #expect(await h.run("switch").stdout == "Switched to home (h@example.com).\n")
        let back = await h.run("switch", "--json")
        #expect(back.json["active"] as? String == "work" && back.json["previous"] as? String == "home")
    }

    @Test func withNoSlotAndThreeItAsksOnATerminalAndRefusesWithoutOne() async throws {
        let h = CLIHarness()
        try h.addSlot("work", email: "w@example.com", active: true)
        try h.addSlot("home", email: "h@example.com")
        try h.addSlot("ci", email: "c@example.com")
        let offTerminal = await h.run("switch")
        #expect(offTerminal.status == 2)
        #expect(offTerminal.stderr.contains("switch needs a SLOT: one of ci, home, work"))
        #expect(try h.registry.loadInTest().active?.name == "work")

        h.tty = true
        h.input = ["2"]
        let byNumber = await h.run("switch")
        #expect(byNumber.status == 0)
        #expect(
            byNumber.stderr.contains(
                "  1) ci (c@example.com)\n  2) home (h@example.com)\n  3) work (w@example.com)  [active]\n"
            )
        )
        #expect(byNumber.stderr.contains("Switch to which slot? [1-3 or a name]"))
        #expect(try h.registry.loadInTest().active?.name == "home")

        h.input = ["ci"]
        #expect(await h.run("switch").status == 0)
        #expect(try h.registry.loadInTest().active?.name == "ci")

        h.input = [""]
        let declined = await h.run("switch")
        #expect(declined.status == 1)
        #expect(declined.stderr.hasSuffix("Nothing switched.\n"))
        #expect(try h.registry.loadInTest().active?.name == "ci")

        h.input = ["hmoe"]
        let typo = await h.run("switch")
        #expect(typo.status == 2)
        #expect(typo.stderr.contains("did you mean home?"))
        #expect(try h.registry.loadInTest().active?.name == "ci")
    }
}

@Suite struct RenameRemoveCommandTests {
    @Test func renameMovesRegistryEntryCredentialAndActiveMark() async throws {
        let h = CLIHarness()
        try h.addSlot("work", active: true)
        let r = await h.run("rename", "work", "job")
        #expect(r.status == 0)
        #expect(r.stdout == "Renamed work to job.\n")
        let doc = try h.registry.loadInTest()
        let work = try Slot("work")
        #expect(doc.active?.name == "job" && doc.slots[work] == nil)
        #expect(try h.store.get(try Slot("job")).tokens.accessToken == "AT-work-SECRET")
        #expect(throws: StoreError.notFound(slot: work)) { try h.store.get(work) }
    }

    @Test func renameRefusesClashesAndStoreFailuresChangeNothing() async throws {
        let h = CLIHarness()
        try h.addSlot("a")
        try h.addSlot("b")
        #expect(await h.run("rename", "a", "b").status == 1)
        #expect(await h.run("rename", "zzz", "c").status == 3)
        h.store.failWith = .locked(backend: "Secret Service", hint: "unlock it")
        let locked = await h.run("rename", "a", "c", "--json")
        #expect(locked.status == 5)
        #expect((locked.json["error"] as? [String: Any])?["code"] as? String == "store_locked")
        h.store.failWith = nil
        #expect(try h.registry.loadInTest().slots.keys.map(\.name).sorted() == ["a", "b"])
        #expect(try h.store.list().map(\.name) == ["a", "b"])
    }

    @Test func removeNeedsConfirmation() async throws {
        let h = CLIHarness()
        try h.addSlot("work", active: true)
        let refused = await h.run("remove", "work")
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("--yes"))
        h.tty = true
        h.input = ["n"]
        #expect(await h.run("remove", "work").status == 1, "declining is an answer, not a cancellation")
        #expect(try h.registry.loadInTest().slots.count == 1)
        h.input = ["y"]
        let r = await h.run("remove", "work")
        #expect(r.status == 0)
        #expect(r.stdout == "Removed work.\n")
        #expect(try h.registry.loadInTest() == RegistryDocument())
        #expect(try h.store.list().isEmpty)
    }

    @Test func removeWithYesAndJSON() async throws {
        let h = CLIHarness()
        try h.addSlot("work")
        let r = await h.run("remove", "work", "--yes", "--json")
        #expect(r.status == 0 && r.json["removed"] as? String == "work")
    }

    @Test func removeKeepsTheEntryWhenTheStoreFails() async throws {
        let h = CLIHarness()
        try h.addSlot("work")
        h.store.failWith = .unavailable(backend: "Secret Service", hint: "start a keyring")
        #expect(await h.run("remove", "work", "-y").status == 5)
        #expect(try h.registry.loadInTest().slots.count == 1)
    }
}

@Suite struct ResolutionCommandTests {
    @Test func whichReportsEachRule() async throws {
        let h = CLIHarness()
        try h.addSlot("active", active: true)
        try h.addSlot("pinned")
        try h.addSlot("env")
        try h.addSlot("flag")
        #expect(await h.run("which").stdout == "active  (the active slot, set by `lanyard switch`)\n")
        #expect(await h.run("pin", "pinned").status == 0)
        let sub = h.workingDirectory + "/deeper/still"
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        h.workingDirectory = sub
        let pinned = await h.run("which", "--json")
        #expect(pinned.json["slot"] as? String == "pinned" && pinned.json["rule"] as? String == "pin-file")
        #expect((pinned.json["path"] as? String)?.hasSuffix("/work/.lanyard") == true)
        h.extraEnvironment["LANYARD_ACCOUNT"] = "env"
        #expect(await h.run("which", "--json").json["rule"] as? String == "environment")
        let flagged = await h.run("which", "--account", "flag", "--json")
        #expect(flagged.json["slot"] as? String == "flag" && flagged.json["rule"] as? String == "flag")
        #expect(await h.run("--account=flag", "which").stdout.hasPrefix("flag"))
    }

    @Test func whichWithNothingOrAMissingSlot() async throws {
        let h = CLIHarness()
        #expect(await h.run("which").status == 3)
        h.extraEnvironment["LANYARD_ACCOUNT"] = "ghost"
        let r = await h.run("which")
        #expect(r.status == 3)
        #expect(r.stdout.hasPrefix("ghost"))
        #expect(r.stderr.contains("does not exist"))
        h.extraEnvironment["LANYARD_ACCOUNT"] = "Not Valid"
        let bad = await h.run("which")
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("LANYARD_ACCOUNT"))
    }

    @Test func pinAndUnpin() async throws {
        let h = CLIHarness()
        try h.addSlot("work")
        #expect(await h.run("pin", "nope").status == 3)
        let pin = await h.run("pin", "work", "--json")
        #expect(pin.status == 0 && pin.json["path"] as? String == h.workingDirectory + "/.lanyard")
        let unpin = await h.run("unpin")
        #expect(unpin.status == 0 && unpin.stdout.hasPrefix("Unpinned"))
        let again = await h.run("unpin", "--json")
        #expect(again.status == 1 && again.json["removed"] as? Bool == false)
    }
}

@Suite struct MetaCommandTests {
    @Test func versionAndHelp() async {
        let h = CLIHarness()
        #expect(await h.run("version").stdout == "lanyard \(Lanyard.version)\n")
        #expect(await h.run("--version").stdout == "lanyard \(Lanyard.version)\n")
        #expect(await h.run("version", "--json").json["version"] as? String == Lanyard.version)
        let help = await h.run("help")
        #expect(help.status == 0)
        for command in Lanyard.commands { #expect(help.stdout.contains("  \(command.name) ") == !command.hidden) }
        #expect(await h.run().stdout == help.stdout)
        #expect(await h.run("help", "switch").stdout.hasPrefix("Usage: lanyard switch [SLOT]"))
        #expect(await h.run("switch", "--help").stdout == h.run("help", "switch").stdout)
        #expect(await h.run("help", "swich").status == 2)
    }

    @Test func unknownCommandsAndFlagsSuggest() async {
        let h = CLIHarness()
        let r = await h.run("lsit")
        #expect(r.status == 2)
        #expect(r.stderr.contains("did you mean `list`?"))
        let f = await h.run("list", "--jsno")
        #expect(f.status == 2)
        #expect(f.stderr.contains("did you mean --json?"))
        let j = await h.run("lsit", "--json")
        #expect((j.json["error"] as? [String: Any])?["code"] as? String == "usage")
        #expect(await h.run("list", "extra").status == 2)
        #expect(await h.run("switch", "--account").status == 2, "switch takes no --account")
        #expect(await h.run("status", "--account").status == 2, "--account needs a value")
    }

    @Test func corruptRegistryIsReportedWithExitStatus1() async throws {
        let h = CLIHarness()
        try SecureFiles.ensureDirectory(h.paths.dataDirectory)
        _ = FileManager.default.createFile(atPath: h.registry.path, contents: Data("{nope".utf8))
        let r = await h.run("list")
        #expect(r.status == 1)
        #expect(r.stderr.contains("did not parse") && r.stderr.contains(".corrupt-"))
        let j = await h.run("list", "--json")
        #expect(j.status == 0, "after moving it aside the registry is empty, and says so")
    }

    @Test func configWarningsGoToStderr() async throws {
        let h = CLIHarness()
        try h.addSlot("a")
        try FileManager.default.createDirectory(atPath: h.paths.configDirectory, withIntermediateDirectories: true)
        try "[store]\nbogus = 1\n".write(toFile: h.paths.configFile, atomically: true, encoding: .utf8)
        let r = await h.run("rename", "a", "b")
        #expect(r.status == 0)
        #expect(r.stderr.contains("unknown key \"bogus\""))
        try "[store\n".write(toFile: h.paths.configFile, atomically: true, encoding: .utf8)
        let bad = await h.run("rename", "b", "c", "--json")
        #expect(bad.status == 1)
        #expect((bad.json["error"] as? [String: Any])?["code"] as? String == "config_invalid")
    }
}

/// `list --json` is written field by field; it must be the same document the summaries make.
@Suite struct ListDocumentTests {
    /// The whole output, and how many pieces it went out in.
    func listDocument(_ document: RegistryDocument, pretty: Bool) -> (text: String, pieces: Int) {
        var bytes: [UInt8] = []
        var pieces = 0
        ListView(document: document).write(pretty: pretty) {
            bytes += $0
            pieces += 1
        }
        return (String(decoding: bytes, as: UTF8.self), pieces)
    }

    @Test func aLongListGoesOutInPiecesThatMakeTheSameDocument() async throws {
        var document = RegistryDocument()
        for n in 0..<400 {
            document.slots[try Slot("slot-\(n)")] = SlotRecord(
                provider: "openai",
                backend: .file,
                account: AccountInfo(email: "u\(n)@example.com"),
                state: .signedOut
            )
        }
        let (text, pieces) = listDocument(document, pretty: true)
        #expect(pieces > 1)
        let expected = JSONValue.object([
            "active": .null,
            "slots": .array(
                document.sortedSlots.map { SlotSummaryView(slot: $0.slot, record: $0.record, active: false).json }
            ),
        ]).serialized(pretty: true)
        #expect(text == expected + "\n")
    }

    @Test(arguments: [true, false])
    func isTheSummariesSerialized(pretty: Bool) async throws {
        var document = RegistryDocument()
        #expect(
            listDocument(document, pretty: pretty).text
                == JSONValue.object(["active": .null, "slots": .array([])]).serialized(pretty: pretty) + "\n"
        )
        let states: [AuthState] = [
            .signedIn(expiresAt: Date(timeIntervalSince1970: 1_800_000_000)), .signedOut,
            .failed("the \"server\"\nsaid no\u{7}"), .reauthenticationRequired,
        ]
        for (n, state) in states.enumerated() {
            document.slots[try Slot("slot-\(n)")] = SlotRecord(
                provider: "openai",
                backend: n % 2 == 0 ? .file : .secretService,
                account: n == 1
                    ? AccountInfo()
                    : AccountInfo(
                        email: "u\(n)@example.com",
                        accountID: "acct-\(n)",
                        plan: Plan(rawValue: "pro"),
                        isFedRAMPAccount: n == 2
                    ),
                state: state,
                lastRefresh: n == 3 ? nil : Date(timeIntervalSince1970: 1_799_000_000),
                lastErrorCode: n == 3 ? "refresh_token_reused" : nil
            )
        }
        document.active = try Slot("slot-2")
        let expected = JSONValue.object([
            "active": .string("slot-2"),
            "slots": .array(
                document.sortedSlots.map {
                    SlotSummaryView(slot: $0.slot, record: $0.record, active: $0.slot == document.active).json
                }
            ),
        ]).serialized(pretty: pretty)
        #expect(listDocument(document, pretty: pretty).text == expected + "\n")
    }
}
