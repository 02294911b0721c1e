// GLib in one place: only LanyardGLib and the libsecret wrapper may see GLib's C API;
// the desktop's D-Bus objects (CStatusNotifier) are seen only by their wrappers in LanyardDesktop/Bus.

import Foundation
import LanyardTestSupport
import Testing

@Suite struct GLibBoundaryTests {
    /// The only Swift sources allowed to import the C modules or name GLib's C types.
    static let allowed = ["Sources/LanyardGLib/", "Sources/LanyardStore/SecretServiceLibsecret.swift"]
    /// The only Swift sources allowed to import CStatusNotifier (which hides GLib behind its header).
    static let desktopBus = "Sources/LanyardDesktop/Bus/"
    /// C type names that must not appear anywhere else, not even in comments.
    static let forbiddenNames = ["GError", "gboolean", "gchar", "GKeyFile", "GVariant", "GDBusConnection"]
    static let forbiddenImport = try! NSRegularExpression(
        pattern: #"^\s*(@[A-Za-z_]+\s+)*import\s+(CLibsecret|CLazyLibraries|CStatusNotifier)\b"#,
        options: .anchorsMatchLines
    )

    /// Every way `text` breaks the rule, as `line N: what`.
    static func violations(in text: String, desktopBus: Bool = false) -> [String] {
        var found: [String] = []
        for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(line)
            if let match = forbiddenImport.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)),
                let module = Range(match.range(at: 2), in: line)
            {
                if !(desktopBus && line[module] == "CStatusNotifier") {
                    found.append("line \(n + 1): imports \(line[module])")
                }
            }
            for name in forbiddenNames where line.contains(name) {
                found.append("line \(n + 1): mentions \(name)")
            }
        }
        return found
    }

    @Test func theRuleCatchesWhatItShould() {
        #expect(Self.violations(in: "import Foundation\nimport CLibsecret\n") == ["line 2: imports CLibsecret"])
        #expect(Self.violations(in: "@preconcurrency import CLazyLibraries") == ["line 1: imports CLazyLibraries"])
        #expect(Self.violations(in: "var e: UnsafeMutablePointer<GError>?") == ["line 1: mentions GError"])
        #expect(Self.violations(in: "import LanyardGLib\nlet file = KeyFile()\n").isEmpty)
        #expect(Self.violations(in: "import CStatusNotifier\n") == ["line 1: imports CStatusNotifier"])
        #expect(Self.violations(in: "import CStatusNotifier\n", desktopBus: true).isEmpty)
        #expect(Self.violations(in: "import CLazyLibraries\n", desktopBus: true) == ["line 1: imports CLazyLibraries"])
    }

    @Test func onlyLanyardGLibAndTheLibsecretWrapperTouchGLib() throws {
        let root = repositoryRoot.appendingPathComponent("Sources").path
        let files = try FileManager.default.subpathsOfDirectory(atPath: root)
            .filter { $0.hasSuffix(".swift") }
            .map { "Sources/" + $0 }
            .sorted()
        // A wrong root would make the test pass on nothing.
        #expect(files.count > 50, "found only \(files.count) Swift files under \(root)")
        #expect(files.contains { $0.hasPrefix("Sources/LanyardGLib/") }, "Sources/LanyardGLib/ has moved")
        #expect(files.contains(Self.allowed[1]), "\(Self.allowed[1]) has moved")

        for file in files where !Self.allowed.contains(where: { file.hasPrefix($0) }) {
            let text = try String(contentsOfFile: repositoryRoot.path + "/" + file, encoding: .utf8)
            let problems = Self.violations(in: text, desktopBus: file.hasPrefix(Self.desktopBus))
            #expect(problems.isEmpty, "\(file) must leave GLib to LanyardGLib: \(problems.joined(separator: "; "))")
        }
    }
}
