// libFuzzer harness for the credential-helper protocols Lanyard reads from other programs: git's
// credential protocol, Docker's server URLs and store input, KUBERNETES_EXEC_INFO, netrc fields and
// JWT claims. Built by scripts/fuzz.sh against LanyardIntegrations and the modules below it.
// Beyond "does not crash": a git request's attributes never contain a NUL or a newline, nor
// does Docker's input, a Docker host has no scheme, slash or space, and a netrc line that is
// written splits back into exactly its six words.

import Foundation
import LanyardCore
import LanyardIntegrations
import LanyardSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHelpers(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)

    // As the helper reads its standard input: bytes, split at every LF byte by TextInput.
    if let request = try? GitCredential.read(TextInput(bytes)) {
        for (key, value) in request.attributes
        where key.unicodeScalars.contains("\0") || value.unicodeScalars.contains("\0")
            || value.unicodeScalars.contains("\n")
        {
            fatalError("git attribute \(key) kept a NUL or newline")
        }
        _ = (request.protocol, request.host, request.path)
    }

    if let host = try? DockerCredential.host(ofServerURL: text) {
        if host.isEmpty || host.contains("/") || host.contains(" ") || host.contains("://") {
            fatalError("bad docker host \(host)")
        }
    }
    try? DockerCredential.checkStoreInput(bytes)
    if let input = try? DockerCredential.readInput(TextInput(bytes)), input.unicodeScalars.contains("\0") {
        fatalError("docker input kept a NUL")
    }
    _ = try? KubeExecCredential.apiVersion(execInfo: text)

    let words = text.split(separator: " ", maxSplits: 2).map(String.init)
    if words.count == 3, let line = try? Netrc.line(host: words[0], login: words[1], password: words[2]) {
        // As netrc readers do: on white-space bytes (not Characters, which can glue a combining
        // mark to the space before it).
        let split = Array(line.utf8).split(whereSeparator: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D })
        if split.count != 6 { fatalError("netrc line splits into \(split.count) words") }
    }
    _ = try? JWTClaims(token: text)
    return 0
}
