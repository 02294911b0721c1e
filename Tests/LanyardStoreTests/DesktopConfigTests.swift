import Foundation
import LanyardCore
import LanyardStore
import Testing

/// `[desktop] notify`: the percentages `lanyard tray` warns at.
@Suite struct DesktopConfigTests {
    func parse(_ text: String) throws -> ConfigFile.Loaded { try ConfigFile.parse(Data(text.utf8), path: "config.ini") }

    @Test func notifyIsAnAscendingPercentList() throws {
        #expect(try parse("").config.desktopNotifyPercents == [80, 95])
        #expect(try parse("[desktop]\nnotify = 50, 75,90\n").config.desktopNotifyPercents == [50, 75, 90])
        #expect(try parse("[desktop]\nnotify = 90 %\n").config.desktopNotifyPercents == [90])
        #expect(try parse("[desktop]\nnotify = 100\n").config.desktopNotifyPercents == [100])
        #expect(try parse("[desktop]\nnotify = off\n").config.desktopNotifyPercents == [])
        #expect(try parse("[desktop]\nnotify = OFF\n").config.desktopNotifyPercents == [])
        #expect(try parse("[desktop]\nnotify =\n").config.desktopNotifyPercents == [])
        #expect(try parse("[desktop]\nnotify = 80\n").warnings.isEmpty)
    }

    @Test func badValuesNameTheKeyAndLine() throws {
        let range = "expected off or percentages from 1 to 100 separated by commas (80, 95)"
        for (value, detail) in [
            ("0", range), ("101", range), ("80, x", range), ("80,,95", range), ("80.5", range), ("-5", range),
            ("95, 80", "expected percentages in ascending order without repeats (80, 95)"),
            ("80, 80", "expected percentages in ascending order without repeats (80, 95)"),
        ] {
            #expect(
                throws: ConfigError.invalidValue(
                    path: "config.ini",
                    group: "desktop",
                    key: "notify",
                    detail: "\(detail), got \"\(value)\"",
                    line: 3
                ),
                "\(value)"
            ) {
                try parse("[store]\n[desktop]\nnotify = \(value)\n")
            }
        }
    }

    @Test func aMisspeltKeyOrGroupIsNamedWithTheRightOne() throws {
        let key = try parse("[desktop]\nnotfy = 80\n").warnings
        #expect(
            key.count == 1 && key[0].contains("unknown key \"notfy\" in [desktop]")
                && key[0].contains("did you mean \"notify\"?"),
            "\(key)"
        )
        let group = try parse("[dekstop]\nnotify = 80\n").warnings
        #expect(group.count == 1 && group[0].contains("did you mean [desktop]?"), "\(group)")
    }
}
