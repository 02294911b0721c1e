import FoundationEssentials
import LanyardSupport

/// The JSON bodies of etcd's v3 gateway and the reading of its answers, apart from the transport.
///
/// The gateway speaks protobuf's JSON mapping with the proto field names: `key`, `value` and
/// `range_end` are base64; 64-bit integers are strings; fields at their zero value are left out
/// (a failed txn has no `succeeded`, a PUT event no `type`, a gone lease no `TTL`), so a missing
/// field reads as zero here.
enum EtcdGatewayMessages {
    // MARK: Requests

    static func base64(_ bytes: [UInt8]) -> JSONValue { .string(Data(bytes).base64EncodedString()) }
    static func base64(_ key: String) -> JSONValue { base64(Array(key.utf8)) }
    static func int64(_ number: Int64) -> JSONValue { .string(String(number)) }

    /// The end of the range of every key that starts with `prefix`: the prefix with its last byte
    /// below 0xFF incremented (and what follows it dropped); "\0" (every key) when there is none.
    static func prefixRangeEnd(_ prefix: [UInt8]) -> [UInt8] {
        var end = prefix
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return end
            }
            end.removeLast()
        }
        return [0]
    }

    static func rangeRequest(_ key: String, _ options: EtcdRangeOptions) -> JSONValue {
        var fields: [String: JSONValue] = ["key": base64(key)]
        if options.prefix { fields["range_end"] = base64(prefixRangeEnd(Array(key.utf8))) }
        if options.limit > 0 { fields["limit"] = int64(options.limit) }
        if options.sortByCreateRevision {
            fields["sort_target"] = .string("CREATE")
            fields["sort_order"] = .string(options.descending ? "DESCEND" : "ASCEND")
        } else if options.descending {
            fields["sort_target"] = .string("KEY")
            fields["sort_order"] = .string("DESCEND")
        }
        if options.maxCreateRevision > 0 { fields["max_create_revision"] = int64(options.maxCreateRevision) }
        if options.keysOnly { fields["keys_only"] = .bool(true) }
        return .object(fields)
    }

    static func putRequest(_ key: String, value: [UInt8], lease: Int64) -> JSONValue {
        var fields: [String: JSONValue] = ["key": base64(key), "value": base64(value)]
        if lease != 0 { fields["lease"] = int64(lease) }
        return .object(fields)
    }

    static func deleteRequest(_ key: String, prefix: Bool) -> JSONValue {
        var fields: [String: JSONValue] = ["key": base64(key)]
        if prefix { fields["range_end"] = base64(prefixRangeEnd(Array(key.utf8))) }
        return .object(fields)
    }

    static func transactionRequest(
        compare: [EtcdCompare],
        success: [EtcdOperation],
        failure: [EtcdOperation]
    ) -> JSONValue {
        let compares: [JSONValue] = compare.map { comparison in
            switch comparison {
            case .modRevision(let key, let revision):
                return .object([
                    "key": base64(key), "target": .string("MOD"), "result": .string("EQUAL"),
                    "mod_revision": int64(revision),
                ])
            case .createRevision(let key, let revision):
                return .object([
                    "key": base64(key), "target": .string("CREATE"), "result": .string("EQUAL"),
                    "create_revision": int64(revision),
                ])
            case .value(let key, let value):
                return .object([
                    "key": base64(key), "target": .string("VALUE"), "result": .string("EQUAL"), "value": base64(value),
                ])
            }
        }
        func operations(_ list: [EtcdOperation]) -> JSONValue {
            .array(
                list.map { operation in
                    switch operation {
                    case .put(let key, let value, let lease):
                        return .object(["request_put": putRequest(key, value: value, lease: lease)])
                    case .range(let key, let options): return .object(["request_range": rangeRequest(key, options)])
                    case .delete(let key, let prefix):
                        return .object(["request_delete_range": deleteRequest(key, prefix: prefix)])
                    }
                }
            )
        }
        return .object(["compare": .array(compares), "success": operations(success), "failure": operations(failure)])
    }

    static func watchRequest(prefix: String, startRevision: Int64) -> JSONValue {
        var create: [String: JSONValue] = [
            "key": base64(prefix),
            "range_end": base64(prefixRangeEnd(Array(prefix.utf8))),
            "prev_kv": .bool(true),
        ]
        if startRevision > 0 { create["start_revision"] = int64(startRevision) }
        return .object(["create_request": .object(create)])
    }

    static func bytes(_ json: JSONValue) -> [UInt8] { Array(json.serialized().utf8) }

    // MARK: Answers

    static func range(_ answer: Answer) throws(EtcdError) -> EtcdRange {
        let kvs = try answer.array("kvs").enumerated().map { (index, kv) throws(EtcdError) in
            try keyValue(answer.child(kv, "kvs[\(index)]"))
        }
        return EtcdRange(kvs: kvs, revision: try answer.revision(), count: try answer.int64("count"))
    }

    static func keyValue(_ kv: Answer) throws(EtcdError) -> EtcdKeyValue {
        EtcdKeyValue(
            key: String(decoding: try kv.base64("key"), as: UTF8.self),
            value: try kv.base64("value"),
            createRevision: try kv.int64("create_revision"),
            modRevision: try kv.int64("mod_revision"),
            version: try kv.int64("version"),
            lease: try kv.int64("lease")
        )
    }

    static func transaction(_ answer: Answer) throws(EtcdError) -> EtcdTransactionResult {
        let revision = try answer.revision()
        let ranges = try answer.array("responses").enumerated().map {
            (index, response) throws(EtcdError) -> EtcdRange? in
            let entry = try answer.child(response, "responses[\(index)]")
            guard let inner = entry.fields["response_range"] else { return nil }
            var range = try Self.range(entry.child(inner, "response_range"))
            if range.revision == 0 { range.revision = revision }
            return range
        }
        return EtcdTransactionResult(succeeded: try answer.bool("succeeded"), revision: revision, ranges: ranges)
    }

    static func watchEvents(_ result: Answer) throws(EtcdError) -> [EtcdWatchEvent] {
        try result.array("events").enumerated().map { (index, event) throws(EtcdError) in
            let fields = try result.child(event, "events[\(index)]")
            let kind: EtcdWatchEvent.Kind
            switch try fields.string("type") {
            case nil, "PUT": kind = .put
            case "DELETE": kind = .delete
            case let other?:
                throw fields.malformed("type is \(TerminalText.escaped(String(other.prefix(40)))), not PUT or DELETE")
            }
            let kv = try keyValue(fields.child(fields.fields["kv"] ?? .object([:]), "kv"))
            let previous = try fields.fields["prev_kv"].map { (value) throws(EtcdError) in
                try keyValue(fields.child(value, "prev_kv"))
            }
            return EtcdWatchEvent(kind: kind, kv: kv, previous: previous)
        }
    }

    /// An answer's object with the endpoint and the path inside it, for errors that say where.
    struct Answer {
        let fields: [String: JSONValue]
        let endpoint: String
        let path: String

        init(_ value: JSONValue, endpoint: String, path: String = "answer") throws(EtcdError) {
            guard case .object(let fields) = value else {
                throw EtcdError.malformed(endpoint: endpoint, detail: "\(path) is not a JSON object")
            }
            self.fields = fields
            self.endpoint = endpoint
            self.path = path
        }

        init(parsing bytes: [UInt8], endpoint: String, what: String) throws(EtcdError) {
            let value: JSONValue
            do { value = try JSONValue.parse(Data(bytes)) } catch {
                throw EtcdError.malformed(
                    endpoint: endpoint,
                    detail: "the \(what) is not JSON (\(error.errorDescription ?? "unreadable"))"
                )
            }
            try self.init(value, endpoint: endpoint, path: what)
        }

        func child(_ value: JSONValue, _ name: String) throws(EtcdError) -> Answer {
            try Answer(value, endpoint: endpoint, path: "\(path).\(name)")
        }

        func object(_ key: String) throws(EtcdError) -> Answer? {
            guard let value = fields[key], value != .null else { return nil }
            return try child(value, key)
        }

        func malformed(_ problem: String) -> EtcdError {
            EtcdError.malformed(endpoint: endpoint, detail: "\(path) \(problem)")
        }

        /// A 64-bit integer: a string of digits (or, leniently, a JSON number); missing is 0.
        func int64(_ key: String) throws(EtcdError) -> Int64 {
            switch fields[key] {
            case nil, .null?: return 0
            case .string(let text)?:
                guard let number = Int64(text) else { throw malformed("\(key) is not a 64-bit integer") }
                return number
            case .number(let number)?:
                guard let exact = Int64(exactly: number) else { throw malformed("\(key) is not an integer") }
                return exact
            default: throw malformed("\(key) is not a number")
            }
        }

        func bool(_ key: String) throws(EtcdError) -> Bool {
            switch fields[key] {
            case nil, .null?: return false
            case .bool(let value)?: return value
            default: throw malformed("\(key) is not true or false")
            }
        }

        func string(_ key: String) throws(EtcdError) -> String? {
            switch fields[key] {
            case nil, .null?: return nil
            case .string(let value)?: return value
            default: throw malformed("\(key) is not a string")
            }
        }

        /// Base64 bytes; missing is empty. Never quotes the text (it may be a secret's ciphertext).
        func base64(_ key: String) throws(EtcdError) -> [UInt8] {
            guard let text = try string(key) else { return [] }
            guard let data = Data(base64Encoded: text) else { throw malformed("\(key) is not base64") }
            return Array(data)
        }

        func array(_ key: String) throws(EtcdError) -> [JSONValue] {
            switch fields[key] {
            case nil, .null?: return []
            case .array(let values)?: return values
            default: throw malformed("\(key) is not an array")
            }
        }

        /// `header.revision`, the store's revision when the request was served.
        func revision() throws(EtcdError) -> Int64 {
            try object("header")?.int64("revision") ?? 0
        }
    }
}
