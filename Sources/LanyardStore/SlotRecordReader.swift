import FoundationEssentials
import LanyardCore
import LanyardSupport

/// Reads a slot record straight from the registry's bytes, without the dictionaries of a JSON
/// tree (hashing each key of each record was the largest cost of `list --json` over many slots).
/// It understands only records as Lanyard writes them: at anything else (an unknown key, a value
/// of another type, a duplicate, an unknown state) it answers nil, and the caller rewinds and
/// decodes the record through ``SlotRecord/init(json:)``, which gives the result or the error.
enum SlotRecordReader {
    /// The record at `reader`, or nil (the reader is then somewhere inside it: rewind).
    static func read(_ reader: inout JSONReader) throws(JSONSyntaxError) -> SlotRecord? {
        guard reader.peek() == 0x7b else { return nil }
        var provider: String?
        var backend: BackendKind?
        var account = AccountInfo()
        var state: AuthState?
        var lastRefresh: Date?
        var lastRefreshBoot: BootInstant?
        var lastError: String?
        var createdAt: Date?
        var seen: UInt8 = 0
        var understood = true  // a bit per key: no hashing
        try reader.members { key, r throws(JSONSyntaxError) in
            guard understood, let known = Key(rawValue: key), seen & known.bit == 0 else {
                understood = false
                _ = try r.value()
                return true
            }
            seen |= known.bit
            switch known {
            case .provider: provider = try string(&r)
            case .backend: backend = try string(&r).flatMap(BackendKind.init(rawValue:))
            case .account:
                if try r.null() { return true }
                guard let read = try self.account(&r) else {
                    understood = false
                    return true
                }
                account = read
            case .state: state = try self.state(&r)
            case .lastRefresh: if !(try date(&r, into: &lastRefresh)) { understood = false }
            case .lastRefreshBoot:
                var text: String?
                if !(try optionalString(&r, into: &text)) {
                    understood = false
                } else if let text {
                    if let instant = BootInstant(text: text) { lastRefreshBoot = instant } else { understood = false }
                }
            case .lastError: if !(try optionalString(&r, into: &lastError)) { understood = false }
            case .createdAt: if !(try date(&r, into: &createdAt)) { understood = false }
            }
            if known == .provider && provider == nil || known == .backend && backend == nil
                || known == .state && state == nil
            {
                understood = false
            }
            return true
        }
        guard understood, let provider, let backend, let state else { return nil }
        return SlotRecord(
            provider: provider,
            backend: backend,
            account: account,
            state: state,
            lastRefresh: lastRefresh,
            lastRefreshBoot: lastRefreshBoot,
            lastErrorCode: lastError,
            createdAt: createdAt
        )
    }

    private enum Key: String {
        case provider, backend, account, state
        case lastRefresh = "last_refresh"
        case lastRefreshBoot = "last_refresh_boot"
        case lastError = "last_error"
        case createdAt = "created_at"
        var bit: UInt8 {
            switch self {
            case .provider: 1
            case .backend: 2
            case .account: 4
            case .state: 8
            case .lastRefresh: 16
            case .lastError: 32
            case .createdAt: 64
            case .lastRefreshBoot: 128
            }
        }
    }

    /// A string, or nil (the value then read and dropped) for anything else.
    private static func string(_ r: inout JSONReader) throws(JSONSyntaxError) -> String? {
        if r.peek() == 0x22 { return try r.string() }
        _ = try r.value()
        return nil
    }

    /// A string or null into `value`; false (the value read) for anything else.
    private static func optionalString(_ r: inout JSONReader, into value: inout String?) throws(JSONSyntaxError) -> Bool
    {
        if try r.null() {
            value = nil
            return true
        }
        guard let s = try string(&r) else { return false }
        value = s
        return true
    }

    /// An RFC 3339 date in whole seconds (as ``JSONFields/optionalDate(_:)`` reads it) or null.
    private static func date(_ r: inout JSONReader, into value: inout Date?) throws(JSONSyntaxError) -> Bool {
        var text: String?
        guard try optionalString(&r, into: &text) else { return false }
        guard let text else {
            value = nil
            return true
        }
        guard let d = RFC3339.date(from: text) else { return false }
        value = Date(timeIntervalSince1970: d.timeIntervalSince1970.rounded(.down))
        return true
    }

    private static func account(_ r: inout JSONReader) throws(JSONSyntaxError) -> AccountInfo? {
        guard r.peek() == 0x7b else {
            _ = try r.value()
            return nil
        }
        var email: String?
        var userID: String?
        var accountID: String?
        var plan: String?
        var fedramp: Bool?
        var seen: UInt8 = 0
        var understood = true
        try r.members { key, r throws(JSONSyntaxError) in
            let bit: UInt8 =
                switch key {
                case "email": 1
                case "user_id": 2
                case "account_id": 4
                case "plan": 8
                case "fedramp": 16
                default: 0
                }
            guard understood, bit != 0, seen & bit == 0 else {
                understood = false
                _ = try r.value()
                return true
            }
            seen |= bit
            switch bit {
            case 1: understood = try optionalString(&r, into: &email)
            case 2: understood = try optionalString(&r, into: &userID)
            case 4: understood = try optionalString(&r, into: &accountID)
            case 8: understood = try optionalString(&r, into: &plan)
            default:
                if try r.null() {
                    fedramp = nil
                } else if let b = try r.bool() {
                    fedramp = b
                } else {
                    understood = false
                    _ = try r.value()
                }
            }
            return true
        }
        guard understood else { return nil }
        return AccountInfo(
            email: email,
            userID: userID,
            accountID: accountID,
            plan: plan.map(Plan.init(rawValue:)),
            isFedRAMPAccount: fedramp ?? false
        )
    }

    /// The states Lanyard stores for a slot at rest: signed in (with its expiry), signed out and
    /// needing sign-in; nil for the others (decoded the long way).
    private static func state(_ r: inout JSONReader) throws(JSONSyntaxError) -> AuthState? {
        guard r.peek() == 0x7b else {
            _ = try r.value()
            return nil
        }
        var name: String?
        var expiresAt: Date?
        var understood = true
        var seen: UInt8 = 0
        try r.members { key, r throws(JSONSyntaxError) in
            let bit: UInt8 = key == "state" ? 1 : key == "expires_at" ? 2 : 0
            guard understood, bit != 0, seen & bit == 0 else {
                understood = false
                _ = try r.value()
                return true
            }
            seen |= bit
            if bit == 1 {
                name = try string(&r)
                understood = name != nil
            } else {
                understood = try date(&r, into: &expiresAt)
            }
            return true
        }
        guard understood else { return nil }
        switch name {
        case "signed-in": return .signedIn(expiresAt: expiresAt)
        case "signed-out" where expiresAt == nil: return .signedOut
        case "reauthentication-required" where expiresAt == nil: return .reauthenticationRequired
        default: return nil
        }
    }
}
