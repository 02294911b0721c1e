import FoundationEssentials

/// Which URLs may go without TLS: only those to this machine, where nothing crosses a network.
package enum Loopback {
    /// Whether `host` is this machine: `localhost`, 127.0.0.0/8 or `::1` (with or without brackets).
    package static func isLoopback(host: String) -> Bool {
        var h = host.lowercased()
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        if h == "localhost" || h == "::1" || h == "0:0:0:0:0:0:0:1" { return true }
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Whether `url` is `https://`, or `http://` to this machine: the only URLs Lanyard sends
    /// tokens to or hands to a browser.
    package static func isSecureOrLocal(_ url: URL) -> Bool {
        guard let host = url.host, !host.isEmpty else { return false }
        switch url.scheme?.lowercased() {
        case "https": return true
        case "http": return isLoopback(host: host)
        default: return false
        }
    }
}
