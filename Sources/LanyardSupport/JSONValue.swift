/// A JSON value, for claims and server bodies whose shape is only partly known.
public enum JSONValue: Hashable, Sendable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    public var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    public var number: Double? {
        if case .number(let n) = self { return n }
        return nil
    }
    public var bool: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    public var object: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }
    public subscript(key: String) -> JSONValue? { object?[key] }
}
