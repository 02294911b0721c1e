import Foundation
import LanyardTestSupport
import Testing

/// A program that imports LanyardKit alone must be able to name every type LanyardKit's API hands
/// it, and every type in the public members of those types. This reads the symbol graphs of
/// LanyardKit and the modules below it (swift-symbolgraph-extract on the debug build) and follows
/// every type a public signature names: it must come from the standard library, Foundation, a
/// module LanyardKit re-exports whole, or be re-exported by name in Sources/LanyardKit/Exports.swift.
@Suite struct PublicSurfaceTests {
    static let libraryModules = [
        "LanyardKit", "LanyardSupport", "LanyardCore", "LanyardStore", "LanyardAuth", "LanyardFleet",
        "LanyardIntegrations", "LanyardNetwork",
    ]
    static let toolchainModules: Set<String> = [
        "Swift", "Foundation", "FoundationEssentials", "FoundationNetworking", "_Concurrency",
        "Observation", "Synchronization", "Dispatch",
    ]

    /// One symbol of a graph: its path for messages and the type USRs its declaration names.
    struct Symbol {
        let module: String
        let topLevelType: String
        let path: String
        let types: [(spelling: String, usr: String)]
        /// The declaration as the symbol graph spells it (`func token(slot: Slot) async throws -> String`).
        var declaration = ""
    }

    /// The public API of the library products (LanyardKit with what it re-exports, and Age), one
    /// line a symbol, must equal Tests/RepositoryChecks/PublicAPI.txt: a new or changed public symbol
    /// shows up as a reviewed diff of that file. `LANYARD_UPDATE_PUBLIC_API=1` rewrites it.
    /// Of the modules below LanyardKit only what Exports.swift re-exports is listed: a module
    /// re-exported whole, or a type re-exported by name with its members (wherever they are
    /// declared); the rest of their `public` symbols are not part of any product's surface.
    @Test func thePublicAPIIsTheCheckedInList() throws {
        let (symbols, _) = try Self.symbolGraphs(modules: Self.libraryModules + ["Age"])
        let (wholeModules, namedTypes) = try Self.exports()
        let namedTypeNames = Set(namedTypes.map { String($0.split(separator: ".").last ?? "") })
        let surface = symbols.values.filter {
            $0.module == "Age" || wholeModules.contains($0.module) || namedTypeNames.contains($0.topLevelType)
        }
        let lines = Set(surface.map { "\($0.module) \($0.path): \($0.declaration)" }).sorted()
        let file = repositoryRoot.appendingPathComponent("Tests/RepositoryChecks/PublicAPI.txt")
        let text = lines.joined(separator: "\n") + "\n"
        if ProcessInfo.processInfo.environment["LANYARD_UPDATE_PUBLIC_API"] == "1" {
            try text.write(to: file, atomically: true, encoding: .utf8)
        }
        let reviewed = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        let expected = Set(reviewed.split(separator: "\n").map(String.init))
        for line in lines where !expected.contains(line) {
            Issue.record("not in PublicAPI.txt (new or changed public API): \(line)")
        }
        for line in expected.subtracting(lines).sorted() {
            Issue.record("in PublicAPI.txt but no longer public: \(line)")
        }
        #expect(lines.count > 100)
    }

    @Test func everyTypeInLanyardKitsAPICanBeNamedByItsUsers() throws {
        let (symbols, members) = try Self.symbolGraphs()
        let (wholeModules, namedTypes) = try Self.exports()
        // LanyardCore is re-exported by name too: its helpers are not part of LanyardKit's surface.
        #expect(
            !wholeModules.contains("LanyardCore") && namedTypes.count >= 10,
            "Exports.swift: \(wholeModules) \(namedTypes)"
        )

        /// The module and top-level type of a library symbol (nil for the toolchain's).
        func owner(_ usr: String) -> (module: String, type: String)? {
            symbols[usr].map { ($0.module, $0.topLevelType) }
        }
        func nameable(_ usr: String) -> Bool {
            guard let (module, type) = owner(usr) else { return true }
            return Self.toolchainModules.contains(module) || wholeModules.contains(module)
                || namedTypes.contains("\(module).\(type)")
        }

        // Start from LanyardKit's own symbols and those of the types it re-exports by name (a program
        // catches StoreError without any signature naming it); follow into the members of every
        // package type they name.
        var queue = symbols.filter {
            $0.key.hasPrefix("s:10LanyardKit") || namedTypes.contains("\($0.value.module).\($0.value.topLevelType)")
        }.map(\.key)
        var followed = Set<String>()
        var problems: Set<String> = []
        var checked = 0
        while let usr = queue.popLast() {
            guard let symbol = symbols[usr] else { continue }
            for type in symbol.types {
                checked += 1
                if !nameable(type.usr), let (module, name) = owner(type.usr) {
                    problems.insert(
                        "\(symbol.path) uses \(module).\(name), which `import LanyardKit` does not make visible"
                    )
                }
                guard let (module, _) = owner(type.usr), Self.libraryModules.contains(module),
                    followed.insert(type.usr).inserted
                else { continue }
                queue += members[type.usr] ?? []
            }
        }
        for problem in problems.sorted() { Issue.record(Comment(rawValue: problem)) }
        #expect(checked > 100 && followed.count > 15, "checked \(checked) type references in \(followed.count) types")
    }

    /// What Sources/LanyardKit/Exports.swift re-exports: the modules it re-exports whole (and
    /// LanyardKit itself), and the types it re-exports by name (`Module.Type`).
    static func exports() throws -> (wholeModules: Set<String>, namedTypes: Set<String>) {
        let file = repositoryRoot.appendingPathComponent("Sources/LanyardKit/Exports.swift")
        let exports = try String(contentsOf: file, encoding: .utf8)
        let wholeModules = Set(exports.matches(of: /@_exported import ([A-Za-z]+)\n/).map { String($0.output.1) })
            .union(["LanyardKit"])
        let namedTypes = Set(
            exports.matches(of: /@_exported import (?:struct|enum|class|protocol) ([A-Za-z]+\.[A-Za-z]+)/)
                .map { String($0.output.1) }
        )
        return (wholeModules, namedTypes)
    }

    /// Every public symbol of the library modules by USR, and each type's members.
    static func symbolGraphs(
        modules: [String] = libraryModules
    ) throws -> (symbols: [String: Symbol], members: [String: [String]]) {
        let build = buildFolder
        // One folder per call: the suite's tests run side by side and each removes its own.
        let output = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lanyard-symbols-\(getpid())-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: output) }
        var flags = [
            "-target", "x86_64-unknown-linux-gnu", "-I", build.appendingPathComponent("Modules").path,
            "-minimum-access-level", "public", "-output-dir", output.path,
        ]
        // C modules: module maps in Sources/C*/ and the ones SwiftPM generates for C targets.
        let sources = repositoryRoot.appendingPathComponent("Sources")
        for name in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() where name.hasPrefix("C")
        {
            flags += ["-I", sources.appendingPathComponent(name).path]
        }
        for name in try FileManager.default.contentsOfDirectory(atPath: build.path) where name.hasSuffix(".build") {
            let map = build.appendingPathComponent(name).appendingPathComponent("module.modulemap").path
            if FileManager.default.fileExists(atPath: map) { flags += ["-Xcc", "-fmodule-map-file=" + map] }
        }
        let (_, glib, _) = try runProcess("/usr/bin/pkg-config", ["--cflags-only-I", "glib-2.0"])
        for include in glib.split(separator: " ").map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) })
        where !include.isEmpty {
            flags += ["-Xcc", include]
        }
        let extractor = try Self.toolPath("swift-symbolgraph-extract")
        for module in modules {
            let (status, _, err) = try runProcess(extractor, ["-module-name", module] + flags)
            guard status == 0 else {
                throw SurfaceError(description: "swift-symbolgraph-extract \(module) failed: \(err)")
            }
        }
        var symbols: [String: Symbol] = [:]
        var members: [String: [String]] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: output.path)
        where file.hasSuffix(".symbols.json") {
            let data = try Data(contentsOf: output.appendingPathComponent(file))
            guard let graph = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { continue }
            // `M.symbols.json`, or `M@Other.symbols.json` for M's extensions of Other's types.
            let module = String(file.prefix { $0 != "." && $0 != "@" })
            for case let symbol as [String: Any] in graph["symbols"] as? [Any] ?? [] {
                guard let usr = (symbol["identifier"] as? [String: Any])?["precise"] as? String else { continue }
                let components = symbol["pathComponents"] as? [String] ?? []
                let path = components.joined(separator: ".")
                let fragments = symbol["declarationFragments"] as? [[String: Any]] ?? []
                let types = fragments.compactMap { fragment -> (String, String)? in
                    guard fragment["kind"] as? String == "typeIdentifier",
                        let usr = fragment["preciseIdentifier"] as? String
                    else { return nil }
                    return (fragment["spelling"] as? String ?? "?", usr)
                }
                // An extension's members keep the extended type's module: the USR's own graph wins.
                if symbols[usr] == nil || !file.contains("@") {
                    symbols[usr] = Symbol(
                        module: module,
                        topLevelType: components.first ?? "",
                        path: path,
                        types: types,
                        declaration: fragments.map { $0["spelling"] as? String ?? "" }.joined()
                    )
                }
            }
            for case let relation as [String: Any] in graph["relationships"] as? [Any] ?? [] {
                guard relation["kind"] as? String == "memberOf", let source = relation["source"] as? String,
                    let target = relation["target"] as? String
                else { continue }
                members[target, default: []].append(source)
            }
        }
        return (symbols, members)
    }

    static func toolPath(_ name: String) throws -> String {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") + ["/opt/swift/usr/bin"] {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw SurfaceError(description: "\(name) is not on PATH (it ships with the Swift toolchain)")
    }
}

struct SurfaceError: Error, CustomStringConvertible {
    let description: String
}
