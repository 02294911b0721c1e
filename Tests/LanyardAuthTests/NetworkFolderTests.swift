import Foundation
import LanyardAuth
import LanyardTestSupport
import Testing

@testable import LanyardNetwork

/// The networking stack makes no folder of its own: FoundationNetworking's URL cache and cookie
/// store would make `$XDG_CACHE_HOME/org.swift.foundation.URLCache/lanyard-net` and
/// `$XDG_DATA_HOME/<program folder>` (`debug` here), world-writable under umask 000, the first
/// time a URLSession configuration is made.
@Suite struct NetworkFolderTests {
    /// Every folder under `root`, by path.
    func folders(under root: String) -> Set<String> {
        var found: Set<String> = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let path = enumerator?.nextObject() as? String {
            var st = stat()
            if lstat(root + "/" + path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR { found.insert(path) }
        }
        return found
    }

    @Test func requestsUnderUmask000MakeNoFolderButLanyardsOwn() async throws {
        let env = try await EmulatorHome(extraConfig: "[refresh]\nlead = 100000000\nlead-share = 1\n")
        try await env.signIn("work", email: "w@example.com")
        let root = env.home.root
        let before = folders(under: root)
        let umask000 = ["/bin/sh", "-c", "umask 000; exec \"$@\"", "sh"]
        // With XDG_CACHE_HOME set, and without (then ~/.cache); `refresh` also runs the refresh
        // worker, `usage` a request with the slot's token (both on libcurl), `ask` over SSE a
        // URLSession.
        for extra in [["XDG_CACHE_HOME": root + "/cache"], [:]] {
            for args in [
                ["refresh", "work"], ["usage", "work"], ["ask", "--account", "work", "--transport", "sse", "hi"],
            ] {
                let out = try env.home.run(args, extraEnvironment: extra, launcher: umask000)
                #expect(out.status == 0, "\(args): \(out.stderr)")
            }
        }
        #expect(try await env.server.stat("refreshes_succeeded") >= 2, "the premise: the commands talked to the server")
        #expect(try await env.server.stat("usage_ok") >= 2)
        #expect(try await env.server.stat("stream.sse_requests") >= 2)

        let made = folders(under: root).subtracting(before)
        #expect(!FileManager.default.fileExists(atPath: root + "/cache"), "made: \(made.sorted())")
        #expect(!FileManager.default.fileExists(atPath: root + "/home/.cache"), "made: \(made.sorted())")
        #expect(!FileManager.default.fileExists(atPath: root + "/home/.local"), "made: \(made.sorted())")
        // Lanyard's own folders are all that is new, and none of them is open to others.
        for path in made {
            #expect(path.split(separator: "/").dropFirst().first == "lanyard", "\(path) was made")
            #expect(
                permissionBits(root + "/" + path) & 0o077 == 0,
                "\(path) is \(String(permissionBits(root + "/" + path), radix: 8))"
            )
        }
    }

    /// The configurations Lanyard's sessions use keep nothing between requests.
    @Test func sessionConfigurationsKeepNothing() {
        let configuration = SessionConfiguration.make(requestTimeout: 7, resourceTimeout: 9)
        #expect(configuration.urlCache == nil && configuration.requestCachePolicy == .reloadIgnoringLocalCacheData)
        #expect(configuration.httpCookieStorage == nil && configuration.urlCredentialStorage == nil)
        #expect(configuration.httpCookieAcceptPolicy == .never && !configuration.httpShouldSetCookies)
        #expect(configuration.timeoutIntervalForRequest == 7 && configuration.timeoutIntervalForResource == 9)
    }
}
