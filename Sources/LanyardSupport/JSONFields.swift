import FoundationEssentials

/// Typed access to the fields of a JSON object, with errors that name the JSON path
/// (`.slots.work.state`) and never quote a value.
package struct JSONFields {
    package let object: [String: JSONValue]
    /// Where this object sits in its document, for error messages.
    package let path: String

    package init(_ value: JSONValue, path: String = "") throws(JSONShapeError) {
        guard case .object(let o) = value else {
            throw JSONShapeError(path: path.isEmpty ? "top level" : path, problem: "is not an object")
        }
        object = o
        self.path = path
    }

    package func fail(_ key: String, _ problem: String) -> JSONShapeError {
        JSONShapeError(path: path + "." + key, problem: problem)
    }

    package func optionalString(_ key: String) throws(JSONShapeError) -> String? {
        switch object[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: throw fail(key, "is not a string")
        }
    }

    package func string(_ key: String) throws(JSONShapeError) -> String {
        guard let s = try optionalString(key) else { throw fail(key, "is missing") }
        return s
    }

    /// A token field: visible ASCII without spaces (``TokenText``), nil when absent.
    package func optionalToken(_ key: String) throws(JSONShapeError) -> String? {
        guard let s = try optionalString(key) else { return nil }
        if let problem = TokenText.problem(s) { throw fail(key, problem) }
        return s
    }

    package func token(_ key: String) throws(JSONShapeError) -> String {
        guard let s = try optionalToken(key) else { throw fail(key, "is missing") }
        return s
    }

    /// A one-line name from outside (an email, a plan, an id): no control characters
    /// (``TerminalText/lineProblem(_:limit:)``), nil when absent.
    package func optionalLine(_ key: String) throws(JSONShapeError) -> String? {
        guard let s = try optionalString(key) else { return nil }
        if let problem = TerminalText.lineProblem(s) { throw fail(key, problem) }
        return s
    }

    package func optionalNumber(_ key: String) throws(JSONShapeError) -> Double? {
        switch object[key] {
        case nil, .null?: return nil
        case .number(let n)?: return n
        default: throw fail(key, "is not a number")
        }
    }

    package func int(_ key: String) throws(JSONShapeError) -> Int {
        guard let n = try optionalNumber(key) else { throw fail(key, "is missing") }
        guard n.rounded() == n, abs(n) < 1e15 else { throw fail(key, "is not a whole number") }
        return Int(n)
    }

    package func optionalBool(_ key: String) throws(JSONShapeError) -> Bool? {
        switch object[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        default: throw fail(key, "is not true or false")
        }
    }

    /// A date field, in whole seconds: documents are written in whole seconds, so a fraction
    /// (Codex writes milliseconds) would not survive the next write and a value read back would
    /// differ from the one stored (a fuzzer found this).
    package func optionalDate(_ key: String) throws(JSONShapeError) -> Date? {
        guard let s = try optionalString(key) else { return nil }
        guard let d = RFC3339.date(from: s) else { throw fail(key, "is not an RFC 3339 date") }
        return Date(timeIntervalSince1970: d.timeIntervalSince1970.rounded(.down))
    }

    /// An array of strings.
    package func optionalStrings(_ key: String) throws(JSONShapeError) -> [String]? {
        switch object[key] {
        case nil, .null?: return nil
        case .array(let items)?:
            var out: [String] = []
            for item in items {
                guard case .string(let s) = item else { throw fail(key, "is not a list of strings") }
                out.append(s)
            }
            return out
        default: throw fail(key, "is not a list of strings")
        }
    }

    package func optionalObject(_ key: String) throws(JSONShapeError) -> JSONFields? {
        switch object[key] {
        case nil, .null?: return nil
        case let v?: return try JSONFields(v, path: path + "." + key)
        }
    }

    package func object(_ key: String) throws(JSONShapeError) -> JSONFields {
        guard let o = try optionalObject(key) else { throw fail(key, "is missing") }
        return o
    }
}

/// A JSON document of the wrong shape: which field, and what is wrong with it.
package struct JSONShapeError: Error, Equatable, Sendable, LocalizedError {
    package let path: String
    package let problem: String
    package init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }
    package var errorDescription: String? { "\(path) \(problem)" }
}

extension JSONValue {
    /// A string, or null when nil.
    package static func optional(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
    /// An RFC 3339 date, or null when nil.
    package static func date(_ d: Date?) -> JSONValue { d.map { .string(RFC3339.string(from: $0)) } ?? .null }
    /// The object without its null members (for compact stored documents).
    package var droppingNulls: JSONValue {
        guard case .object(let o) = self else { return self }
        return .object(o.filter { $0.value != .null })
    }
}

/// Documents Lanyard stores: each reads and writes itself through ``JSONValue``.
package protocol JSONDocument {
    init(json: JSONFields) throws(JSONShapeError)
    var json: JSONValue { get }
}

extension JSONDocument {
    /// Decodes a stored document, or throws a ``DecodeError`` that names `source` and the field.
    package static func decode(_ data: Data, source: String) throws(DecodeError) -> Self {
        let value: JSONValue
        do { value = try JSONValue.parse(data) } catch {
            throw DecodeError(source: source, detail: "not valid JSON (\(error.userFacingDescription))")
        }
        do { return try Self(json: try JSONFields(value)) } catch {
            throw DecodeError(source: source, detail: error.userFacingDescription)
        }
    }

    /// The document as compact UTF-8 JSON with sorted keys.
    package func jsonData(pretty: Bool = false) -> Data { Data(json.serialized(pretty: pretty).utf8) }
}
