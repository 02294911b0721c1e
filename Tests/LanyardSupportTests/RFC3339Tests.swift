import Foundation
import Testing
import LanyardSupport

@Suite struct RFC3339Tests {
    @Test func formatsAndParsesAgreeWithFoundation() {
        for t in [0.0, 951_782_400, 1_800_000_000, 4_102_444_799, -86_400 * 365.0, 1_709_164_800] {
            let date = Date(timeIntervalSince1970: t)
            let text = RFC3339.string(from: date)
            #expect(text == date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt)))
            #expect(RFC3339.date(from: text) == date)
        }
    }

    @Test func acceptsFractionsAndOffsets() {
        #expect(RFC3339.date(from: "2027-01-15T08:00:00.5Z") == Date(timeIntervalSince1970: 1_800_000_000.5))
        #expect(RFC3339.date(from: "2027-01-15T09:30:00+01:30") == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(RFC3339.date(from: "2027-01-15T03:00:00-05:00") == Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test(arguments: ["", "2027-01-15", "2027-01-15T08:00:00", "2027-13-15T08:00:00Z", "2027-01-15T08:00:00.Z",
                      "2027-01-15T08:00:00Zjunk", "2027-01-15T25:00:00Z", "20x7-01-15T08:00:00Z"])
    func rejectsMalformedTimestamps(_ text: String) {
        #expect(RFC3339.date(from: text) == nil)
    }
}
