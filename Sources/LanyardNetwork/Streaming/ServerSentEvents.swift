import LanyardAuth

/// One server-sent event.
package struct ServerSentEvent: Hashable, Sendable {
    /// The `event:` field; `message` when the server sent none.
    package var type: String
    /// The `data:` lines, joined with newlines.
    package var data: [UInt8]
    /// The last `id:` seen in the stream up to this event.
    package var lastEventID: String?

    package init(type: String = "message", data: [UInt8], lastEventID: String? = nil) {
        self.type = type
        self.data = data
        self.lastEventID = lastEventID
    }
}

/// An incremental parser of the `text/event-stream` format (WHATWG HTML § 9.2): feed it bytes as
/// they arrive, in pieces of any size, and it returns the events they complete. Lines end with CR,
/// LF or CRLF (also when CR and LF arrive in different pieces); comments are skipped; `retry:` and
/// `id:` are kept for reconnecting; one event may hold at most `maxEventBytes`.
package struct ServerSentEventParser: Sendable {
    /// The cap on one event (its lines and data) unless the caller sets another.
    package static let defaultMaxEventBytes = 10 << 20

    package let maxEventBytes: Int
    /// The reconnection delay the server asked for with `retry:`, in milliseconds.
    package private(set) var retryMilliseconds: Int?
    /// The last `id:` the server sent, for `Last-Event-ID` when reconnecting.
    package private(set) var lastEventID: String?

    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var hasData = false
    private var eventType: String?
    private var sawCR = false
    private var firstLine = true

    package init(maxEventBytes: Int = ServerSentEventParser.defaultMaxEventBytes) {
        self.maxEventBytes = maxEventBytes
    }

    /// Parses `bytes` and returns the events they complete, in order.
    /// - Throws: ``ClientError/invalidResponse(_:)`` when an event grows past `maxEventBytes`.
    package mutating func feed(_ bytes: some Collection<UInt8>) throws(ClientError) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            if sawCR {
                sawCR = false
                if byte == 0x0A {
                    index = bytes.index(after: index)
                    continue
                }
            }
            if byte == 0x0A || byte == 0x0D {
                sawCR = byte == 0x0D
                if let event = endLine() { events.append(event) }
                index = bytes.index(after: index)
                continue
            }
            // Copy the run up to the next line end in one piece.
            let runEnd = bytes[index...].firstIndex(where: { $0 == 0x0A || $0 == 0x0D }) ?? bytes.endIndex
            let run = bytes[index..<runEnd]
            guard line.count + data.count + run.count <= maxEventBytes else {
                throw ClientError.invalidResponse(
                    "a server-sent event is larger than the \(maxEventBytes / (1 << 20)) MB limit"
                )
            }
            line.append(contentsOf: run)
            index = runEnd
        }
        return events
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if firstLine {
            firstLine = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        }
        if line.isEmpty { return dispatch() }
        if line[0] == 0x3A { return nil }  // ":" starts a comment
        let colon = line.firstIndex(of: 0x3A)
        let field = colon.map { Array(line[..<$0]) } ?? line
        var valueStart = colon.map { $0 + 1 } ?? line.count
        if valueStart < line.count && line[valueStart] == 0x20 { valueStart += 1 }
        let value = line[valueStart...]
        switch field {
        case Array("data".utf8):
            data.append(contentsOf: value)
            data.append(0x0A)
            hasData = true
        case Array("event".utf8):
            eventType = String(decoding: value, as: UTF8.self)
        case Array("id".utf8):
            if !value.contains(0) { lastEventID = String(decoding: value, as: UTF8.self) }
        case Array("retry".utf8):
            if !value.isEmpty, value.allSatisfy({ (0x30...0x39).contains($0) }),
                let ms = Int(String(decoding: value, as: UTF8.self))
            {
                retryMilliseconds = ms
            }
        default:
            break  // unknown fields are ignored, as the format says
        }
        return nil
    }

    private mutating func dispatch() -> ServerSentEvent? {
        defer {
            data.removeAll(keepingCapacity: false)
            hasData = false
            eventType = nil
        }
        guard hasData else { return nil }
        data.removeLast()  // the newline after the last data line
        return ServerSentEvent(
            type: eventType.flatMap { $0.isEmpty ? nil : $0 } ?? "message",
            data: data,
            lastEventID: lastEventID
        )
    }
}
