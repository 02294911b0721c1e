// Numbers from outside (servers, tokens, headers, files) are doubles that may be anything JSON can
// spell: 1e300, or infinity from 1e400. Swift traps when such a value is turned into an Int or a
// date is formatted from it, so every number that becomes a duration, a date or a count is checked
// where it is read, and what is shown goes through `saturatingInt`.

extension Double {
    /// This value as a number of seconds to wait for, add to a date or show: finite and at most
    /// about 100 years either way; nil otherwise.
    package var plausibleSeconds: Double? { isFinite && abs(self) <= 3.2e9 ? self : nil }

    /// This value as Unix time that an RFC 3339 date can spell (years 0001 to 9999); nil otherwise.
    package var plausibleUnixTime: Double? {
        isFinite && self >= RFC3339.earliestUnixTime && self <= RFC3339.latestUnixTime ? self : nil
    }

    /// Rounded toward zero, saturating at the ends of Int (0 for NaN): for showing a number.
    package var saturatingInt: Int {
        if isNaN { return 0 }
        if self >= 9.2e18 { return .max }
        if self <= -9.2e18 { return .min }
        return Int(self)
    }
}
