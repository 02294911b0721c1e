import Foundation
import LanyardAuth
import LanyardCore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardNetwork

/// No request outlives the transport's hard limit, whatever URLSession does with its own timeouts,
/// and a cancelled caller gets its answer at once.
@Suite struct TransportDeadlineTests {
    func usercodeRequest(_ server: OAuthTestServer) -> HTTPRequest {
        .json(
            server.baseURL.appendingPathComponent("api/accounts/deviceauth/usercode"),
            .object(["client_id": .string(ProviderConfig.openAI.clientID)])
        )
    }

    /// URLSession's own timeout here is 30 s, so it would wait the server's 3 s out and answer;
    /// the hard limit of 0.5 s ends the request first. The control: the same delay under the
    /// default limit is answered.
    @Test func theHardLimitEndsARequestURLSessionWouldStillWaitFor() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook("/_test/fault", ["endpoint": "usercode", "type": "delay", "seconds": 3, "count": 2])
        let bounded = URLSessionTransport(timeout: 30, maxBodyBytes: 1 << 20, hardLimit: 0.5)
        await #expect(throws: TransportError(.timedOut, "127.0.0.1 did not answer in time")) {
            _ = try await bounded.send(usercodeRequest(server))
        }
        let response = try await URLSessionTransport(timeout: 30).send(usercodeRequest(server))
        #expect(response.status == 200)
    }

    /// Cancelling the calling task ends the request with `.cancelled`, before the server answers
    /// (in 2 minutes: never before the cancel, however loaded the machine).
    @Test func cancellingTheCallerEndsTheRequest() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook("/_test/fault", ["endpoint": "usercode", "type": "delay", "seconds": 120, "count": 1])
        let transport = URLSessionTransport(timeout: 30)
        let request = usercodeRequest(server)
        let call = Task { try await transport.send(request) }
        while try await server.stat("requests.usercode") < 1 { await Task.yield() }
        call.cancel()
        let result = await call.result
        #expect(throws: TransportError(.cancelled, "request cancelled")) { try result.get() }
    }
}
