import Foundation
import LanyardAuth
import LanyardSupport

/// What a browser saw at the end of a visit.
package struct BrowserVisit: Sendable {
    package let status: Int
    package let body: String
    /// The `Location` of a redirect not followed.
    package let location: String?
}

/// Plays the browser with curl (a real HTTP client): GETs `url`, following redirects (to the
/// sign-in's listener) unless `follow` is false. Runs on the blocking executor.
package func browse(_ url: String, follow: Bool = true) async throws -> BrowserVisit {
    let arguments = ["-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code} %{redirect_url}"] + (follow ? ["-L"] : []) + [url]
    let (status, out, err) = try await BlockingExecutor.shared.run { try runProcess("/usr/bin/curl", arguments) }
    guard status == 0, let split = out.lastIndex(of: "\n") else { throw ServerError("curl \(url) failed (\(status)): \(err)") }
    let last = out[out.index(after: split)...].split(separator: " ", maxSplits: 1)
    return BrowserVisit(status: Int(last.first ?? "") ?? 0, body: String(out[..<split]),
                        location: last.count > 1 && !last[1].isEmpty ? String(last[1]) : nil)
}

/// A port on 127.0.0.1 that was free a moment ago (bound, read, released), for a sign-in's
/// listener in a test; registered with the emulator as `http://localhost:PORT/auth/callback`.
package func freeLoopbackPort() throws -> UInt16 {
    let listener = try CallbackListener.bind(ports: [0])
    defer { listener.close() }
    return listener.port
}

/// The emulator's arguments that register `ports`' ChatGPT-style redirects besides 1455 and 1457.
package func registeredRedirects(_ ports: [UInt16]) -> [String] {
    ports.flatMap { ["--redirect-uri", "http://localhost:\($0)/auth/callback"] }
}
