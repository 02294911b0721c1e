import Foundation
import LanyardSupport
import Testing

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

    /// The nearest millisecond, which reads back to the millisecond.
    @Test func writesMilliseconds() throws {
        func written(_ unix: Double) -> String {
            RFC3339.stringWithMilliseconds(from: Date(timeIntervalSince1970: unix))
        }
        #expect(written(1_800_000_000.5) == "2027-01-15T08:00:00.500Z")
        #expect(written(1_800_000_000.0129) == "2027-01-15T08:00:00.013Z")
        #expect(written(1_800_000_000.9996) == "2027-01-15T08:00:01.000Z")
        #expect(written(-0.25) == "1969-12-31T23:59:59.750Z")
        #expect(written(1_800_000_000) == "2027-01-15T08:00:00.000Z")
        let back = try #require(RFC3339.date(from: written(1_800_000_000.987)))
        #expect(abs(back.timeIntervalSince1970 - 1_800_000_000.987) < 0.0005)
    }

    @Test(arguments: [
        "", "2027-01-15", "2027-01-15T08:00:00", "2027-13-15T08:00:00Z", "2027-01-15T08:00:00.Z",
        "2027-01-15T08:00:00Zjunk", "2027-01-15T25:00:00Z", "20x7-01-15T08:00:00Z",
    ])
    func rejectsMalformedTimestamps(_ text: String) {
        #expect(RFC3339.date(from: text) == nil)
    }
}
