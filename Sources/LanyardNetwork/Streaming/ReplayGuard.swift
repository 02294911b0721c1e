import LanyardAuth

/// Keeps a stream's text exactly-once across reconnections. After a reconnect the server sends the
/// response again from the start, cut into deltas that need not match the first delivery's; the
/// guard compares that replay byte for byte with what was already delivered, emits only what is
/// new, and stops the stream when the replay contradicts it.
package struct ReplayGuard: Sendable {
    /// Every byte of text delivered so far.
    package private(set) var delivered: [UInt8] = []
    /// While replaying: how many delivered bytes the replay has matched.
    private var matched: Int?

    package init() {}

    /// The text delivered so far.
    package var deliveredText: String { String(decoding: delivered, as: UTF8.self) }

    /// Call when a new connection starts sending the response from its beginning.
    package mutating func beginReplay() {
        matched = delivered.isEmpty ? nil : 0
    }

    /// True while the current connection is still re-sending delivered text.
    package var isReplaying: Bool { matched != nil }

    /// The part of `delta` to deliver (nil when all of it was delivered before).
    /// - Throws: ``ClientError/streamingTransportReplayDiverged(_:)`` when `delta` contradicts the
    ///   delivered text.
    package mutating func accept(_ delta: String) throws(ClientError) -> String? {
        let bytes = Array(delta.utf8)
        guard let offset = matched else {
            delivered.append(contentsOf: bytes)
            return bytes.isEmpty ? nil : delta
        }
        let overlap = min(bytes.count, delivered.count - offset)
        guard bytes[..<overlap].elementsEqual(delivered[offset..<(offset + overlap)]) else {
            throw .streamingTransportReplayDiverged(deliveredText)
        }
        if offset + overlap < delivered.count {
            matched = offset + overlap
            return nil
        }
        // The replay has caught up; the rest is new. Delivered text ends on a scalar boundary and
        // the replay matched it byte for byte, so the cut is on a scalar boundary too.
        matched = nil
        let fresh = bytes[overlap...]
        guard !fresh.isEmpty else { return nil }
        delivered.append(contentsOf: fresh)
        return String(decoding: fresh, as: UTF8.self)
    }

    /// Call when the response completes: a replay that ended before catching up contradicts the
    /// delivered text.
    package func finish() throws(ClientError) {
        if matched != nil { throw .streamingTransportReplayDiverged(deliveredText) }
    }
}
