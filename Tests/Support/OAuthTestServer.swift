import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The repository root (for fixtures, the venv and built binaries).
package let repositoryRoot: URL = {
    var url = URL(fileURLWithPath: #filePath)
    while url.lastPathComponent != "Tests" { url.deleteLastPathComponent() }
    return url.deletingLastPathComponent()
}()

/// One of the OAuth test servers in Tests/Fixtures/oauth, started on 127.0.0.1 with port 0 and
/// stopped when released. Starting fails loudly (never skips) when the server cannot start.
package final class OAuthTestServer: @unchecked Sendable {
    package enum Kind: String, Sendable {
        case deviceServer = "device_server.py"
        case chatgptEmulator = "chatgpt_emulator.py"
    }

    package let baseURL: URL
    private let process: Process

    package init(_ kind: Kind, arguments: [String] = []) throws {
        let python = repositoryRoot.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            let failure = ServerError("no test venv at \(python): run `make check` (scripts/venv.sh)")
            #if DEBUG
            try TestServices.missing("needs the OAuth test servers' venv (scripts/venv.sh)", failure: failure)
            #else
            throw failure
            #endif
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments =
            [
                repositoryRoot.appendingPathComponent("Tests/Fixtures/oauth/" + kind.rawValue).path,
                "--port", "0", "--exit-with-parent", "--log-level", "WARNING",
            ] + arguments
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.standardError
        try p.run()
        // The ready line is the first line on stdout.
        var line = Data()
        while let byte = try out.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data([0x0a]) {
            line += byte
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("READY "), let url = URL(string: String(text.dropFirst(6))) else {
            p.terminate()
            throw ServerError("\(kind.rawValue) did not start (first line: \"\(text)\")")
        }
        baseURL = url
        process = p
    }

    deinit {
        // SIGKILL: the servers keep nothing worth flushing, and a graceful stop can wait on
        // keep-alive connections. Foundation reaps the child.
        kill(process.processIdentifier, SIGKILL)
    }

    /// Calls a test hook (`/_test/...`) with a JSON body and returns the JSON answer.
    @discardableResult
    package func hook(_ path: String, _ body: [String: Any] = [:]) async throws -> [String: Any] {
        var request = URLRequest(url: baseURL.appendingPathComponent(path))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        return try await send(request)
    }

    /// GETs a JSON document from the server.
    package func get(_ path: String) async throws -> [String: Any] {
        try await send(URLRequest(url: baseURL.appendingPathComponent(path)))
    }

    /// `/_test/stats`.
    package func stats() async throws -> [String: Any] { try await get("/_test/stats") }

    /// A counter from `/_test/stats` (dotted path for nested ones).
    package func stat(_ path: String) async throws -> Int {
        var value: Any? = try await stats()
        for key in path.split(separator: ".") { value = (value as? [String: Any])?[String(key)] }
        return (value as? Int) ?? (value as? NSNumber)?.intValue ?? 0
    }

    private func send(_ request: URLRequest) async throws -> [String: Any] {
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            throw ServerError("\(request.url?.path ?? "") answered \(status): \(String(decoding: data, as: UTF8.self))")
        }
        return (try JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }
}

package struct ServerError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
