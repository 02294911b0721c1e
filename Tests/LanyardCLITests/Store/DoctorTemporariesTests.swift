import Foundation
import LanyardCLI
import LanyardStore
import LanyardTestSupport
import Testing

@Suite struct DoctorTemporariesTests {
    /// A write killed between GLib's mkstemp and its rename leaves `registry.json.XXXXXX` behind
    /// (the crash soak counts them): doctor names it, --repair removes it and nothing else.
    @Test func doctorReportsAndRepairRemovesTemporariesOfKilledWrites() async throws {
        let h = CLIHarness()
        try h.registry.updateInTest { $0.active = nil }
        let data = h.paths.dataDirectory
        for name in ["registry.json.Ab3xY9", "store.age.q1W2e3", "registry.json.keep-me"] {
            try Data("partial".utf8).write(to: URL(fileURLWithPath: data + "/" + name))
        }
        let report = await h.run("doctor", "--json")
        #expect(report.status == 1)
        #expect(
            report.json["problems"] as? [String] == [
                "interrupted writes left temporary files: registry.json.Ab3xY9, store.age.q1W2e3"
            ]
        )
        let human = await h.run("doctor")
        #expect(
            human.stdout.contains(
                "problem: interrupted writes left temporary files: registry.json.Ab3xY9, store.age.q1W2e3"
            )
        )
        #expect(human.stdout.contains("lanyard doctor --repair"))

        let repair = await h.run("doctor", "--repair", "--json")
        #expect(repair.status == 0, "\(repair.stdout) \(repair.stderr)")
        #expect(
            repair.json["repaired"] as? [String] == [
                "removed registry.json.Ab3xY9, left by an interrupted write",
                "removed store.age.q1W2e3, left by an interrupted write",
            ]
        )
        #expect((repair.json["problems"] as? [String])?.isEmpty == true)
        #expect(!FileManager.default.fileExists(atPath: data + "/registry.json.Ab3xY9"))
        #expect(FileManager.default.fileExists(atPath: data + "/registry.json.keep-me"))
        #expect(await h.run("doctor").status == 0)
    }
}
