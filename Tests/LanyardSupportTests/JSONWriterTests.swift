import Foundation
import LanyardSupport
import Testing

/// `JSONWriter` writes a document piece by piece; its bytes must equal `serialized(pretty:)` of
/// the same document, since commands use it for long outputs that scripts read.
@Suite struct JSONWriterTests {
    /// Writes `value` through the writer (object keys in sorted order, as callers must).
    func write(_ value: JSONValue, _ writer: inout JSONWriter) {
        switch value {
        case .object(let members):
            writer.beginObject()
            for (key, member) in members.sorted(by: { $0.key < $1.key }) {
                writer.key(key)
                write(member, &writer)
            }
            writer.endObject()
        case .array(let items):
            writer.beginArray()
            for item in items { write(item, &writer) }
            writer.endArray()
        default:
            writer.value(value)
        }
    }

    static let documents: [JSONValue] = [
        .object([:]), .array([]), .string("top"), .null,
        .object(["a": .array([]), "b": .object([:]), "c": .array([.object([:]), .array([.number(1), .null])])]),
        .object([
            "active": .string("work"),
            "slots": .array([
                .object([
                    "slot": .string("work"), "state_message": .string("a \"quoted\"\nline\u{1}"),
                    "fedramp": .bool(false),
                    "expires_at": .null, "n": .number(12.5), "é": .string("ünïcödé"),
                ]),
                .object([
                    "slot": .string("home"),
                    "nested": .object(["deeper": .array([.string("x"), .object(["k": .bool(true)])])]),
                ]),
            ]),
        ]),
    ]

    @Test(arguments: documents, [true, false])
    func writesTheSameBytesAsSerialized(_ document: JSONValue, pretty: Bool) {
        var writer = JSONWriter(pretty: pretty)
        write(document, &writer)
        #expect(writer.text == document.serialized(pretty: pretty))
    }

    @Test func escapesWhatSerializedEscapes() throws {
        let texts = [
            "plain", "quote \" and backslash \\", "tab\tnewline\ncarriage\r", "\u{0}\u{1f}", "emoji 🙂 and é",
        ]
        for text in texts {
            var writer = JSONWriter(pretty: false)
            writer.value(.string(text))
            #expect(writer.text == JSONValue.string(text).serialized())
            #expect(try JSONValue.parse(Data(writer.text.utf8)) == .string(text))
        }
    }
}
