import FoundationEssentials
import LanyardSupport

/// A user-chosen name for one signed-in account of one provider, such as `work` or `personal`.
///
/// Names match `[a-z0-9][a-z0-9._-]{0,63}`: safe in file names, keyring attributes, shell words and
/// environment variables, and the same on every backend. Names that begin with `lanyard-fleet-`
/// are Lanyard's own (the machine's fleet keys live there, in the same stores): no user, server,
/// file or fleet value can name one, so every door that makes a `Slot` refuses them.
public struct Slot: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The validated name.
    public let name: String

    /// Creates a slot, or throws ``SlotNameError`` saying what is wrong with `name`.
    public init(_ name: String) throws(SlotNameError) {
        try Slot.validate(name)
        self.name = name
    }

    /// The reserved namespace: entries Lanyard keeps beside slots in a store.
    package static let reservedPrefix = "lanyard-fleet-"

    /// A store entry in the reserved namespace (``reservedPrefix`` + `suffix`), which ``init(_:)``
    /// refuses. Only Lanyard's own code makes one.
    package init(reserved suffix: String) {
        name = Slot.reservedPrefix + suffix
    }

    /// A name read back from a store: a slot's, or one in the reserved namespace.
    package init(stored name: String) throws(SlotNameError) {
        if name.hasPrefix(Slot.reservedPrefix) {
            let suffix = String(name.dropFirst(Slot.reservedPrefix.count))
            try Slot.validate(suffix)
            self.init(reserved: suffix)
        } else {
            try self.init(name)
        }
    }

    /// Whether this is a store entry of Lanyard's own rather than a slot.
    package var isReserved: Bool { name.hasPrefix(Slot.reservedPrefix) }

    /// Checks a candidate name without creating a slot.
    public static func validate(_ name: String) throws(SlotNameError) {
        if name.hasPrefix(reservedPrefix) { throw .reserved(name) }
        // In place for native strings (the registry checks every slot name it reads).
        if let checked = name.utf8.withContiguousStorageIfAvailable({ bytes in
            Result { () throws(SlotNameError) in try validate(bytes: bytes, name: name) }
        }) {
            return try checked.get()
        }
        try validate(bytes: Array(name.utf8), name: name)
    }

    private static func validate<Bytes: RandomAccessCollection>(bytes: Bytes, name: String) throws(SlotNameError)
    where Bytes.Element == UInt8, Bytes.Index == Int {
        guard let first = bytes.first else { throw .empty }
        guard bytes.count <= 64 else { throw .tooLong(count: bytes.count) }
        func isLowerAlnum(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) }
        guard isLowerAlnum(first) else { throw .badFirstCharacter(name) }
        for (index, b) in bytes.enumerated() where !(isLowerAlnum(b) || b == 0x2e || b == 0x5f || b == 0x2d) {
            throw .badCharacter(name, position: index + 1)
        }
    }

    /// A valid slot name derived from free text (for example an email's local part), or nil when
    /// nothing usable is left.
    public static func suggested(from text: String) -> Slot? {
        var out = ""
        for scalar in text.lowercased().unicodeScalars {
            switch scalar {
            case "a"..."z", "0"..."9", ".", "_", "-": out.unicodeScalars.append(scalar)
            case "+": return Slot.suggested(from: out)  // drop "+tag" sub-addressing
            default: out.append("-")
            }
        }
        while let f = out.first, !(f.isLetter || f.isNumber) { out.removeFirst() }
        return try? Slot(String(out.prefix(64)))
    }

    public var description: String { name }
    public static func < (a: Slot, b: Slot) -> Bool { a.name < b.name }

    public init(from decoder: Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        do { try self.init(raw) } catch {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: error.userFacingDescription)
            )
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(name)
    }
}

/// Why a slot name was refused.
public enum SlotNameError: Error, Equatable, Sendable, LocalizedError {
    case empty
    case tooLong(count: Int)
    case badFirstCharacter(String)
    case badCharacter(String, position: Int)
    /// The name is in Lanyard's reserved namespace (`lanyard-fleet-…`).
    case reserved(String)

    public var errorDescription: String? {
        switch self {
        case .empty: return "slot name is empty"
        case .tooLong(let n): return "slot name is \(n) bytes long; the limit is 64"
        // The name may come from a pin file or a server: control characters escaped.
        case .badFirstCharacter(let s):
            return "slot name \"\(TerminalText.escaped(s))\" must start with a lowercase letter or digit"
        case .badCharacter(let s, let p):
            return "slot name \"\(TerminalText.escaped(s))\" has a character not "
                + "allowed at position \(p) (use a-z, 0-9, '.', '_', '-')"
        case .reserved(let s):
            return "slot name \"\(TerminalText.escaped(s))\" is reserved: "
                + "names beginning with \(Slot.reservedPrefix) hold Lanyard's own keys"
        }
    }
}
