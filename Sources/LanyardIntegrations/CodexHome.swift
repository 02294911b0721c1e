import FoundationEssentials
import LanyardStore
import LanyardSupport

/// Reading and writing a Codex home.
package struct CodexHome: Sendable {
    package let directory: String
    package var authPath: String { directory + "/auth.json" }

    package init(directory: String) { self.directory = directory }

    /// `--codex-home`, else `$CODEX_HOME`, else `~/.codex`.
    package init(explicit: String?, environment: [String: String]) {
        if let explicit { directory = explicit } else if let env = environment["CODEX_HOME"], !env.isEmpty { directory = env } else {
            directory = (environment["HOME"] ?? PathText.passwordDatabaseHome()) + "/.codex"
        }
    }

    /// The live auth.json, or nil when there is none.
    package func read() throws -> CodexAuthFile? {
        guard let data = try SecureFiles.read(authPath) else { return nil }
        return try CodexAuthFile.parse(data, path: authPath)
    }

    /// Writes auth.json atomically at 0600. Codex requires its home to exist already.
    package func write(_ file: CodexAuthFile) throws {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory else {
            throw IntegrationError.unsupported("Codex home \(directory) does not exist (create it, or run Codex once)")
        }
        try SecureFiles.atomicWrite(Data(file.json.serialized(pretty: true).utf8), to: authPath)
    }

    /// Codex processes running now (they keep the account they started with until restarted).
    package static func runningProcesses() -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let comm = FileManager.default.contents(atPath: "/proc/\(pid)/comm") else { return false }
            let name = String(decoding: comm, as: UTF8.self).trimmingWhitespaceAndNewlines()
            return name == "codex" || name.hasPrefix("codex-")
        }
    }
}
