import Foundation
import LanyardAuth
import LanyardCore
import LanyardSupport
import Testing

@testable import LanyardIntegrations

/// The protocols other programs speak to Lanyard (Docker, Kubernetes, netrc), parsed without a
/// process in between; the commands that speak them are tested through the binary in
/// LanyardCLITests.
@Suite struct CredentialHelperParsingTests {
    @Test func dockerServerURLsMapToHostKeys() throws {
        #expect(try DockerCredential.host(ofServerURL: "ghcr.io") == "ghcr.io")
        #expect(try DockerCredential.host(ofServerURL: "https://GHCR.io/v2/") == "ghcr.io")
        #expect(try DockerCredential.host(ofServerURL: "https://index.docker.io/v1/") == "index.docker.io")
        #expect(try DockerCredential.host(ofServerURL: "registry.local:5000") == "registry.local:5000")
        #expect(try DockerCredential.host(ofServerURL: "https://ghcr.io:443") == "ghcr.io")
        #expect(throws: DockerCredentialInputError.self) { try DockerCredential.host(ofServerURL: "") }
        #expect(throws: DockerCredentialInputError.self) { try DockerCredential.host(ofServerURL: "ftp://ghcr.io") }
        #expect(throws: DockerCredentialInputError.self) { try DockerCredential.host(ofServerURL: "ghcr.io\u{1B}[2J") }
        #expect(throws: DockerCredentialInputError.self) { try DockerCredential.checkStoreInput(Data("[]".utf8)) }
    }

    @Test func netrcRefusesFieldsItCannotHold() throws {
        #expect(try Netrc.line(host: "h", login: "u", password: "t0k") == "machine h login u password t0k")
        #expect(throws: Netrc.FieldError(field: "token")) { try Netrc.line(host: "h", login: "u", password: "a b") }
        #expect(throws: Netrc.FieldError(field: "login")) { try Netrc.line(host: "h", login: "", password: "t") }
        #expect(throws: Netrc.FieldError(field: "token")) {
            try Netrc.line(host: "h", login: "u", password: "t\nmachine evil")
        }
    }

    @Test func kubeExecInfoChoosesTheVersion() throws {
        #expect(try KubeExecCredential.apiVersion(execInfo: nil) == KubeExecCredential.v1)
        #expect(
            try KubeExecCredential.apiVersion(execInfo: #"{"apiVersion":"client.authentication.k8s.io/v1beta1"}"#)
                == KubeExecCredential.v1beta1
        )
        #expect(throws: KubeExecInfoError.self) { try KubeExecCredential.apiVersion(execInfo: "not json") }
        #expect(throws: KubeExecInfoError.self) {
            try KubeExecCredential.apiVersion(execInfo: #"{"kind":"ExecCredential"}"#)
        }
        let rendered = try JSONValue.parse(
            Data(
                KubeExecCredential.render(
                    apiVersion: KubeExecCredential.v1,
                    token: "t",
                    expiresAt: Date(timeIntervalSince1970: 1_800_000_000)
                ).utf8
            )
        )
        #expect(rendered["status"]?["expirationTimestamp"]?.string == "2027-01-15T08:00:00Z")
    }

    @Test func aTokenWithoutExpiryOrRefreshTokenIsNeverDue() {
        let rule = RefreshRule(lead: 300, maxAge: 60)
        let now = Date()
        let staticToken = Credential(
            provider: "github",
            tokens: TokenSet(accessToken: "gho_x"),
            lastRefresh: nil,
            account: AccountInfo()
        )
        #expect(!rule.needsRefresh(staticToken, now: now))
        var refreshable = staticToken
        refreshable.tokens.refreshToken = "r"
        #expect(rule.needsRefresh(refreshable, now: now))  // unknown expiry, never refreshed: refresh to learn it
        var expiring = staticToken
        expiring.tokens.expiresAt = now + 10
        #expect(rule.needsRefresh(expiring, now: now))  // due; without a refresh token it asks for a new sign-in
    }
}
