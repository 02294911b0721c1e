// libFuzzer harness for the age header parser (and the decrypt path behind it).
// Built by scripts/fuzz.sh against the Age module, built for testing so that its
// internal API is reachable. Properties checked beyond "does not crash":
//   * a header that parses re-encodes to exactly the bytes it was parsed from
//     (the parser is canonical, which the MAC-over-raw-bytes check relies on);
//   * decryption never returns plaintext together with an error it should not.

import Foundation

@testable import Age

private let identities: [any Identity] = {
    var ids: [any Identity] = [X25519Identity.generate()]
    // A tiny work-factor cap keeps scrypt cheap: larger factors must be refused.
    if let s = try? ScryptIdentity(passphrase: "fuzz", maxWorkFactor: 4) { ids.append(s) }
    return ids
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHeader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let buf = UnsafeRawBufferPointer(start: data, count: size)
    do throws(AgeError) {
        let header = try Header.parse(buf)
        var encoded = Header.encodeWithoutMAC(header.stanzas)
        guard encoded.elementsEqual(buf.prefix(header.macInputLength)) else {
            fatalError("header re-encoding differs from the parsed bytes")
        }
        encoded += Array(" \(Sodium.base64String(header.mac))\n".utf8)
        guard encoded.count == header.payloadOffset, encoded.elementsEqual(buf.prefix(header.payloadOffset)) else {
            fatalError("MAC line re-encoding differs from the parsed bytes")
        }
        for id in identities { _ = try? id.unwrap(stanzas: header.stanzas) }
    } catch {
        _ = error.description  // every error must render
    }
    let result = Age.decryptReleasing(Data(buf), with: identities)
    if let error = result.error {
        _ = error.description
    }
    return 0
}
