import Foundation
import Testing
@testable import LanyardCore
@testable import LanyardStore

/// The registry is decoded one slot at a time (`decodeStreaming`), so the whole file is never
/// one JSON tree. It must accept and reject exactly what the whole-document decode does, with the
/// same error text, or a damaged registry would be reported (and moved aside) differently.
@Suite struct RegistryStreamingTests {
    static let record = #"{"account": {"email": "a@example.com", "plan": "pro"}, "backend": "file", "provider": "openai", "state": {"state": "signed-in", "expires_at": "2027-01-01T00:00:00Z"}}"#

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
        let whole = Result { () throws(DecodeError) -> RegistryDocument in try RegistryDocument.decode(data, source: "registry.json") }
        let streamed = Result { () throws(DecodeError) -> RegistryDocument in try RegistryDocument.decodeStreaming(data, source: "registry.json") }
        switch (whole, streamed) {
        case (.success(let a), .success(let b)): #expect(a == b)
        case (.failure(let a), .failure(let b)): #expect(a == b, "whole: \(a.detail) | streamed: \(b.detail)")
        default: Issue.record("whole: \(whole) | streamed: \(streamed)")
        }
    }

    @Test func aLargeRegistryRoundTrips() throws {
        var document = RegistryDocument()
        for n in 0..<2000 {
            document.slots[try Slot("slot-\(n)")] = SlotRecord(provider: "openai", backend: .file,
                                                                account: AccountInfo(email: "u\(n)@example.com"), state: .signedOut)
        }
        document.active = try Slot("slot-7")
        let data = document.jsonData(pretty: true)
        #expect(try RegistryDocument.decodeStreaming(data, source: "r") == document)
        #expect(try RegistryDocument.decodeStreaming(data, source: "r") == RegistryDocument.decode(data, source: "r"))
    }
}
