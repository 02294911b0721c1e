import Foundation

extension OAuthTestServer {
    /// Every refresh and access token this server ever issued (`/_test/tokens`), whatever its state.
    package func issuedTokens() async throws -> (refresh: [String], access: [String]) {
        let families = try await get("/_test/tokens")["families"] as? [[String: Any]] ?? []
        let refresh = families.flatMap {
            ($0["refresh_tokens"] as? [[String: Any]] ?? []).compactMap { $0["refresh_token"] as? String }
        }
        let access = families.flatMap {
            ($0["access_tokens"] as? [[String: Any]] ?? []).compactMap { $0["access_token"] as? String }
        }
        return (refresh, access)
    }
}

/// What a test finds at rest: the files under `root` (but those under `except`, relative paths)
/// that hold any of `secrets` in clear, each named with the first secret found (its first 12
/// characters, never the whole secret).
package func filesHoldingInClear(_ secrets: [String], under root: String, except: [String] = []) -> [String] {
    let markers = secrets.filter { !$0.isEmpty }.map { (Data($0.utf8), String($0.prefix(12))) }
    var found: [String] = []
    let enumerator = FileManager.default.enumerator(atPath: root)
    while let relative = enumerator?.nextObject() as? String {
        guard !except.contains(where: { relative == $0 || relative.hasPrefix($0 + "/") }) else { continue }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory),
            !isDirectory.boolValue,
            let bytes = FileManager.default.contents(atPath: root + "/" + relative)
        else { continue }
        if let hit = markers.first(where: { bytes.range(of: $0.0) != nil }) {
            found.append("\(relative) (\(hit.1)…)")
        }
    }
    return found.sorted()
}

/// The first line of every binary age v1 file.
package let ageHeaderLine = Data("age-encryption.org/v1\n".utf8)
