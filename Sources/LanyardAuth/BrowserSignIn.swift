import Age
import FoundationEssentials
import LanyardCore
import LanyardSupport

/// A PKCE pair (RFC 7636, method S256): the verifier stays here, the challenge goes in the
/// authorize URL, and the token endpoint checks one against the other.
package struct PKCE: Sendable {
    /// 64 random bytes, base64url without padding (86 characters), as Codex makes it.
    package let verifier: String
    /// base64url-no-pad(SHA-256(verifier)).
    package let challenge: String

    package init() { self.init(verifier: Base64URL.encode(Self.randomBytes(64))) }

    package init(verifier: String) {
        self.verifier = verifier
        challenge = Base64URL.encode(Data(SHA256.digest(Array(verifier.utf8))))
    }

    /// A new `state`: 32 random bytes, base64url without padding.
    package static func randomState() -> String { Base64URL.encode(randomBytes(32)) }

    /// Bytes from the system's CSPRNG (getrandom(2) behind `SystemRandomNumberGenerator`).
    static func randomBytes(_ count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }
}

/// Where a provider's browser sign-in sends the browser back: `http://HOST:PORT/PATH`, PORT the
/// first of `ports` that is free on both 127.0.0.1 and ::1 (0: any).
package struct CallbackAddress: Sendable, Hashable {
    package var host: String
    package var path: String
    package var ports: [UInt16]

    package init(host: String, path: String, ports: [UInt16]) {
        self.host = host
        self.path = path
        self.ports = ports
    }

    package func redirectURI(port: UInt16) -> String { "http://\(host):\(port)\(path)" }
}

/// A provider that signs in through the browser: the authorization-code grant with PKCE and a
/// loopback redirect (RFC 8252).
package protocol BrowserSignInProvider: DeviceCodeProvider {
    /// Whether this provider's configuration allows a browser sign-in.
    var offersBrowserSignIn: Bool { get }
    /// The redirect the provider has registered (ChatGPT: only `localhost:1455` and `:1457`).
    var callbackAddress: CallbackAddress { get }
    /// The URL the browser opens.
    func authorizationURL(redirectURI: String, codeChallenge: String, state: String) throws(AuthError) -> URL
    /// Exchanges the code from the callback (RFC 6749 §4.1.3, form-encoded, with the verifier).
    func exchange(code: String, verifier: String, redirectURI: String) async throws(AuthError) -> TokenResponse
}

/// What a browser sign-in shows: the URL to open, and whether a pasted redirect is read.
package struct BrowserAuthorization: Sendable, Hashable {
    package var url: URL
    package var redirectURI: String
    /// Whether the flow reads the redirect's address from standard input (no browser here).
    package var readsPastedRedirect: Bool
}

/// How a sign-in gets the user's approval.
package enum SignInMethod: Sendable {
    case deviceCode
    case browser(BrowserSignInOptions)
}

/// A browser sign-in's options.
package struct BrowserSignInOptions: Sendable {
    /// The ports to listen on instead of the provider's (tests, which run in parallel).
    package var ports: [UInt16]?
    /// Reads one line that may hold the redirect's address (the browser on another machine
    /// lands on a page that does not load; its address holds the code); nil at the end of input.
    /// Blocking: it runs on the blocking executor and is left behind, still waiting, when the
    /// sign-in ends the other way.
    package var pastedLine: (@Sendable () throws -> String?)?

    package init(ports: [UInt16]? = nil, pastedLine: (@Sendable () throws -> String?)? = nil) {
        self.ports = ports
        self.pastedLine = pastedLine
    }
}

/// The browser sign-in: PKCE and `state`, a listener on 127.0.0.1 and ::1 serving the callback once, and
/// (when given) a pasted redirect racing it; then the code exchange. Like ``SignInFlow`` it
/// stores nothing: `onApproved` does, before the browser is told it worked.
package struct BrowserSignInFlow: Sendable {
    package let provider: any BrowserSignInProvider
    package let clock: any WallClock
    package let sleeper: any Sleeper
    package var options: BrowserSignInOptions
    /// How long the listener waits for the callback.
    package var maximumDuration: TimeInterval

    package init(
        provider: any BrowserSignInProvider,
        options: BrowserSignInOptions = BrowserSignInOptions(),
        clock: any WallClock = SystemClock(),
        sleeper: any Sleeper = TaskSleeper()
    ) {
        self.provider = provider
        self.options = options
        self.clock = clock
        self.sleeper = sleeper
        maximumDuration = provider.maximumPollingDuration
    }

    /// Runs the flow; `events` sees `signingIn`, the ``BrowserAuthorization``, callbacks that were
    /// refused, and the end state, as ``SignInFlow/run(events:onApproved:)`` does.
    package func run(
        events: @Sendable (SignInEvent) -> Void,
        onApproved: (TokenResponse, AccountInfo) async throws -> Void = { _, _ in }
    ) async throws -> (TokenResponse, AccountInfo) {
        events(.state(.signingIn))
        let tokens: TokenResponse
        let account: AccountInfo
        let connection: CallbackConnection?
        do {
            (tokens, account, connection) = try await approve(events: events)
        } catch {
            events(.state(SignInFlow.finalState(for: error)))
            throw error
        }
        do { try await onApproved(tokens, account) } catch {
            await Self.answer(connection, 500, .failed("Lanyard could not store the sign-in: see the terminal."))
            events(.state(.failed(error.userFacingDescription)))
            throw error
        }
        await Self.answer(connection, 200, .signedIn)
        events(.state(.signedIn(expiresAt: tokens.expiresAt(now: clock.now()))))
        return (tokens, account)
    }

    /// How the wait ended: a code with our `state` (and the browser's connection when it came to
    /// the listener), the deadline, or standard input at its end (the listener still waits).
    private enum Arrival: Sendable {
        case code(String, CallbackConnection?)
        case timedOut
        case pasteEnded
    }

    private func approve(
        events: @Sendable (SignInEvent) -> Void
    ) async throws(AuthError) -> (TokenResponse, AccountInfo, CallbackConnection?) {
        if Task.isCancelled { throw .cancelledSignIn }
        let address = provider.callbackAddress
        let listener = try CallbackListener.bind(ports: options.ports ?? address.ports)
        defer { listener.close() }
        let pkce = PKCE()
        let state = PKCE.randomState()
        let redirectURI = address.redirectURI(port: listener.port)
        let url = try provider.authorizationURL(redirectURI: redirectURI, codeChallenge: pkce.challenge, state: state)
        events(
            .browserAuthorization(
                BrowserAuthorization(url: url, redirectURI: redirectURI, readsPastedRedirect: options.pastedLine != nil)
            )
        )
        let arrival: Arrival
        do {
            // The racing tasks end before this call returns, so the events closure outlives none of them.
            arrival = try await withoutActuallyEscaping(events) { events in
                try await withThrowingTaskGroup(of: Arrival.self) { group in
                    let rejected: @Sendable (String) -> Void = { events(.callbackRejected($0)) }
                    group.addTask {
                        try await Self.listen(listener, path: address.path, state: state, rejected: rejected)
                    }
                    if let read = options.pastedLine {
                        group.addTask {
                            try await Self.readPasted(read, state: state, rejected: rejected) ?? .pasteEnded
                        }
                    }
                    let wait = maximumDuration
                    let sleeper = self.sleeper
                    group.addTask {
                        try await sleeper.sleep(seconds: wait)
                        return .timedOut
                    }
                    defer { group.cancelAll() }
                    while let next = try await group.next() {
                        if case .pasteEnded = next { continue }
                        return next
                    }
                    throw AuthError.cancelledSignIn
                }
            }
        } catch let error as AuthError {
            throw error
        } catch {
            throw Task.isCancelled || error is CancellationError
                ? .cancelledSignIn : .unknown(error.userFacingDescription)
        }
        guard case .code(let code, let connection) = arrival else { throw .callbackTimeout }
        if Task.isCancelled {
            await Self.answer(
                connection,
                500,
                .failed("The sign-in was cancelled in the terminal; nothing was stored.")
            )
            throw .cancelledSignIn
        }
        do {
            let tokens = try await provider.exchange(code: code, verifier: pkce.verifier, redirectURI: redirectURI)
            return (tokens, try provider.accountInfo(for: tokens), connection)
        } catch {
            await Self.answer(connection, 500, .failed("Lanyard could not finish the sign-in: see the terminal."))
            throw error
        }
    }

    static func answer(_ connection: CallbackConnection?, _ status: Int, _ page: CallbackPage) async {
        guard let connection else { return }
        await BlockingExecutor.shared.run { connection.respond(status: status, page: page) }
    }

    /// What a callback's parameters say.
    enum Verdict: Equatable {
        case code(String)
        /// Not for this sign-in (no `state`, or another one's): ignored, the sign-in goes on.
        case notOurs
        /// Ours, and the sign-in ends with this error (the server's `error`, or no code).
        case failed(AuthError)
    }

    /// Judges a callback's query: `state` first (RFC 6749 §10.12: nothing else is believed
    /// from a callback that is not ours), then `error`, then `code`.
    static func verdict(_ query: [String: String], state: String) -> Verdict {
        guard let got = query["state"], !got.isEmpty, got == state else { return .notOurs }
        if let error = query["error"], !error.isEmpty {
            let description = query["error_description"].map { ": " + ClientError.clip(TerminalText.escaped($0)) } ?? ""
            return .failed(.authorizationDenied(ClientError.clip(TerminalText.escaped(error)) + description))
        }
        guard let code = query["code"], !code.isEmpty else {
            return .failed(.invalidResponse("the sign-in callback carries no code"))
        }
        return .code(code)
    }

    /// Serves requests until the callback with our `state` comes: other paths get 404, other
    /// states 400 (and `rejected` hears of it); an error callback gets an error page and ends it.
    private static func listen(
        _ listener: CallbackListener,
        path: String,
        state: String,
        rejected: @escaping @Sendable (String) -> Void
    ) async throws -> Arrival {
        while true {
            let connection = try await withTaskCancellationHandler {
                try await BlockingExecutor.shared.run(.ownThread) { try listener.next() }
            } onCancel: {
                listener.stop()
            }
            guard let request = connection.request, request.path == path else {
                await answer(connection, 404, .notFound)
                continue
            }
            guard request.method == "GET" else {
                await answer(connection, 405, .badRequest)
                continue
            }
            switch verdict(request.query, state: state) {
            case .notOurs:
                rejected(
                    "a request to the callback did not carry this sign-in's state; it was refused and changed nothing"
                )
                await answer(connection, 400, .stateMismatch)
            case .failed(let error):
                await answer(connection, 400, .failed("The sign-in did not complete: see the terminal."))
                throw error
            case .code(let code):
                return .code(code, connection)
            }
        }
    }

    /// Reads pasted lines until one is the redirect with our `state`; nil at the end of input.
    private static func readPasted(
        _ read: @escaping @Sendable () throws -> String?,
        state: String,
        rejected: @escaping @Sendable (String) -> Void
    ) async throws -> Arrival? {
        while true {
            let line: String?
            do { line = try await abandonable(read) } catch is CancellationError { throw CancellationError() } catch {
                rejected(
                    "standard input could not be read (\(error.userFacingDescription)); waiting for the browser only"
                )
                return nil
            }
            guard let line else { return nil }
            let text = line.trimmingSpaces()
            if text.isEmpty { continue }
            guard let query = pastedQuery(text) else {
                rejected(
                    "the pasted text is not the address the browser was sent to "
                        + "(it has no ?code=…&state=…); paste the whole address"
                )
                continue
            }
            switch verdict(query, state: state) {
            case .notOurs:
                rejected(
                    "the pasted address does not carry this sign-in's state (an older sign-in's?); nothing changed"
                )
            case .failed(let error): throw error
            case .code(let code): return .code(code, nil)
            }
        }
    }

    /// The query of a pasted redirect address (`http://localhost:1455/auth/callback?code=…`, or
    /// just its `?code=…&state=…`); nil when there is none.
    static func pastedQuery(_ text: String) -> [String: String]? {
        guard let mark = text.firstIndex(of: "?") else { return nil }
        var query = text[text.index(after: mark)...]
        if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
        let parameters = CallbackRequest.parameters(String(query))
        return parameters.isEmpty ? nil : parameters
    }

    /// Runs blocking `read` on the blocking executor and returns its result, or throws
    /// `CancellationError` as soon as the task is cancelled, leaving `read` to finish on its own
    /// (a read of standard input cannot be interrupted; the process ends it).
    private static func abandonable(_ read: @escaping @Sendable () throws -> String?) async throws -> String? {
        enum Wait {
            case idle
            case waiting(CheckedContinuation<String?, Error>)
            case done
        }
        let wait = Locked(Wait.idle)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String?, Error>) in
                let cancelledAlready = wait.withLock { state -> Bool in
                    if case .done = state { return true }
                    state = .waiting(continuation)
                    return false
                }
                if cancelledAlready {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                BlockingExecutor.shared.submitOnOwnThread {  // waits for the user
                    let result = Result { try read() }
                    let waiting = wait.withLock { state -> CheckedContinuation<String?, Error>? in
                        defer { state = .done }
                        if case .waiting(let c) = state { return c }
                        return nil
                    }
                    waiting?.resume(with: result)
                }
            }
        } onCancel: {
            let waiting = wait.withLock { state -> CheckedContinuation<String?, Error>? in
                defer { state = .done }
                if case .waiting(let c) = state { return c }
                return nil
            }
            waiting?.resume(throwing: CancellationError())
        }
    }
}
