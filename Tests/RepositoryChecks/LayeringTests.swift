import Foundation
import LanyardTestSupport
import Testing

/// The layering rules of docs/architecture.md, checked on the source tree: command files only
/// parse, call the library and render; every module imports only what Package.swift declares.
@Suite struct LayeringTests {
    /// Source text per file under `folder` (relative to the repository root).
    static func swiftFiles(under folder: String) throws -> [(path: String, text: String)] {
        let root = repositoryRoot.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(atPath: root.path) else {
            throw LayeringError(description: "cannot list \(folder)")
        }
        return try walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted().map { relative in
            (folder + "/" + relative, try String(contentsOf: root.appendingPathComponent(relative), encoding: .utf8))
        }
    }

    /// Store and registry writes belong to the library (LanyardAuth, LanyardIntegrations), where the
    /// order of writes and the recovery paths are decided once for the CLI and LanyardKit alike.
    @Test func commandFilesHoldNoStoreOrRegistryWrites() throws {
        let writes = [
            "registry.update", ".put(", ".delete(", "PinFile.write", "PinFile.remove", "Migration(",
            "restoreRecoveryFiles", "RecoveryFile(",
        ]
        let files = try Self.swiftFiles(under: "Sources/LanyardCLI/Commands")
        #expect(files.count >= 10, "found \(files.count) command files")
        for (path, text) in files {
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                for write in writes where line.contains(write) {
                    Issue.record(
                        "\(path):\(number + 1) writes a store or the registry (\(write)); move it into the library"
                    )
                }
            }
        }
    }

    /// Modules the toolchain provides (any target may import them).
    static let toolchainModules: Set<String> = [
        "Foundation", "FoundationNetworking", "FoundationEssentials", "Dispatch",
        "Observation", "Synchronization", "Glibc", "Testing", "XCTest",
    ]

    /// Every `import M` of a package module names a dependency the target declares (SwiftPM lets a
    /// target import its dependencies' dependencies, which hides layering mistakes).
    @Test func importsMatchDeclaredDependencies() throws {
        let targets = try Self.manifestTargets()
        let packageModules = Set(targets.map(\.name))
        #expect(
            packageModules.isSuperset(of: ["LanyardCore", "LanyardKit", "LanyardCLI", "lanyard"]),
            "parsed \(packageModules.sorted())"
        )
        let importPattern = try Regex(
            #"^(?:@_exported |@testable )?import "#
                + #"(?:(?:struct|enum|class|protocol|func|typealias) )?([A-Za-z_][A-Za-z0-9_]*)"#
        )
        .anchorsMatchLineEndings()
        var checked = 0
        for target in targets {
            guard FileManager.default.fileExists(atPath: repositoryRoot.appendingPathComponent(target.folder).path)
            else { continue }
            for (path, text) in try Self.swiftFiles(under: target.folder) {
                for match in text.matches(of: importPattern) {
                    let module = String(match.output[1].substring ?? "")
                    checked += 1
                    if Self.toolchainModules.contains(module) || module == target.name { continue }
                    if !packageModules.contains(module) {
                        Issue.record(
                            "\(path) imports \(module), which is neither a package module nor a toolchain module"
                        )
                    } else if !target.dependencies.contains(module) {
                        Issue.record(
                            "\(path) imports \(module), but \(target.name) does not declare it in Package.swift"
                        )
                    }
                }
            }
        }
        #expect(checked > 100, "checked \(checked) imports")
    }

    /// The modules linked into `lanyard` import FoundationEssentials, never full Foundation: one
    /// use of it links swift-corelibs-Foundation with CoreFoundation's start-up and ICU's data
    /// (docs/performance.md). The library `LanyardKit`, `LanyardNetwork` and `lanyard-net` may.
    @Test func theCommandLineBinaryLinksNoFullFoundation() throws {
        let modules = [
            "Age", "LanyardSupport", "LanyardCore", "LanyardGLib", "LanyardStore", "LanyardAuth", "LanyardIntegrations",
            "LanyardDesktop", "LanyardAgent", "LanyardCLI", "lanyard",
        ]
        let fullFoundation = try Regex(
            #"^\s*(@[A-Za-z_]+\s+)*import\s+(Foundation|FoundationNetworking|FoundationXML|CoreFoundation)\s*$"#
        )
        .anchorsMatchLineEndings()
        var checked = 0
        for module in modules {
            for (path, text) in try Self.swiftFiles(under: "Sources/\(module)") {
                checked += 1
                if text.contains(fullFoundation) {
                    Issue.record("\(path) imports full Foundation; use FoundationEssentials")
                }
            }
        }
        #expect(checked > 60, "checked \(checked) files")
        // The pattern itself: full Foundation is caught, FoundationEssentials is not.
        #expect("import Glibc\n@preconcurrency import Foundation\n".contains(fullFoundation))
        #expect(!"import FoundationEssentials\nimport Glibc\n".contains(fullFoundation))
    }

    /// The test kit (Tests/Support) is a plain target, so `make release` (and with it `make
    /// install` and `make deb`) compiles it, where Swift Testing is not there: each of its files
    /// uses Testing only inside `#if DEBUG`. A file that did not broke the release build, which
    /// only `make check`'s package step, late, would have shown.
    @Test func theTestKitUsesSwiftTestingOnlyInDebugBuilds() throws {
        let files = try Self.swiftFiles(under: "Tests/Support")
        for (path, text) in files {
            var depth = 0
            var debugDepth: Int?
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                let code = line.trimmingCharacters(in: .whitespaces)
                if code.hasPrefix("#if") {
                    depth += 1
                    if debugDepth == nil && code.hasPrefix("#if DEBUG") { debugDepth = depth }
                } else if code.hasPrefix("#endif") {
                    if debugDepth == depth { debugDepth = nil }
                    depth -= 1
                } else if code == "import Testing" && debugDepth == nil {
                    Issue.record("\(path) imports Testing outside #if DEBUG")
                }
            }
        }
        #expect(files.count > 10, "checked \(files.count) files")
    }

    /// docs/architecture.md's dependency table is the manifest's, for every non-test target (of the
    /// C targets, those of the lazy-loading scheme: CLazyLoading and the ones built on it).
    @Test func architectureDocumentMatchesTheManifest() throws {
        let manifest = try Self.manifestTargets().filter {
            !$0.folder.hasPrefix("Tests/") && !$0.name.hasPrefix("C")
                || $0.name == "CLazyLoading" || $0.dependencies.contains("CLazyLoading")
        }
        let document = try String(
            contentsOf: repositoryRoot.appendingPathComponent("docs/architecture.md"),
            encoding: .utf8
        )
        var table: [String: Set<String>] = [:]
        for match in document.matches(of: /\n\| ([A-Za-z][A-Za-z-]*) \| ([A-Za-z, -]*?) ?\|/)
        where match.output.1 != "module" {
            table[String(match.output.1)] = Set(
                match.output.2.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                    !$0.isEmpty
                }
            )
        }
        for target in manifest {
            #expect(
                table[target.name] == target.dependencies,
                """
                docs/architecture.md says \(target.name) depends on \(table[target.name]?.sorted() ?? []), \
                Package.swift says \(target.dependencies.sorted())
                """
            )
        }
        #expect(
            Set(table.keys) == Set(manifest.map(\.name)),
            "modules in the table: \(table.keys.sorted()); in the manifest: \(manifest.map(\.name).sorted())"
        )
    }

    /// The targets of Package.swift: name, declared dependencies and source folder.
    static func manifestTargets() throws -> [(name: String, dependencies: Set<String>, folder: String)] {
        let manifest = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        // Whitespace between the arguments may include line breaks (swift-format puts one argument
        // per line once a target's declaration is longer than a line).
        let targetPattern = try Regex(
            #"\.(target|executableTarget|testTarget|systemLibrary)\(\s*name: "#
                + #""([^"]+)"(?:,\s*dependencies: \[([^\]]*)\])?(?:[^)]*?path: "([^"]+)")?"#
        )
        var targets: [(name: String, dependencies: Set<String>, folder: String)] = []
        for match in manifest.matches(of: targetPattern) {
            let name = String(match.output[2].substring ?? "")
            let dependencies = (match.output[3].substring.map(String.init) ?? "")
                .split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \"\n")) }.filter {
                    !$0.isEmpty
                }
            let folder =
                match.output[4].substring.map(String.init)
                ?? (match.output[1].substring == "testTarget" ? "Tests/\(name)" : "Sources/\(name)")
            targets.append((name, Set(dependencies), folder))
        }
        return targets
    }
}

struct LayeringError: Error, CustomStringConvertible {
    let description: String
}
