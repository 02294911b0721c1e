import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import Testing

/// `events --follow` and the agent read what is appended to the event log through one cursor.
@Suite struct EventLogCursorTests {
    func slots(_ events: [JSONValue]) -> [String] { events.compactMap { $0["slot"]?.string } }

    /// An `error` event's code is an `ErrorCode`, stored as its raw string, as before.
    @Test func anErrorEventStoresItsCodeAsTheRawString() throws {
        let dir = TempDirectory()
        let log = EventLog(paths: dir.paths)
        log.appendError(
            .fleetWritePending,
            slot: try Slot("work"),
            message: "kept here",
            fields: ["attempt": .number(2)]
        )
        let line = try String(contentsOfFile: log.path, encoding: .utf8)
        #expect(line.contains(#""code":"fleet_write_pending""#), "\(line)")
        let event = try #require(log.read().first)
        #expect(event["event"]?.string == "error" && event["message"]?.string == "kept here")
        #expect(event["attempt"]?.number == 2)
        #expect(event["code"]?.string.flatMap(ErrorCode.init(rawValue:)) == .fleetWritePending)
    }

    @Test func readsEachAppendedEventOnceAndWaitsForAPartialLine() throws {
        let dir = TempDirectory()
        let log = EventLog(paths: dir.paths)
        log.append("refresh", slot: try Slot("before"))
        var cursor = EventLogCursor(log)
        #expect(cursor.newEvents().isEmpty, "a cursor starts at the end")
        log.append("refresh", slot: try Slot("a"))
        log.append("refresh", slot: try Slot("b"))
        #expect(slots(cursor.newEvents()) == ["a", "b"])
        #expect(cursor.newEvents().isEmpty)

        // A line still being written is read once it is complete.
        let handle = try #require(FileHandle(forWritingAtPath: log.path))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"event":"refresh","slot":"half"#.utf8))
        #expect(cursor.newEvents().isEmpty)
        handle.write(Data("\"}\n".utf8))
        try handle.close()
        #expect(slots(cursor.newEvents()) == ["half"])
    }

    @Test func aRotationGivesTheRestOfTheOldGenerationThenTheNewFile() throws {
        let dir = TempDirectory()
        let log = EventLog(paths: dir.paths, maxBytes: 4096)
        log.append("refresh", slot: try Slot("first"))
        var cursor = EventLogCursor(log)
        // Lines until the log rotates once, then two more in the new file, between two looks.
        var names: [String] = []
        while !FileManager.default.fileExists(atPath: log.rotatedPath) {
            names.append("s\(names.count)")
            log.append("refresh", slot: try Slot(names.last!))
        }
        for name in ["n1", "n2"] {
            names.append(name)
            log.append("refresh", slot: try Slot(name))
        }
        #expect(slots(cursor.newEvents()) == names)
        log.append("refresh", slot: try Slot("after"))
        #expect(slots(cursor.newEvents()) == ["after"])
    }
}
