import Foundation
import LanyardAuth
import LanyardSupport

#if DEBUG  // Testing is not there in the release build (make release builds every target)
import Testing
#endif

/// What a browser saw at the end of a visit.
package struct BrowserVisit: Sendable {
    package let status: Int
    package let body: String
    /// The `Location` of a redirect not followed.
    package let location: String?
}

/// Plays the browser with curl (a real HTTP client): GETs `url`, following redirects (to the
/// sign-in's listener) unless `follow` is false. Waits on a thread of its own: curl waits for the
/// sign-in in this same process, whose answer needs a thread of the blocking executor (the slot is
/// stored before the browser hears of success); on the pool, parallel tests' waits could take
/// every thread and hold each other until curl's own time limit.
package func browse(_ url: String, follow: Bool = true) async throws -> BrowserVisit {
    let arguments =
        ["-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code} %{redirect_url}"] + (follow ? ["-L"] : []) + [url]
    let (status, out, err) = try await BlockingExecutor.shared.run(.ownThread) {
        try runProcess("/usr/bin/curl", arguments)
    }
    guard status == 0, let split = out.lastIndex(of: "\n") else {
        throw ServerError("curl \(url) failed (\(status)): \(err)")
    }
    let last = out[out.index(after: split)...].split(separator: " ", maxSplits: 1)
    return BrowserVisit(
        status: Int(last.first ?? "") ?? 0,
        body: String(out[..<split]),
        location: last.count > 1 && !last[1].isEmpty ? String(last[1]) : nil
    )
}

/// A port on 127.0.0.1 that was free a moment ago, for a sign-in's listener in a test (registered
/// with the emulator as `http://localhost:PORT/auth/callback`). Below Linux's ephemeral range
/// (32768 and up) and never handed out twice by this process, so no `bind(0)` or outgoing
/// connection of a test running beside it takes the port between its uses.
package func freeLoopbackPort() throws -> UInt16 {
    for _ in 0..<500 {
        let port = nextTestPort.withLock { next in
            defer { next = next >= 29_999 ? 20_000 : next + 1 }
            return next
        }
        if let listener = try? CallbackListener.bind(ports: [port]) {
            listener.close()
            return port
        }
    }
    throw ServerError("no free port on 127.0.0.1 from 20000 to 29999")
}

#if DEBUG  // eventually, like Testing, is not there in the release build
/// Waits until `ports` can be bound on 127.0.0.1 again (a sign-in's listener released them). Not
/// at once: a child process that tests running beside this one start (the emulators, curl) holds a
/// copy of every descriptor from its fork to its exec.
package func waitUntilFree(_ ports: [UInt16]) async throws {
    try await eventually("ports \(ports) are free again") {
        guard let listener = try? CallbackListener.bind(ports: ports) else { return "still taken" }
        listener.close()
        return "free"
    } until: {
        $0 == "free"
    }
}
#endif

private let nextTestPort = Locked(UInt16.random(in: 20_000...29_000))

/// The emulator's arguments that register `ports`' ChatGPT-style redirects besides 1455 and 1457.
package func registeredRedirects(_ ports: [UInt16]) -> [String] {
    ports.flatMap { ["--redirect-uri", "http://localhost:\($0)/auth/callback"] }
}
