import LanyardSupport
import Testing

@Suite struct TrimmingTests {
    @Test func trimsSpacesAndTabsOnly() {
        #expect("  pro\t".trimmingSpaces() == "pro")
        #expect(" a b ".trimmingSpaces() == "a b")
        #expect(" \t ".trimmingSpaces() == "")
        #expect("".trimmingSpaces() == "")
        #expect("x\n".trimmingSpaces() == "x\n", "newlines are content, as with .whitespaces")
        #expect("\u{A0}é\u{A0}".trimmingSpaces() == "é")
    }
}

/// Text a C call left in a buffer: up to the first NUL, all of it when the text filled the buffer.
@Suite struct NulTerminatedTextTests {
    @Test func aBufferEndsAtItsFirstNul() {
        #expect(String(nulTerminated: [104, 105, 0, 120, 0] as [CChar]) == "hi")
        #expect(String(nulTerminated: [104, 105] as [CChar]) == "hi", "a full buffer has no NUL")
        #expect(String(nulTerminated: [0, 104] as [CChar]) == "")
        #expect(String(nulTerminated: [-1, 0] as [CChar]) == "\u{FFFD}", "an invalid byte is replaced")
    }

    @Test func aFixedCArrayEndsAtItsFirstNul() {
        let tuple: (CChar, CChar, CChar, CChar) = (111, 107, 0, 33)
        #expect(String(nulTerminatedTuple: tuple) == "ok")
        #expect(String(nulTerminatedTuple: (CChar(111), CChar(107))) == "ok")
    }
}
