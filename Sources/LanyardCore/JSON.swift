import Foundation

/// The JSON conventions of every file Lanyard writes: sorted keys, RFC 3339 dates in UTC.
public enum LanyardJSON {
    public static func encoder(pretty: Bool = false) -> JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        e.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(RFC3339.string(from: date))
        }
        return e
    }

    public static func decoder() -> JSONDecoder {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { decoder in
            let c = try decoder.singleValueContainer()
            let s = try c.decode(String.self)
            guard let date = RFC3339.date(from: s) else {
                throw DecodingError.dataCorruptedError(in: c, debugDescription: "\"\(s)\" is not an RFC 3339 date")
            }
            return date
        }
        return d
    }

    /// Decodes `T`, turning Foundation's DecodingError into a ``DecodeError`` whose message names
    /// the source and the JSON path that is wrong (and never quotes a value).
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data, source: String) throws(DecodeError) -> T {
        do {
            return try decoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw DecodeError(source: source, detail: describe(error))
        } catch {
            throw DecodeError(source: source, detail: "not valid JSON")
        }
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ p: [CodingKey]) -> String {
            p.isEmpty ? "top level" : p.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        }
        switch error {
        case .keyNotFound(let key, let ctx): return "missing field \(path(ctx.codingPath + [key]))"
        case .typeMismatch(let t, let ctx): return "\(path(ctx.codingPath)) is not a \(t)"
        case .valueNotFound(let t, let ctx): return "\(path(ctx.codingPath)) is null, expected \(t)"
        case .dataCorrupted(let ctx):
            if ctx.codingPath.isEmpty { return "not valid JSON" }
            return "\(path(ctx.codingPath)): \(ctx.debugDescription)"
        @unknown default: return "unreadable"
        }
    }
}

/// RFC 3339 timestamps, with or without fractional seconds on input; whole seconds on output.
public enum RFC3339 {
    public static func string(from date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt))
    }

    public static func date(from string: String) -> Date? {
        if let d = try? Date.ISO8601FormatStyle(timeZone: .gmt).parse(string) { return d }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt).parse(string)
    }
}

/// A document that did not decode: which document, and what in it is wrong.
public struct DecodeError: Error, Equatable, Sendable, LocalizedError {
    /// Where the document came from (a path, "keyring item work", "token response", …).
    public var source: String
    /// What is wrong and where, without quoting values.
    public var detail: String

    public init(source: String, detail: String) {
        self.source = source
        self.detail = detail
    }

    public var errorDescription: String? { "\(source): \(detail)" }
}
