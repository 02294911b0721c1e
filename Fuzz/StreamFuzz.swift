// libFuzzer harness for the streaming parsers: the server-sent-events parser, the backend event
// decoder and the replay guard. Built by scripts/fuzz.sh against LanyardNetwork
// (built for testing: the decoder is internal) and the modules below it.
// Beyond "does not crash": the events do not depend on how the bytes are cut into reads, and a
// replay of the delivered text, cut differently, delivers nothing twice and loses nothing.

import Foundation
import LanyardCore
import LanyardSupport

@testable import LanyardNetwork

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStream(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard !bytes.isEmpty else { return 0 }

    // The same stream in one read, and cut at every `cut`-th byte.
    let cut = Int(bytes[0] % 7) + 1
    var whole = ServerSentEventParser(maxEventBytes: 4096)
    var pieces = ServerSentEventParser(maxEventBytes: 4096)
    let all = try? whole.feed(bytes)
    var split: [ServerSentEvent]? = []
    var index = 0
    while index < bytes.count, split != nil {
        let end = min(bytes.count, index + cut)
        do { split! += try pieces.feed(bytes[index..<end]) } catch { split = nil }
        index = end
    }
    if let all, let split, all != split { fatalError("events depend on how the stream is cut") }
    for event in all ?? [] { _ = try? BackendEvent.decode(event.data, place: "event") }
    _ = try? BackendEvent.decode(bytes, place: "message")

    // Text cut into deltas one way, then replayed cut another way.
    let text = String(decoding: bytes, as: UTF8.self)
    let scalars = Array(text.unicodeScalars)
    func deltas(_ step: Int) -> [String] {
        stride(from: 0, to: scalars.count, by: step).map { start in
            String(String.UnicodeScalarView(scalars[start..<min(scalars.count, start + step)]))
        }
    }
    var guardian = ReplayGuard()
    var delivered = ""
    let first = deltas(cut)
    do {
        for delta in first.prefix(first.count / 2) { delivered += try guardian.accept(delta) ?? "" }
        guardian.beginReplay()
        for delta in deltas(cut + 2) { delivered += try guardian.accept(delta) ?? "" }
        try guardian.finish()
    } catch {
        fatalError("a faithful replay diverged: \(error)")
    }
    if delivered != text { fatalError("replay lost or repeated text") }
    return 0
}
