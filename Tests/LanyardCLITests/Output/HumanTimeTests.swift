import Foundation
import LanyardAuth
import LanyardCore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardCLI

/// The local clock time human output shows after a relative time, computed apart from the code
/// under test (Foundation's formatter in the process's time zone): "HH:mm" today, "MMM d HH:mm"
/// on another day of the year, "yyyy-MM-dd HH:mm" in another year.
func localClock(_ date: Date, now: Date) -> String {
    let calendar = Calendar.current
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = calendar.timeZone
    if calendar.isDate(date, inSameDayAs: now) {
        formatter.dateFormat = "HH:mm"
    } else if calendar.component(.year, from: date) == calendar.component(.year, from: now) {
        formatter.dateFormat = "MMM d HH:mm"
    } else {
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
    }
    return formatter.string(from: date)
}

@Suite struct HumanTimeTests {
    func local(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int) -> Date {
        Calendar.current.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute))!
    }

    @Test func oneFormatEverywhere() {
        let now = local(2027, 6, 15, 12, 0)
        #expect(RelativeTime.describe(local(2027, 6, 15, 12, 49), now: now) == "in 49 min (12:49)")
        #expect(RelativeTime.describe(local(2027, 6, 15, 11, 57), now: now) == "3 min ago (11:57)")
        #expect(RelativeTime.describe(local(2027, 6, 16, 9, 7), now: now) == "in 21 h 7 min (Jun 16 09:07)")
        #expect(RelativeTime.describe(local(2028, 1, 2, 0, 0), now: now) == "in 200 d (2028-01-02 00:00)")
        #expect(RelativeTime.describe(local(2027, 6, 15, 12, 0), now: now) == "in 0 s (12:00)")
    }

    @Test func aUsageLimitErrorSaysWhenItResetsTheSameWay() {
        let h = CLIHarness()
        let now = h.clock.now()
        let limit = UsageLimit(message: "You hit your limit", resetsAt: now + 49 * 60)
        let out = TextSink()
        let err = TextSink()
        let context = CommandContext(
            stdout: out,
            stderr: err,
            input: TextInput(Data()),
            environment: h.environment,
            workingDirectory: h.workingDirectory,
            clock: h.clock,
            stdoutIsTTY: false,
            stderrIsTTY: false,
            stdinIsTTY: false,
            openStore: h.opener
        )
        #expect(Lanyard.report(ClientError.usageLimitReached(limit), json: false, context: context) == 7)
        #expect(err.text == "lanyard: You hit your limit; resets in 49 min (\(localClock(now + 49 * 60, now: now)))\n")
        // JSON keeps the exact instant.
        #expect(Lanyard.report(ClientError.usageLimitReached(limit), json: true, context: context) == 7)
        #expect(out.text.contains("resets at \(RFC3339.string(from: now + 49 * 60))"))
    }
}
