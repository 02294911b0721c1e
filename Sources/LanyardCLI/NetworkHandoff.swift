import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardSupport
import LanyardSystem

/// `lanyard` links no HTTP stack (FoundationNetworking costs ~10 ms at every start); commands that
/// talk to a provider replace the process with `lanyard-net`, the same CLI with HTTP. The
/// process id, streams and signals stay the same.
enum NetworkHandoff {
    static func currentExecutable() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// `lanyard-net` beside this binary (a build folder) or in `../lib/lanyard/` (an install).
    static func binary() -> String {
        let dir = PathText.parent(of: currentExecutable())
        for candidate in [dir + "/lanyard-net", dir + "/../lib/lanyard/lanyard-net"] where access(candidate, X_OK) == 0
        {
            return candidate
        }
        return dir + "/../lib/lanyard/lanyard-net"
    }

    /// The `lanyard` people run, from either binary (the inverse of ``binary()``): this one, or
    /// in lanyard-net the `lanyard` beside it (a build folder) or in `../../bin/` (an install).
    static func frontExecutable() -> String {
        let current = currentExecutable()
        guard PathText.lastComponent(of: current) == "lanyard-net" else { return current }
        let dir = PathText.parent(of: current)
        for candidate in [dir + "/lanyard", PathText.parent(of: PathText.parent(of: dir)) + "/bin/lanyard"]
        where access(candidate, X_OK) == 0 {
            return candidate
        }
        return current  // lanyard-net runs every command too
    }

    static func exec(_ argv: [String]) throws -> Never {
        let path = binary()
        let args = [path] + argv
        let pointers = args.map { strdup($0) } + [nil]
        execv(path, pointers)
        let reason = SystemCallError.reason()
        for pointer in pointers { free(pointer) }
        throw NetworkUnavailable(detail: "cannot run \(path): \(reason) (is Lanyard fully installed?)")
    }
}

/// The transport of a binary without HTTP; never reached, since network commands hand off first.
struct NoNetwork: HTTPTransport {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        throw TransportError(.other, "this binary has no HTTP support; run the command through lanyard")
    }
}

struct NetworkUnavailable: LanyardError {
    let detail: String
    var code: ErrorCode { .networkUnavailable }
    var errorDescription: String? { detail }
}
