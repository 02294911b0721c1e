import Foundation
import LanyardCore
import LanyardSupport

/// A clock tests set by hand. `advance` moves time on; `jump` moves only the wall clock, as
/// `date -s` or an NTP step does, leaving the boot clock where it was.
package final class ManualClock: WallClock, Sendable {
    private let current: Locked<(wall: Date, boot: Double)>

    package init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Locked((start, 1000)) }

    package func now() -> Date { current.withLock { $0.wall } }
    package func bootInstant() -> BootInstant? {
        BootInstant(bootID: "00000000-7e57-b007-0000-000000000000", seconds: current.withLock { $0.boot })
    }
    package func advance(by seconds: TimeInterval) {
        current.withLock {
            $0.wall += seconds
            $0.boot += seconds
        }
    }
    package func jump(by seconds: TimeInterval) { current.withLock { $0.wall += seconds } }
    /// Sets the wall clock to `date`, moving the boot clock by as much (time passed, no jump).
    package func set(_ date: Date) {
        current.withLock {
            $0.boot += max(0, date.timeIntervalSince($0.wall))
            $0.wall = date
        }
    }
}
