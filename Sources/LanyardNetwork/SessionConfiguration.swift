import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The URLSession configurations Lanyard makes, and the folders FoundationNetworking would make.
///
/// On Linux the first `URLSessionConfiguration.default` (which `.ephemeral` starts from) creates
/// the shared cookie store, which makes `$XDG_DATA_HOME/<program folder's name>`, and the shared
/// URL cache, which makes `$XDG_CACHE_HOME/org.swift.foundation.URLCache/<program>`; `.ephemeral`
/// then makes a second cache with the same folder. Lanyard uses neither: its configurations come
/// from `.default` with no cache, no cookies and no credential storage, and `lanyard-net` calls
/// ``makeFoundationStoresWithoutFolders()`` before anything else, so the shared stores are made
/// where no folder can be.
package enum SessionConfiguration {
    /// A configuration that keeps nothing between requests: no URL cache (in memory or on disk),
    /// no cookies, no credential storage. `requestTimeout` is the longest wait for a byte;
    /// `resourceTimeout` the longest a whole request may take.
    static func make(requestTimeout: TimeInterval, resourceTimeout: TimeInterval) -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.default
        configuration.timeoutIntervalForRequest = requestTimeout
        configuration.timeoutIntervalForResource = resourceTimeout
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.httpCookieStorage = nil
        configuration.urlCredentialStorage = nil
        return configuration
    }

    /// Makes FoundationNetworking's shared stores (cookies, credentials, URL cache) with
    /// `XDG_DATA_HOME` and `XDG_CACHE_HOME` pointing below /dev/null, where their folders cannot be
    /// created (they are then kept in memory, unused), and puts both variables back as they were.
    ///
    /// Changing the environment is only safe while no other thread runs: call this first thing in
    /// a program's `main`, before any thread starts and before anything reads those variables.
    package static func makeFoundationStoresWithoutFolders() {
        let names = ["XDG_DATA_HOME", "XDG_CACHE_HOME"]
        let saved = names.map { name in (name, getenv(name).map { String(cString: $0) }) }
        for name in names { setenv(name, "/dev/null/lanyard-no-folder", 1) }
        _ = URLSessionConfiguration.default
        for (name, value) in saved {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
    }
}
