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
