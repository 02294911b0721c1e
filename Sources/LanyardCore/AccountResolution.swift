import FoundationEssentials
import LanyardSupport

/// Which slot a command acts on, and which rule chose it.
///
/// Precedence: `--account` flag > `LANYARD_ACCOUNT` > the nearest `.lanyard` file walking up from
/// the working directory > the active slot.
public struct AccountResolution: Hashable, Sendable {
    /// The rule that chose the slot.
    public enum Rule: Hashable, Sendable {
        case flag
        case environment
        case pinFile(path: String)
        case activeSlot

        /// A stable name for `--json` output.
        public var name: String {
            switch self {
            case .flag: return "flag"
            case .environment: return "environment"
            case .pinFile: return "pin-file"
            case .activeSlot: return "active"
            }
        }

        public var explanation: String {
            switch self {
            case .flag: return "chosen by --account"
            case .environment: return "chosen by LANYARD_ACCOUNT"
            case .pinFile(let path): return "pinned by \(path)"
            case .activeSlot: return "the active slot, set by `lanyard switch`"
            }
        }
    }

    public let slot: Slot
    public let rule: Rule

    public init(slot: Slot, rule: Rule) {
        self.slot = slot
        self.rule = rule
    }

    /// Applies the precedence rules. Each source is a raw name (validated here) so that a bad
    /// value is reported with the rule it came from.
    /// - Returns: nil when no rule names a slot.
    public static func resolve(
        flag: String?,
        environment: String?,
        pinFile: (path: String, name: String)?,
        active: Slot?
    ) throws(AccountResolutionError) -> AccountResolution? {
        func slot(_ raw: String, _ rule: Rule) throws(AccountResolutionError) -> AccountResolution {
            do { return AccountResolution(slot: try Slot(raw), rule: rule) } catch {
                throw AccountResolutionError(rule: rule, reason: error)
            }
        }
        if let flag { return try slot(flag, .flag) }
        if let environment, !environment.isEmpty { return try slot(environment, .environment) }
        if let pinFile { return try slot(pinFile.name, .pinFile(path: pinFile.path)) }
        return active.map { AccountResolution(slot: $0, rule: .activeSlot) }
    }

    /// The same rules, looking for the pin file and the active slot (each costs I/O: a walk up the
    /// folders, a registry read) only when the rules before them name nothing.
    public static func resolve(
        flag: String?,
        environment: String?,
        pinFile: () -> (path: String, name: String)?,
        active: () throws -> Slot?
    ) throws -> AccountResolution? {
        if flag != nil || !(environment ?? "").isEmpty {
            return try resolve(flag: flag, environment: environment, pinFile: nil, active: nil)
        }
        if let pin = pinFile() { return try resolve(flag: nil, environment: nil, pinFile: pin, active: nil) }
        return try resolve(flag: nil, environment: nil, pinFile: nil, active: try active())
    }
}

/// A rule named a slot whose name is not valid.
public struct AccountResolutionError: LanyardError, Equatable {
    public let rule: AccountResolution.Rule
    public let reason: SlotNameError

    public var code: ErrorCode { .invalidSlotName }
    public var errorDescription: String? {
        "\(reason.userFacingDescription) (\(rule.explanation))"
    }
}
