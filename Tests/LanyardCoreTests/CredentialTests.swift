import Foundation
import LanyardCore
import LanyardSupport
import Testing

@Suite struct CredentialTests {
    let sample = Credential(
        provider: "openai",
        tokens: TokenSet(
            accessToken: "AT-SECRET",
            refreshToken: "RT-SECRET",
            idToken: "ID-SECRET",
            expiresAt: Date(timeIntervalSince1970: 1_800_000_000)
        ),
        lastRefresh: Date(timeIntervalSince1970: 1_799_990_000),
        account: AccountInfo(email: "a@example.com", accountID: "acct", plan: Plan(rawValue: "plus"))
    )

    @Test func roundTripsThroughTheDocumentedLayout() throws {
        let data = sample.jsonData()
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(#""version":1"#))
        #expect(text.contains(#""expires_at":"2027-01-15T08:00:00Z""#))
        #expect(try Credential.decode(data, source: "test") == sample)
    }

    /// Fuzz/seeds/store/regression-fractional-seconds: a fractional `last_refresh` was kept on
    /// reading but written back in whole seconds, so a credential changed across a round trip.
    @Test func fractionalSecondsRoundTrip() throws {
        let seed = try Data(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../Fuzz/seeds/store/regression-fractional-seconds")
        )
        guard case .object(let slots)? = try JSONValue.parse(seed)["slots"], let work = slots["work"] else {
            Issue.record("the seed has no slot")
            return
        }
        let credential = try Credential(json: try JSONFields(work))
        #expect(credential.lastRefresh == Date(timeIntervalSince1970: 1_800_000_006))
        #expect(try Credential.decode(credential.jsonData(), source: "test") == credential)
    }

    @Test func rejectsANewerVersionWithAClearError() throws {
        guard case .object(var object) = sample.json else {
            Issue.record("not an object")
            return
        }
        object["version"] = .number(9)
        let data = Data(JSONValue.object(object).serialized().utf8)
        #expect(throws: DecodeError.self) { try Credential.decode(data, source: "item work") }
        do { _ = try Credential.decode(data, source: "item work") } catch {
            #expect(error.localizedDescription == "item work: .version is 9, newer than this Lanyard reads (1)")
            #expect(error.localizedDescription.hasPrefix("item work:"))
        }
    }

    @Test func namesTheMissingFieldAndNeverQuotesTokens() throws {
        let data = Data(#"{"version":1,"provider":"openai","tokens":{"refresh_token":"RT-SECRET"}}"#.utf8)
        do {
            _ = try Credential.decode(data, source: "item work")
            Issue.record("should throw")
        } catch {
            #expect(error.detail == ".tokens.access_token is missing")
            #expect(!error.localizedDescription.contains("RT-SECRET"))
        }
        #expect(throws: DecodeError(source: "x", detail: "not valid JSON (line 1, column 2: expected a string key)")) {
            try Credential.decode(Data("{".utf8), source: "x")
        }
        #expect(throws: DecodeError(source: "x", detail: ".tokens.expires_at is not an RFC 3339 date")) {
            try Credential.decode(
                Data(#"{"version":1,"provider":"p","tokens":{"access_token":"a","expires_at":"soon"}}"#.utf8),
                source: "x"
            )
        }
    }

    /// The fields this session added: a boot-clock reading and spent-token fingerprints that are
    /// not what Lanyard writes are refused by name.
    @Test func rejectsMalformedBootReadingsAndFingerprints() {
        func decode(_ extra: String) throws(DecodeError) {
            let head = #"{"version":1,"provider":"p","tokens":{"access_token":"a"},"#
            _ = try Credential.decode(Data((head + extra + "}").utf8), source: "x")
        }
        #expect(throws: DecodeError(source: "x", detail: ".last_refresh_boot is not a boot id and a number of seconds"))
        {
            try decode(#""last_refresh_boot":"not-hex 12""#)
        }
        #expect(throws: DecodeError(source: "x", detail: ".spent_refresh_tokens is not a list of strings")) {
            try decode(#""spent_refresh_tokens":[1]"#)
        }
        #expect(
            throws: DecodeError(
                source: "x",
                detail: #".spent_refresh_tokens holds "rt-1", not a 32-digit hex fingerprint"#
            )
        ) {
            try decode(#""spent_refresh_tokens":["rt-1"]"#)
        }
        let five = (0..<5).map { _ in "\"" + String(repeating: "a", count: 32) + "\"" }.joined(separator: ",")
        #expect(throws: DecodeError(source: "x", detail: ".spent_refresh_tokens holds more than 4 fingerprints")) {
            try decode(#""spent_refresh_tokens":["# + five + "]")
        }
    }

    @Test func descriptionsRedactTokens() {
        for text in [sample.description, "\(sample.tokens)", String(reflecting: sample.tokens)] {
            #expect(!text.contains("SECRET"), "\(text)")
        }
    }
}

@Suite struct ServerErrorDetailTests {
    @Test func readsEveryKnownShape() {
        #expect(
            ServerErrorDetail(body: Data(#"{"error":{"code":"refresh_token_reused","message":"m"}}"#.utf8)).code
                == "refresh_token_reused"
        )
        #expect(
            ServerErrorDetail(body: Data(#"{"error":"invalid_grant","error_description":"d"}"#.utf8))
                == ServerErrorDetail(code: "invalid_grant", message: "d")
        )
        #expect(
            ServerErrorDetail(body: Data(#"{"code":"X","message":"m","details":{"f":"bad"}}"#.utf8))
                == ServerErrorDetail(code: "X", message: "m", details: ["f": "bad"])
        )
        #expect(
            ServerErrorDetail(body: Data(#"{"error":{"type":"usage_limit_reached"}}"#.utf8)).code
                == "usage_limit_reached"
        )
    }

    @Test func unreadableBodiesGiveUNKNOWN() {
        #expect(ServerErrorDetail(body: Data("<html>".utf8)).code == "UNKNOWN")
        #expect(ServerErrorDetail(body: Data()).code == "UNKNOWN")
        #expect(ServerErrorDetail(body: Data("[1]".utf8)).code == "UNKNOWN")
    }
}
