import Foundation
import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardTestSupport
import Testing

/// An answer longer than the transport's limit is refused while it arrives: the transport keeps
/// at most the limit, fails with `.tooLarge` once the body passes it, and stops the transfer then
/// and there. It used to gather the whole body (URLSession), then refuse it: a 1.5 GB usage answer
/// took lanyard-net to 2.99 GB.
@Suite struct ResponseSizeLimitTests {
    /// What the server wrote of its streamed bodies, once every one of them has ended (the
    /// fixture's generator ends when a write fails on the closed connection). Waits for that: the
    /// server still writing means the transfer was not stopped.
    func writtenOnceEnded(_ server: OAuthTestServer, streams: Int = 1) async throws -> Int {
        let streamed = try await eventually("the server stops writing its body (the transfer was stopped)") {
            try await server.get("/_test/faults/streamed")
        } until: {
            ($0["ended"] as? Int ?? 0) >= streams
        }
        return streamed["bytes"] as? Int ?? -1
    }

    func usageRequest(_ server: OAuthTestServer) -> HTTPRequest {
        HTTPRequest(url: server.baseURL.appendingPathComponent("/backend-api/wham/usage"))
    }

    /// Far more than the limit, and more than any socket buffers hold.
    static let bodySize = 256 << 20
    /// What the server may have written when the transfer stopped: the 1 MiB limit plus both
    /// sockets' buffers (a few MiB each on loopback), with room to spare.
    static let writtenAtMost = 32 << 20

    /// 256 MiB as fast as loopback takes it, without a Content-Length (only reading can tell):
    /// the request fails once the body passes 1 MiB, and the server can write little more.
    @Test func aBodyPastTheLimitStopsTheTransferWhileItArrives() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook(
            "/_test/fault",
            ["endpoint": "usage", "type": "huge", "stream": true, "length": false, "size": Self.bodySize]
        )
        let transport = URLSessionTransport(timeout: 30, maxBodyBytes: 1 << 20)
        await #expect(throws: TransportError(.tooLarge, "127.0.0.1 sent more than 1048576 bytes; the limit is 1048576"))
        {
            _ = try await transport.send(usageRequest(server))
        }
        let written = try await writtenOnceEnded(server)
        #expect(written > 1 << 20 && written < Self.writtenAtMost, "the server wrote \(written) bytes")

        // The control: a body of exactly the limit, streamed the same way, is read whole.
        try await server.hook(
            "/_test/fault",
            ["endpoint": "usage", "type": "huge", "stream": true, "length": false, "size": 1 << 20]
        )
        let answer = try await transport.send(usageRequest(server))
        #expect(answer.status == 200 && answer.body.count == 1 << 20)
        #expect(try await writtenOnceEnded(server, streams: 2) == written + (1 << 20))
    }

    /// A Content-Length over the limit is refused from the head, before the body is read.
    @Test func anAnnouncedLengthPastTheLimitIsRefusedAtOnce() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook(
            "/_test/fault",
            ["endpoint": "usage", "type": "huge", "stream": true, "size": Self.bodySize]
        )
        let transport = URLSessionTransport(timeout: 30, maxBodyBytes: 1 << 20)
        await #expect(
            throws: TransportError(.tooLarge, "127.0.0.1 announced \(Self.bodySize) bytes; the limit is 1048576")
        ) {
            _ = try await transport.send(usageRequest(server))
        }
        let written = try await writtenOnceEnded(server)
        #expect(written < Self.writtenAtMost, "the server wrote \(written) bytes")
    }

    /// The reported case, end to end: `lanyard usage` (lanyard-net) against a usage endpoint
    /// answering 1 GiB fails as a network failure naming the limit, the process never holds more
    /// than a sliver of the answer (its peak resident size, as the parent that waits for it
    /// sees it: about 40 MiB for any `lanyard usage`), and the server could write little of it.
    @Test func lanyardUsageNeverHoldsAHugeAnswer() async throws {
        let env = try await EmulatorHome()
        try await env.signIn("work", email: "w@example.com")
        let size = 1 << 30
        try await env.server.hook(
            "/_test/fault",
            ["endpoint": "usage", "type": "huge", "stream": true, "length": false, "size": size]
        )
        let rssFile = env.home.root + "/maxrss"
        let python = repositoryRoot.appendingPathComponent(".venv/bin/python").path
        let measured = [
            python, "-c",
            """
            import os, resource, subprocess, sys
            status = subprocess.call(sys.argv[1:])
            open(os.environ["MAXRSS_FILE"], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
            sys.exit(status)
            """,
        ]
        let out = try env.home.run(
            ["usage", "work", "--json"],
            extraEnvironment: ["MAXRSS_FILE": rssFile],
            launcher: measured
        )
        #expect(out.status == 6, "\(out.stdout) \(out.stderr)")
        let slots =
            (try JSONSerialization.jsonObject(with: Data(out.stdout.utf8)) as? [String: Any])?["slots"]
            as? [[String: Any]]
        let error = slots?.first?["error"] as? [String: Any]
        #expect(error?["code"] as? String == "network_failure", "\(out.stdout)")
        #expect((error?["message"] as? String)?.contains("the limit is 1048576") == true, "\(out.stdout)")
        let peakKiB = try #require(Int(try String(contentsOfFile: rssFile, encoding: .utf8)))
        #expect(peakKiB > 0 && peakKiB < 100 << 10, "lanyard-net peaked at \(peakKiB) KiB")
        let written = try await writtenOnceEnded(env.server)
        #expect(written < Self.writtenAtMost, "the server wrote \(written) bytes")
    }
}
