import Foundation
import LanyardTestSupport
import Testing

/// The binaries link only GLib; libsecret, GIO and GObject are loaded on first use (they cost
/// about 1.2 ms at every start). These tests watch the dynamic loader (LD_DEBUG=files) of real
/// `lanyard` processes.
@Suite struct LazyLibsecretTests {
    static let lazy = ["libsecret-1.so", "libgio-2.0.so", "libgobject-2.0.so"]

    @Test func commandsThatNeverTouchTheKeyringDoNotLoadLibsecret() throws {
        let home = TestHome()
        for args in [["version"], ["list"], ["which"], ["completion", "bash"]] {
            let (_, loaded) = try loadedLibraries(home, args[0], contentsOf: Array(args.dropFirst()))
            #expect(loaded.contains { $0.hasPrefix("libglib-2.0.so") }, "\(args): GLib is linked: \(loaded.sorted())")
            for library in Self.lazy {
                #expect(!loaded.contains { $0.hasPrefix(library) }, "\(args) loaded \(library)")
            }
        }
    }

    @Test func theKeyringBackendLoadsItOnFirstUse() throws {
        try requireTestKeyring()
        let home = TestHome()
        let (output, loaded) = try loadedLibraries(home, "doctor", contentsOf: ["--json"])
        #expect(output.stdout.contains("\"reachable\": true"), "\(output.stdout)")
        for library in Self.lazy {
            #expect(loaded.contains { $0.hasPrefix(library) }, "doctor did not load \(library): \(loaded.sorted())")
        }
    }
}

extension LazyLibsecretTests {
    /// The libraries the dynamic loader opened for `lanyard COMMAND REST`.
    func loadedLibraries(_ home: TestHome, _ command: String, contentsOf rest: [String]) throws -> (TestHome.Output, Set<String>) {
        let output = try home.run([command] + rest, extraEnvironment: ["LD_DEBUG": "files"])
        var loaded = Set<String>()
        for line in output.stderr.split(separator: "\n") where line.contains("file=") {
            guard let start = line.range(of: "file=")?.upperBound else { continue }
            loaded.insert(String(line[start...].prefix { !$0.isWhitespace && $0 != "[" && $0 != ";" }))
        }
        return (output, loaded)
    }
}
