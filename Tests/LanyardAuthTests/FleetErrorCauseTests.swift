import Foundation
import LanyardCore
import LanyardFleet
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardAuth

/// A fleet error that reports an etcd error keeps it (``LanyardError/underlying``), through every
/// form the refresh path gives it, so `--json` says `etcd_tls` rather than only "unavailable".
@Suite struct FleetErrorCauseTests {
    static let endpoint = "https://127.0.0.1:2379"
    static let tls = EtcdError.tls(endpoint: endpoint, detail: "unable to get local issuer certificate")
    static let unavailable = FleetError.unavailable(
        fleet: "home",
        endpoints: [endpoint],
        detail: tls.userFacingDescription,
        cause: ErrorCause(tls)
    )

    /// A shared slot whose token has expired, with the fleet unreachable over TLS: the error that
    /// says it cannot be refreshed still leads to etcd's.
    @Test func anExpiredSharedTokenKeepsTheEtcdErrorBehindIt() throws {
        let home = TestHome()
        let manager = AccountManager(
            paths: Paths(environment: home.environment),
            config: LanyardConfig(),
            openStore: { _, _ in MemoryStore() },
            transport: URLSessionTransport()
        )
        let tokens = TokenSet(accessToken: "AT", refreshToken: "RT", expiresAt: Date() - 60)
        let expired = Credential(provider: "openai", tokens: tokens, lastRefresh: nil, account: AccountInfo())
        let error = try #require(throws: FleetError.self) {
            try manager.servedWithoutFleet(try Slot("work"), expired, Self.unavailable)
        }
        guard case .expiredWhileUnavailable = error else {
            Issue.record("\(error)")
            return
        }
        #expect(error.underlying as? EtcdError == Self.tls)
        #expect((error.underlying as? any LanyardError)?.code == .etcdTLS)
    }

    /// The chain as a whole: fleet → etcd, which ends there.
    @Test func theChainEndsAtEtcdsError() {
        var codes: [ErrorCode] = []
        var next: (any Error)? = Self.unavailable
        while let error = next as? any LanyardError {
            codes.append(error.code)
            next = error.underlying
        }
        #expect(codes == [.fleetUnavailable, .etcdTLS])
    }
}
