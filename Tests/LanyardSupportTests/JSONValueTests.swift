import Foundation
import LanyardSupport
import Testing

@Suite struct JSONValueTests {
    func parse(_ s: String) throws -> JSONValue { try JSONValue.parse(Data(s.utf8)) }

    @Test func parsesEveryKind() throws {
        let v = try parse(
            #" {"s":"a\"b\\c\u00e9\ud83d\ude00\n","n":-1.5e2,"z":0,"t":true,"f":false,"x":null,"a":[1,[],{}]} "#
        )
        #expect(v["s"]?.string == "a\"b\\cé😀\n")
        #expect(v["n"]?.number == -150)
        #expect(v["z"]?.number == 0)
        #expect(v["t"]?.bool == true && v["f"]?.bool == false && v["x"] == .null)
        #expect(v["a"] == .array([.number(1), .array([]), .object([:])]))
    }

    @Test func serializesAndRoundTrips() throws {
        let v = try parse(#"{"b":[1,2.5,"x\u0001"],"a":{"k":null}}"#)
        #expect(v.serialized() == #"{"a":{"k":null},"b":[1,2.5,"x\u0001"]}"#)
        #expect(try parse(v.serialized(pretty: true)) == v)
        #expect(
            v.serialized(pretty: true)
                == "{\n  \"a\": {\n    \"k\": null\n  },\n  \"b\": [\n    1,\n    2.5,\n    \"x\\u0001\"\n  ]\n}"
        )
    }

    @Test(arguments: [
        ("", "line 1, column 1: unexpected end of document"),
        ("{\"a\":1,}", "line 1, column 8: expected a string key"),
        ("[1 2]", "line 1, column 4: expected ',' or ']' in an array"),
        ("{\"a\":1}x", "line 1, column 8: unexpected text after the document"),
        ("{\n\"a\": tru}", "line 2, column 6: unexpected character"),
        ("\"abc", "line 1, column 5: unterminated string"),
        ("01", "line 1, column 2: unexpected text after the document"),
        ("1.", "line 1, column 3: invalid number"),
        ("\"\\x\"", "line 1, column 4: invalid escape"),
        ("\"\\ud800\"", "line 1, column 8: unpaired surrogate"),
        ("{\"a\":1,\"a\":2}", "line 1, column 13: duplicate key"),
        ("\"a\tb\"", "line 1, column 3: control character in a string"),
    ])
    func rejectsMalformedDocumentsSayingWhere(_ input: String, _ message: String) {
        #expect(throws: JSONSyntaxError.self) { try parse(input) }
        do { _ = try parse(input) } catch { #expect(error.localizedDescription == message) }
    }

    @Test func rejectsDeepNestingAndInvalidUTF8() {
        #expect(throws: JSONSyntaxError.self) {
            try parse(String(repeating: "[", count: 300) + String(repeating: "]", count: 300))
        }
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(Data([0x22, 0xff, 0x22])) }
    }

    @Test func fieldsNameThePathOfAWrongShape() throws {
        let f = try JSONFields(try parse(#"{"a":{"b":5}}"#))
        #expect(throws: JSONShapeError(path: ".a.b", problem: "is not a string")) { try f.object("a").string("b") }
        #expect(throws: JSONShapeError(path: ".a.c", problem: "is missing")) { try f.object("a").string("c") }
        #expect(throws: JSONShapeError(path: "top level", problem: "is not an object")) { try JSONFields(.array([])) }
    }
}
