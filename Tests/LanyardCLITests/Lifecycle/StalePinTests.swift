import Foundation
import LanyardCLI
import LanyardStore
import Testing

/// `.lanyard` pins name slots by name: a rename does not rewrite them, so it says which still name
/// the old slot, and doctor reports pins that name no slot (commands below them fail).
@Suite struct StalePinTests {
    /// Writes `folder/.lanyard` holding `name` (creating the folder).
    func pin(_ name: String, in folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("# pinned\n\(name)\n".utf8).write(to: URL(fileURLWithPath: folder + "/.lanyard"))
    }

    @Test func renameListsThePinsThatStillNameTheOldSlot() async throws {
        let h = CLIHarness()
        try h.addSlot("alice", active: true)
        try h.addSlot("carol")
        let home = h.environment["HOME"]!
        try pin("alice", in: h.workingDirectory + "/project")
        try pin("alice", in: home + "/src/github/repo")
        try pin("carol", in: home + "/src/other")
        try pin("alice", in: home + "/.cache/hidden")  // hidden folders are not walked
        try pin("alice", in: home + "/src/app/node_modules/x")  // nor dependency trees
        let r = await h.run("rename", "alice", "bob")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "Renamed alice to bob.\n")
        let warnings = r.stderr.split(separator: "\n").map(String.init)
        #expect(
            warnings
                == [
                    "lanyard: warning: \(home)/src/github/repo/.lanyard still names alice: "
                        + "run `lanyard pin bob` in that folder",
                    "lanyard: warning: \(h.workingDirectory)/project/.lanyard still names alice: "
                        + "run `lanyard pin bob` in that folder",
                ].sorted()
        )
        try pin("bob", in: h.workingDirectory + "/project")
        let json = await h.run("rename", "bob", "dave", "--json")
        #expect(json.json["stale_pins"] as? [String] == ["\(h.workingDirectory)/project/.lanyard"])
    }

    @Test func theRenameSeesThePinInEffectAboveTheWorkingDirectory() async throws {
        let h = CLIHarness()
        try h.addSlot("alice", active: true)
        try pin("alice", in: h.root)  // above the working directory, outside HOME
        let r = await h.run("rename", "alice", "bob")
        #expect(
            r.stderr == "lanyard: warning: \(h.root)/.lanyard still names alice: run `lanyard pin bob` in that folder\n"
        )
    }

    @Test func doctorReportsPinsThatNameNoSlot() async throws {
        let h = CLIHarness()
        try h.addSlot("alice", active: true)
        let home = h.environment["HOME"]!
        try pin("alice", in: home + "/fine")
        // (The in-memory store answers for every backend, so doctor has other things to say.)
        let fine = await h.run("doctor", "--json")
        #expect((fine.json["stray_pins"] as? [Any])?.isEmpty == true)
        #expect(!fine.stdout.contains(".lanyard"))

        try pin("ghost", in: home + "/src/repo")
        try pin("", in: h.workingDirectory + "/empty")
        let report = await h.run("doctor", "--json")
        #expect(report.status == 1)
        let stray = report.json["stray_pins"] as? [[String: String]]
        #expect(
            stray
                == [
                    ["path": "\(home)/src/repo/.lanyard", "name": "ghost"],
                    ["path": "\(h.workingDirectory)/empty/.lanyard", "name": ""],
                ].sorted { $0["path"]! < $1["path"]! }
        )
        let human = await h.run("doctor")
        #expect(human.status == 1)
        #expect(
            human.stdout.contains(
                "problem: \(home)/src/repo/.lanyard names ghost, which is no slot: "
                    + "run `lanyard pin SLOT` or `lanyard unpin` in that folder"
            )
        )
        #expect(human.stdout.contains("problem: \(h.workingDirectory)/empty/.lanyard names no slot at all"))
    }

    @Test func theScanStopsAtItsFolderBudgetAndSaysSo() async throws {
        let h = CLIHarness()
        let base = h.root + "/wide"
        for i in 0..<30 {
            try FileManager.default.createDirectory(atPath: "\(base)/d\(i)", withIntermediateDirectories: true)
        }
        try pin("deep", in: base + "/d29/x")
        let cut = PinFile.scan(under: [base], maxFolders: 10)
        #expect(cut.stoppedEarly)
        let whole = PinFile.scan(under: [base])
        #expect(!whole.stoppedEarly)
        #expect(whole.pins.map(\.name) == ["deep"])
    }
}
