import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import Testing

/// The registry is decoded one slot at a time (`decodeStreaming`), so the whole file is never
/// one JSON tree. It must accept and reject exactly what the whole-document decode does, with the
/// same error text, or a damaged registry would be reported (and moved aside) differently.
@Suite struct RegistryStreamingTests {
    static let record =
        #"{"account": {"email": "a@example.com", "plan": "pro"}, "backend": "file", "provider": "#
        + #""openai", "state": {"state": "signed-in", "expires_at": "2027-01-01T00:00:00Z"}}"#

    static let inputs: [String] = [
        #"{"active": "a", "slots": {"a": \#(record), "b": \#(record)}, "version": 1}"#,
        #"{"slots": {}, "version": 1}"#,
        #"{"version": 1, "slots": {"a": \#(record)}}"#,
        #"  {"slots": {"a": \#(record)}, "version": 1, "extra": [1, {"x": null}]}  "#,
        // Shape errors, in the order init(json:) checks them.
        #"{"slots": {"a": {"provider": 7}}, "version": 2}"#,
        #"{"slots": {"a": {"provider": 7}}, "version": 1}"#,
        #"{"slots": {"Bad Name": \#(record)}, "version": 1}"#,
        #"{"slots": [], "version": 1}"#,
        #"{"slots": {"a": \#(record)}}"#,
        #"{"version": 1}"#,
        #"{"active": "z", "slots": {"a": \#(record)}, "version": 1}"#,
        #"{"active": 3, "slots": {"a": \#(record)}, "version": 1}"#,
        #"{"slots": {"a": 5}, "version": 1}"#,
        #"[1, 2]"#, #""text""#, "null",
        // Records the direct reader (SlotRecordReader) takes, and each thing it leaves to the
        // long way: both must give the same record or the same error.
        #"{"slots": {"a": {"provider": "openai", "backend": "secret-service", "state": "#
            + #"{"state": "signed-out"}, "last_refresh": "2027-01-01T00:00:00Z", "created_at": "#
            + #""2026-01-01T00:00:00Z", "last_error": "refresh_token_reused", "account": {"email": null, "#
            + #""user_id": "u", "account_id": "acc", "plan": "plus", "fedramp": true}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "account": null, "#
            + #""state": {"state": "reauthentication-required"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": {"state": "signed-in", "#
            + #""expires_at": null}, "last_refresh": "2027-01-01T00:00:00.750Z"}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "#
            + #""state": {"state": "failed", "message": "x"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": {"state": "awaiting-device-code", "#
            + #""user_code": "AB-CD", "verification_url": "https://x.test/d"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": {"state": "#
            + #""signed-out", "expires_at": "2027-01-01T00:00:00Z"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "#
            + #"{"state": "signed-in"}, "future": {"x": [1]}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": {"state": "#
            + #""signed-in"}, "account": {"email": "e", "nickname": "n"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "#
            + #"{"state": "signed-in"}, "account": "me"}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "#
            + #"{"state": "signed-in"}, "account": {"fedramp": "yes"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "tape", "state": {"state": "signed-in"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": null, "backend": "file", "state": {"state": "signed-in"}}}, "version": 1}"#,
        #"{"slots": {"a": {"backend": "file", "state": {"state": "signed-in"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": {"state": "dreaming"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "#
            + #"{"state": "signed-in", "expires_at": "tomorrow"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "#
            + #"{"state": "signed-in"}, "last_error": 5}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "provider": "x", "backend": "#
            + #""file", "state": {"state": "signed-in"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "#
            + #"{"state": "signed-in", "state": "signed-out"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": {"state": "#
            + #""signed-in"}, "account": {"plan": "pro", "plan": "plus"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "#
            + #"{"state": "signed-in"}, "x": 1, "x": 2}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "op\u0065nai", "backend": "#
            + #""file", "state": {"state": "signed-in"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "#
            + #"{"state": "signed-in"}, "account": {"email": "a\qb"}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "#
            + #"{"state": "signed-in"}, "account": {"fedramp": tru}}}, "version": 1}"#,
        #"{"slots": {"a": {"provider": "openai", "backend": "file", "state": "signed-in"}}, "version": 1}"#,
        // Syntax errors, wherever they are.
        #"{"slots": {"a": \#(record), "a": \#(record)}, "version": 1}"#,
        #"{"slots": {"a": \#(record)}, "slots": {}, "version": 1}"#,
        #"{"slots": {"a": \#(record)}, "version": 1} x"#,
        #"{"slots": {"a": \#(record), }, "version": 1}"#,
        #"{"slots": {"a": {"provider": 7}, "b": }, "version": 1}"#,
        #"{"slots": {"a": \#(record)}, "version": 1"#,
        "\u{FEFF}{}", "", "   ", "{",
        String(repeating: "[", count: 300),
    ]

    @Test(arguments: inputs)
    func acceptsAndRejectsExactlyAsTheWholeDecode(_ text: String) {
        let data = Data(text.utf8)
        let whole = Result { () throws(DecodeError) -> RegistryDocument in
            try RegistryDocument.decode(data, source: "registry.json")
        }
        let streamed = Result { () throws(DecodeError) -> RegistryDocument in
            try RegistryDocument.decodeStreaming(data, source: "registry.json")
        }
        switch (whole, streamed) {
        case (.success(let a), .success(let b)): #expect(a == b)
        case (.failure(let a), .failure(let b)): #expect(a == b, "whole: \(a.detail) | streamed: \(b.detail)")
        default: Issue.record("whole: \(whole) | streamed: \(streamed)")
        }
    }

    @Test func aLargeRegistryRoundTrips() throws {
        var document = RegistryDocument()
        for n in 0..<2000 {
            document.slots[try Slot("slot-\(n)")] = SlotRecord(
                provider: "openai",
                backend: .file,
                account: AccountInfo(email: "u\(n)@example.com"),
                state: .signedOut
            )
        }
        document.active = try Slot("slot-7")
        let data = document.jsonData(pretty: true)
        #expect(try RegistryDocument.decodeStreaming(data, source: "r") == document)
        #expect(try RegistryDocument.decodeStreaming(data, source: "r") == RegistryDocument.decode(data, source: "r"))
    }
}
