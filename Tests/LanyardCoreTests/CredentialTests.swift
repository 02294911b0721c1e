import Foundation
import Testing
@testable import LanyardCore

@Suite struct CredentialTests {
    let sample = Credential(
        provider: "openai",
        tokens: TokenSet(accessToken: "AT-SECRET", refreshToken: "RT-SECRET", idToken: "ID-SECRET",
                         expiresAt: Date(timeIntervalSince1970: 1_800_000_000)),
        lastRefresh: Date(timeIntervalSince1970: 1_799_990_000),
        account: AccountInfo(email: "a@example.com", accountID: "acct", plan: Plan(rawValue: "plus")))

    @Test func roundTripsThroughTheDocumentedLayout() throws {
        let data = try sample.jsonData()
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(#""version":1"#))
        #expect(text.contains(#""expires_at":"2027-01-15T08:00:00Z""#))
        #expect(try Credential.decode(data, source: "test") == sample)
    }

    @Test func rejectsANewerVersionWithAClearError() throws {
        var object = try JSONSerialization.jsonObject(with: sample.jsonData()) as! [String: Any]
        object["version"] = 9
        let data = try JSONSerialization.data(withJSONObject: object)
        #expect(throws: DecodeError.self) { try Credential.decode(data, source: "item work") }
        do { _ = try Credential.decode(data, source: "item work") } catch {
            #expect(error.localizedDescription.contains("version 9"))
            #expect(error.localizedDescription.hasPrefix("item work:"))
        }
    }

    @Test func namesTheMissingFieldAndNeverQuotesTokens() throws {
        let data = Data(#"{"version":1,"provider":"openai","tokens":{"refresh_token":"RT-SECRET"}}"#.utf8)
        do { _ = try Credential.decode(data, source: "item work"); Issue.record("should throw") } catch {
            #expect(error.detail == "missing field .tokens.access_token")
            #expect(!error.localizedDescription.contains("RT-SECRET"))
        }
        #expect(throws: DecodeError(source: "x", detail: "not valid JSON")) { try Credential.decode(Data("{".utf8), source: "x") }
    }

    @Test func descriptionsRedactTokens() {
        for text in [sample.description, "\(sample.tokens)", String(reflecting: sample.tokens)] {
            #expect(!text.contains("SECRET"), "\(text)")
        }
    }
}

@Suite struct ServerErrorDetailTests {
    @Test func readsEveryKnownShape() {
        #expect(ServerErrorDetail(body: Data(#"{"error":{"code":"refresh_token_reused","message":"m"}}"#.utf8)).code == "refresh_token_reused")
        #expect(ServerErrorDetail(body: Data(#"{"error":"invalid_grant","error_description":"d"}"#.utf8)) ==
                ServerErrorDetail(code: "invalid_grant", message: "d"))
        #expect(ServerErrorDetail(body: Data(#"{"code":"X","message":"m","details":{"f":"bad"}}"#.utf8)) ==
                ServerErrorDetail(code: "X", message: "m", details: ["f": "bad"]))
        #expect(ServerErrorDetail(body: Data(#"{"error":{"type":"usage_limit_reached"}}"#.utf8)).code == "usage_limit_reached")
    }

    @Test func unreadableBodiesGiveUNKNOWN() {
        #expect(ServerErrorDetail(body: Data("<html>".utf8)).code == "UNKNOWN")
        #expect(ServerErrorDetail(body: Data()).code == "UNKNOWN")
        #expect(ServerErrorDetail(body: Data("[1]".utf8)).code == "UNKNOWN")
    }

    @Test func everyErrorHasACodeAndAStatus() {
        let errors: [any LanyardError] = [
            StoreError.locked(backend: "k", hint: "h"), StoreError.notFound(slot: "w"),
            ClientError.reauthenticationRequired(slot: "w", reason: "r"), ClientError.usageLimitReached(UsageLimit()),
            AuthError.cancelledSignIn, AuthError.tokenExchangeFailed(status: 401, detail: ServerErrorDetail()),
        ]
        #expect(errors.map(\.exitStatus) == [.storeUnavailable, .notSignedIn, .reauthenticationRequired, .usageLimit, .cancelled,
                                             .reauthenticationRequired])
        #expect(errors.allSatisfy { !$0.code.isEmpty && !($0.errorDescription ?? "").isEmpty })
        #expect(AuthError.tokenExchangeFailed(status: 500, detail: ServerErrorDetail()).requiresReauthentication == false)
        #expect(AuthError.tokenExchangeFailed(status: 403, detail: ServerErrorDetail()).requiresReauthentication)
    }
}
