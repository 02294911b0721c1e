// libFuzzer harness for the store JSON (the document inside store.age, the registry's JSON
// reader, and the versioned credential). Built by scripts/fuzz.sh against LanyardCore.
// Beyond "does not crash": a document that parses re-serializes to JSON that parses to the same
// value, and a credential that decodes round-trips through its own encoding.

import Foundation
import LanyardCore
import LanyardSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStore(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: data, count: size))
    guard let value = try? JSONValue.parse(bytes) else { return 0 }
    guard (try? JSONValue.parse(Data(value.serialized().utf8))) == value else {
        fatalError("serialize → parse changed the document")
    }
    var candidates = [value]
    if case .object(let slots)? = value["slots"] { candidates += slots.values }
    for candidate in candidates {
        guard let fields = try? JSONFields(candidate), let credential = try? Credential(json: fields) else { continue }
        guard (try? Credential.decode(credential.jsonData(), source: "fuzz")) == credential else {
            fatalError("credential round trip changed it")
        }
    }
    return 0
}
