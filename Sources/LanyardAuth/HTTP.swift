import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport

/// One HTTP request to a provider.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: URL
    public var headers: [String: String]
    public var body: Data?

    public init(method: String = "GET", url: URL, headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// A POST with a JSON body.
    public static func json(_ url: URL, _ body: JSONValue, headers: [String: String] = [:]) -> HTTPRequest {
        HTTPRequest(
            method: "POST",
            url: url,
            headers: headers.merging(["Content-Type": "application/json", "Accept": "application/json"]) { $1 },
            body: Data(body.serialized().utf8)
        )
    }

    /// A POST with an `application/x-www-form-urlencoded` body.
    public static func form(_ url: URL, _ fields: [(String, String)]) -> HTTPRequest {
        let body = fields.map { key, value in
            key.percentEncodedUnreserved() + "=" + value.percentEncodedUnreserved()
        }.joined(separator: "&")
        return HTTPRequest(
            method: "POST",
            url: url,
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
            body: Data(body.utf8)
        )
    }
}

/// The one check of every header Lanyard sends. Values come from outside (an account id from a
/// token's claims, an event id a server chose): a CR or LF in one would add headers of the
/// server's choosing, so such a request is refused, never sent with the value dropped or cut.
package enum HTTPHeaderRules {
    /// Refuses a name that is not an RFC 9110 token, or a value with a control character (any
    /// byte below 0x20 but tab, or DEL). The value is never quoted in the error.
    package static func check(_ name: String, _ value: String) throws(ClientError) {
        guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
            throw .invalidHeader(name: TerminalText.escaped(name), problem: "is not a valid header name")
        }
        for (position, byte) in value.utf8.enumerated() where (byte < 0x20 && byte != 0x09) || byte == 0x7F {
            throw .invalidHeader(name: name, problem: "has a control character (byte \(position + 1))")
        }
    }

    /// Checks every header of a request.
    package static func check(_ headers: some Sequence<(String, String)>) throws(ClientError) {
        for (name, value) in headers { try check(name, value) }
    }

    private static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
    }
}

extension Credential {
    /// The headers that send this credential: `Authorization: Bearer` and, when the account has
    /// one, `ChatGPT-Account-Id`, checked by ``HTTPHeaderRules``.
    package func authorizationHeaders() throws(ClientError) -> [(String, String)] {
        var headers = [("Authorization", "Bearer \(tokens.accessToken)")]
        if let account = account.accountID { headers.append(("ChatGPT-Account-Id", account)) }
        try HTTPHeaderRules.check(headers)
        return headers
    }
}

/// A provider's answer.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    public var body: Data

    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public var isSuccess: Bool { (200..<300).contains(status) }
    /// The body parsed as JSON, or nil.
    public var json: JSONValue? { try? JSONValue.parse(body) }
}

/// Why a request got no HTTP answer (or one too large to read). Never contains request bodies.
public struct TransportError: Error, Equatable, Sendable, LocalizedError {
    public enum Kind: String, Sendable { case timedOut, connectionFailed, tooLarge, cancelled, other }
    public let kind: Kind
    public let message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var errorDescription: String? { message }
}

/// Sends HTTP requests. Injected so the auth layer is tested against real servers on loopback and
/// the CLI against anything.
public protocol HTTPTransport: Sendable {
    /// Sends `request`; throws ``TransportError`` when no complete answer arrives.
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

/// How the auth layer waits (injected so tests control time instead of sleeping).
package protocol Sleeper: Sendable {
    func sleep(seconds: TimeInterval) async throws
}

/// Real waiting, cancellable.
package struct TaskSleeper: Sleeper {
    package init() {}
    package func sleep(seconds: TimeInterval) async throws {
        guard seconds > 0 else { return }
        // At most about 30 years: a longer wait is not one, and UInt64 nanoseconds end at 584 years.
        try await Task.sleep(nanoseconds: UInt64(min(seconds, 1e9) * 1_000_000_000))
    }
}

/// Retries `429 Too Many Requests` by a ``BackoffPolicy``: the Chappie SDK's 2 retries, 1 s initial,
/// 30 s cap, jitter, `Retry-After` honoured. After the last retry the 429 is returned as is.
package struct BackoffTransport: HTTPTransport {
    package let base: any HTTPTransport
    package let policy: BackoffPolicy
    package let clock: any WallClock
    package let sleeper: any Sleeper
    package let random: @Sendable () -> Double
    /// Called before each wait with the retry number and the delay (for progress and tests).
    package let onRetry: @Sendable (Int, TimeInterval) -> Void

    package init(
        base: any HTTPTransport,
        policy: BackoffPolicy,
        clock: any WallClock = SystemClock(),
        sleeper: any Sleeper = TaskSleeper(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        onRetry: @escaping @Sendable (Int, TimeInterval) -> Void = { _, _ in }
    ) {
        self.base = base
        self.policy = policy
        self.clock = clock
        self.sleeper = sleeper
        self.random = random
        self.onRetry = onRetry
    }

    package func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var retry = 0
        while true {
            let response = try await base.send(request)
            guard response.status == 429 else { return response }
            let retryAfter = response.headers["retry-after"].flatMap {
                BackoffPolicy.retryAfterSeconds($0, now: clock.now())
            }
            guard let delay = policy.delay(beforeRetry: retry, retryAfter: retryAfter, unitRandom: random()) else {
                return response
            }
            onRetry(retry, delay)
            do { try await sleeper.sleep(seconds: delay) } catch {
                throw TransportError(.cancelled, "request cancelled")
            }
            retry += 1
        }
    }
}

/// Module facts.
package enum LanyardAuth {
    package static let version = "0.1.0"
}
