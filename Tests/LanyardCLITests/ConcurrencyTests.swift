import Foundation
import Testing
@testable import LanyardCore
@testable import LanyardStore

@Suite struct RegistryConcurrencyTests {
    /// Two real processes each switch 200 times while this process keeps reading: every read parses
    /// and the final file is whole.
    @Test func twoProcessesSwitchingAtOnceNeverTearTheFile() throws {
        let h = CLIHarness()
        for i in 0..<4 { try h.addSlot("s\(i)") }
        let binary = lanyardBinary()
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build lanyard first (\(binary))")
        let script = "for i in $(seq 1 100); do \"$0\" switch $1 >/dev/null || exit 1; \"$0\" switch $2 >/dev/null || exit 1; done"
        func spawn(_ a: String, _ b: String) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/sh")
            p.arguments = ["-c", script, binary, a, b]
            p.environment = h.environment
            try p.run()
            return p
        }
        let first = try spawn("s0", "s1"), second = try spawn("s2", "s3")
        var reads = 0
        while first.isRunning || second.isRunning {
            let doc = try h.registry.load()  // throws if it ever sees a torn file
            #expect(doc.slots.count == 4)
            reads += 1
        }
        first.waitUntilExit()
        second.waitUntilExit()
        #expect(first.terminationStatus == 0 && second.terminationStatus == 0)
        let final = try h.registry.load()
        #expect(["s1", "s3"].contains(final.active?.name ?? ""))
        #expect(final.slots.count == 4)
        #expect(reads > 0)
    }
}
