import FoundationEssentials
import Glibc
import LanyardSupport

/// The time source of time-dependent logic (expiry, schedules, backoff), injected so tests control
/// time instead of sleeping.
package protocol WallClock: Sendable {
    func now() -> Date
    /// Where this boot's monotonic clock stands (nil when it cannot be read): how long ago tokens
    /// were obtained, whatever the wall clock did since.
    func bootInstant() -> BootInstant?
}

extension WallClock {
    public func bootInstant() -> BootInstant? { BootInstant.current() }
}

/// A point on `CLOCK_BOOTTIME` (which counts suspended time and never jumps) of one boot
/// (`/proc/sys/kernel/random/boot_id`). Two instants of the same boot give the time elapsed
/// between them even when the wall clock was set forward or back meanwhile.
public struct BootInstant: Hashable, Sendable {
    public var bootID: String
    public var seconds: Double

    public init(bootID: String, seconds: Double) {
        self.bootID = bootID
        self.seconds = seconds
    }

    /// Seconds from `earlier` to this instant, or nil when they belong to different boots (or
    /// `earlier` is later: not the same clock after all).
    public func seconds(since earlier: BootInstant) -> Double? {
        guard bootID == earlier.bootID, seconds >= earlier.seconds else { return nil }
        return seconds - earlier.seconds
    }

    /// Stored as one string, "BOOT-ID SECONDS".
    public var text: String { bootID + " " + String((seconds * 1000).rounded() / 1000) }

    public init?(text: String) {
        let parts = text.split(separator: " ")
        guard parts.count == 2, (1...64).contains(parts[0].utf8.count),
            parts[0].utf8.allSatisfy({ $0 == 0x2d || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }),
            let seconds = Double(parts[1]), seconds.isFinite, seconds >= 0, seconds < 1e12
        else { return nil }
        // Milliseconds, as `text` writes them: a value read back is the value that was written.
        self.init(bootID: String(parts[0]), seconds: (seconds * 1000).rounded() / 1000)
    }

    /// The system's instant now (the boot id is read once per process).
    public static func current() -> BootInstant? {
        guard let id = bootID else { return nil }
        var ts = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &ts) == 0 else { return nil }
        return BootInstant(bootID: id, seconds: Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9)
    }

    private static let bootID: String? = {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, 64) }
        guard n > 0 else { return nil }
        let id = String(decoding: buffer[..<n], as: UTF8.self).trimmingWhitespaceAndNewlines()
        return BootInstant(text: id + " 0") != nil ? id : nil
    }()
}

/// The system clock.
package struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}

extension JSONFields {
    /// A boot clock reading ("BOOT-ID SECONDS", see ``BootInstant``).
    package func optionalBootInstant(_ key: String) throws(JSONShapeError) -> BootInstant? {
        guard let s = try optionalString(key) else { return nil }
        guard let instant = BootInstant(text: s) else {
            throw JSONShapeError(path: path + "." + key, problem: "is not a boot id and a number of seconds")
        }
        return instant
    }
}
