import Foundation
import LanyardCore
import LanyardSupport
import Testing

func makeJWT(_ payload: String, header: String = #"{"alg":"none"}"#) -> String {
    Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(Data(payload.utf8)) + ".sig"
}

@Suite struct JWTTests {
    @Test func decodesAValidToken() throws {
        let claims = try JWTClaims(token: makeJWT(#"{"exp":1800000000,"iat":1799990000,"email":"a@b.c","sub":"u1"}"#))
        #expect(claims.expiresAt == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(claims.issuedAt == Date(timeIntervalSince1970: 1_799_990_000))
        #expect(claims.email == "a@b.c")
        #expect(claims.subject == "u1")
    }

    @Test func acceptsAnEmptySignature() throws {
        let token =
            Base64URL.encode(Data(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Data(#"{"a":1}"#.utf8)) + "."
        #expect(try JWTClaims(token: token).payload["a"] == .number(1))
    }

    @Test func rejectsTwoParts() {
        #expect(throws: JWTError.wrongPartCount(2)) { try JWTClaims(token: "abc.def") }
        #expect(throws: JWTError.wrongPartCount(1)) { try JWTClaims(token: "opaque-token") }
    }

    @Test func rejectsBadBase64() {
        #expect(throws: JWTError.invalidBase64(part: "payload")) { try JWTClaims(token: "eyJhIjoxfQ.@@@.x") }
        #expect(throws: JWTError.invalidBase64(part: "payload")) { try JWTClaims(token: "eyJhIjoxfQ..x") }
        #expect(throws: JWTError.invalidBase64(part: "header")) {
            try JWTClaims(token: "a+b." + Base64URL.encode(Data(#"{"a":1}"#.utf8)) + ".x")
        }
    }

    @Test func rejectsNonJSONAndNonObjectPayloads() {
        #expect(throws: JWTError.payloadNotJSON) { try JWTClaims(token: makeJWT("not json")) }
        #expect(throws: JWTError.payloadNotObject) { try JWTClaims(token: makeJWT("[1,2]")) }
        #expect(throws: JWTError.payloadNotObject) { try JWTClaims(token: makeJWT("\"s\"")) }
    }

    @Test func errorsNeverContainTheToken() {
        let token = makeJWT("not json-SECRETMARKER")
        do {
            _ = try JWTClaims(token: token)
            Issue.record("should throw")
        } catch {
            #expect(!error.localizedDescription.contains("SECRETMARKER"))
            #expect(!error.localizedDescription.contains(token))
        }
    }

    @Test func readsAudienceAsStringOrArray() throws {
        #expect(try JWTClaims(token: makeJWT(#"{"aud":"one"}"#)).audience == ["one"])
        #expect(try JWTClaims(token: makeJWT(#"{"aud":["one","two"]}"#)).audience == ["one", "two"])
        #expect(try JWTClaims(token: makeJWT(#"{}"#)).audience == [])
        #expect(try JWTClaims(token: makeJWT(#"{"aud":5}"#)).audience == [])
    }

    @Test func readsOpenAIClaims() throws {
        let payload = """
            {"email":"alice@example.com","https://api.openai.com/auth":{"chatgpt_plan_type":"ProLite",
             "chatgpt_user_id":"user-1","user_id":"legacy","chatgpt_account_id":"acct-9",\
            "chatgpt_account_is_fedramp":true}}
            """
        let info = AccountInfo(openAIClaims: try JWTClaims(token: makeJWT(payload)))
        #expect(
            info
                == AccountInfo(
                    email: "alice@example.com",
                    userID: "user-1",
                    accountID: "acct-9",
                    plan: Plan(rawValue: "ProLite"),
                    isFedRAMPAccount: true
                )
        )
        #expect(info.plan?.displayName == "Pro Lite")
    }

    @Test func fallsBackToUserIDAndDefaultsFedRAMPToFalse() throws {
        let info = AccountInfo(
            openAIClaims: try JWTClaims(token: makeJWT(#"{"https://api.openai.com/auth":{"user_id":"legacy"}}"#))
        )
        #expect(info.userID == "legacy")
        #expect(info.isFedRAMPAccount == false)
        #expect(info.plan == nil)
    }

    @Test func followsDottedClaimPaths() throws {
        let claims = try JWTClaims(token: makeJWT(#"{"org.example":{"plan":"team"},"a":{"b":{"c":"deep"}}}"#))
        #expect(claims.value(atPath: "org.example.plan")?.string == "team")
        #expect(claims.value(atPath: "a.b.c")?.string == "deep")
        #expect(claims.value(atPath: "a.x") == nil)
        let info = AccountInfo(oidcClaims: claims, planClaim: "org.example.plan")
        #expect(info.plan?.kind == .team)
    }
}
