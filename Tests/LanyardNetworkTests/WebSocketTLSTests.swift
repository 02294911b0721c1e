import Foundation
import LanyardTestSupport
import Testing

@testable import LanyardNetwork

/// `wss://` through libwebsockets' TLS (OpenSSL): the emulator served over HTTPS with certificates
/// made for the test. The handshake reaching the server's HTTP answer (401: no token) shows the TLS
/// session was set up and verified; a certificate that is not trusted, or is for another name, is
/// refused before any header is sent.
@Suite struct WebSocketTLSTests {

    static func events(_ server: OAuthTestServer, caFile: String?) async -> [WebSocketChannel.Event] {
        var url = URLComponents(
            url: server.baseURL.appendingPathComponent("/backend-api/codex/responses"),
            resolvingAgainstBaseURL: false
        )!
        url.scheme = "wss"
        let options = WebSocketChannel.Options(
            url: url.url!,
            headers: [("Authorization", "Bearer not-a-token")],
            firstMessage: Array("{}".utf8),
            maxMessageBytes: 1 << 20,
            timeout: 10,
            caFile: caFile
        )
        var events: [WebSocketChannel.Event] = []
        for await event in WebSocketChannel.open(options) { events.append(event) }
        return events
    }

    /// The server's count of upgrade requests, read with curl (the test's own URLSession does not
    /// trust the test certificate; `-k` is for this read only).
    static func upgradeAttempts(_ server: OAuthTestServer) throws -> Int {
        let (_, out, _) = try runProcess(
            "/usr/bin/curl",
            ["-sk", server.baseURL.appendingPathComponent("/_test/stats").absoluteString]
        )
        let stats = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any]
        return (stats?["stream"] as? [String: Any])?["ws_upgrade_attempts"] as? Int ?? -1
    }

    @Test func aTrustedCertificateCarriesTheHandshake() async throws {
        let home = TestHome()  // removes the folder when released, after the test
        let (cert, key) = try selfSignedCertificate("IP:127.0.0.1", in: home.root)
        let server = try OAuthTestServer(.chatgptEmulator, arguments: ["--tls-cert", cert, "--tls-key", key])
        #expect(server.baseURL.scheme == "https")
        let events = await Self.events(server, caFile: cert)
        guard case .refused(let status)? = events.first else {
            Issue.record("got \(events)")
            return
        }
        #expect(status == 401)
        #expect(try Self.upgradeAttempts(server) == 1)
        withExtendedLifetime(home) {}
    }

    @Test(arguments: ["untrusted", "wrong name"])
    func anUnverifiedCertificateIsRefusedBeforeAnyHeaderIsSent(_ problem: String) async throws {
        let home = TestHome()
        let (cert, key) = try selfSignedCertificate(
            problem == "wrong name" ? "DNS:wrong.example" : "IP:127.0.0.1",
            in: home.root
        )
        let server = try OAuthTestServer(.chatgptEmulator, arguments: ["--tls-cert", cert, "--tls-key", key])
        let events = await Self.events(server, caFile: problem == "wrong name" ? cert : nil)
        guard case .failed(let reason)? = events.first else {
            Issue.record("got \(events)")
            return
        }
        #expect(!reason.isEmpty)
        #expect(try Self.upgradeAttempts(server) == 0)
        withExtendedLifetime(home) {}
    }
}
