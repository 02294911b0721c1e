import FoundationEssentials

/// The time source of time-dependent logic (expiry, schedules, backoff), injected so tests control
/// time instead of sleeping.
public protocol WallClock: Sendable {
    func now() -> Date
}

/// The system clock.
public struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A clock tests set by hand.
public final class ManualClock: WallClock, Sendable {
    private let current: Locked<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Locked(start) }

    public func now() -> Date { current.withLock { $0 } }
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
    public func set(_ date: Date) { current.withLock { $0 = date } }
}
