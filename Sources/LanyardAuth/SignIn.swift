import FoundationEssentials
import LanyardCore
import LanyardSupport

/// What a sign-in reports while it runs.
package enum SignInEvent: Sendable, Equatable {
    /// The Chappie auth-state sequence: signingIn → awaitingDeviceCode → signedIn / failed.
    case state(AuthState)
    /// The device code to show (with the URL that has it filled in, when the server gives one).
    case deviceCode(DeviceAuthorization)
    /// Still waiting; seconds until the code expires or Lanyard stops waiting.
    case waiting(remaining: TimeInterval)
    /// The server asked to poll less often; the new interval.
    case slowedDown(interval: TimeInterval)
    /// A poll failed in a way that passes (a server error, a dropped connection, no answer in
    /// time): the code is still good, so the next poll comes `after` seconds from now.
    case retrying(reason: String, after: TimeInterval)
    /// The slot is shared in a fleet: what became of the new sign-in there (after it was stored).
    case shared(FleetSignInOutcome)
    /// The slot asked for holds another account (`holds` names it), so the approved sign-in was
    /// kept in a new slot named after its email instead (after it was stored).
    case storedInNewSlot(requested: Slot, holds: String, slot: Slot)
    /// A browser sign-in's URL to open (``BrowserSignInFlow``), once its listener is up.
    case browserAuthorization(BrowserAuthorization)
    /// A browser sign-in refused a callback or a pasted address (another sign-in's `state`, not
    /// an address at all): why. Nothing changed; the sign-in goes on.
    case callbackRejected(String)
}

/// The device-code flow: request a code, show it, poll honouring `interval` and `slow_down`, and
/// return the tokens. Stores nothing: the caller stores the credential once it is in hand, so a
/// cancelled or failed sign-in leaves the slot as it was.
package struct SignInFlow: Sendable {
    package let provider: any DeviceCodeProvider
    package let clock: any WallClock
    package let sleeper: any Sleeper
    /// Seconds added to the interval on each `slow_down` (RFC 8628 says 5).
    package var slowDownIncrement: TimeInterval = 5
    /// The longest Lanyard waits for approval (the provider's limit by default).
    package var maximumDuration: TimeInterval
    /// The longest wait before the next poll after polls that failed in passing (each failure in a
    /// row doubles the wait, from twice the polling interval).
    package var maximumRetryDelay: TimeInterval = 60

    package init(
        provider: any DeviceCodeProvider,
        clock: any WallClock = SystemClock(),
        sleeper: any Sleeper = TaskSleeper()
    ) {
        self.provider = provider
        self.clock = clock
        self.sleeper = sleeper
        maximumDuration = provider.maximumPollingDuration
    }

    /// Runs the flow; `events` sees every state change. Task cancellation gives `cancelledSignIn`.
    /// `onApproved` receives the tokens (to store them) before `signedIn` is announced; if it
    /// throws, the flow ends in `failed` with that error.
    package func run(
        events: @Sendable (SignInEvent) -> Void,
        onApproved: (TokenResponse, AccountInfo) async throws -> Void = { _, _ in }
    ) async throws -> (TokenResponse, AccountInfo) {
        events(.state(.signingIn))
        let tokens: TokenResponse
        let account: AccountInfo
        do {
            (tokens, account) = try await poll(events: events)
        } catch {
            events(.state(Self.finalState(for: error)))
            throw error
        }
        do { try await onApproved(tokens, account) } catch {
            events(.state(.failed(error.userFacingDescription)))
            throw error
        }
        events(.state(.signedIn(expiresAt: tokens.expiresAt(now: clock.now()))))
        return (tokens, account)
    }

    /// The flow as a stream of auth states: `signingIn`, `awaitingDeviceCode`, then `signedIn` and
    /// the end of the stream, or the failure's state (`failed`, `reauthenticationRequired`, or
    /// `signedOut` when cancelled) and the ``AuthError``. `onApproved` receives the tokens (to store
    /// them) before `signedIn` is yielded; if it throws, the stream yields `failed` and throws that
    /// error. Ending the iteration (or cancelling the task that iterates) cancels the sign-in.
    package func states(
        onApproved: @escaping @Sendable (TokenResponse, AccountInfo) async throws -> Void = { _, _ in }
    )
        -> AsyncThrowingStream<AuthState, Error>
    {
        let (stream, continuation) = AsyncThrowingStream<AuthState, Error>.makeStream()
        let task = Task {
            continuation.yield(.signingIn)
            do {
                let (tokens, account) = try await poll(events: {
                    if case .state(let state) = $0 { continuation.yield(state) }
                })
                try await onApproved(tokens, account)
                continuation.yield(.signedIn(expiresAt: tokens.expiresAt(now: clock.now())))
                continuation.finish()
            } catch let error as AuthError {
                continuation.yield(Self.finalState(for: error))
                continuation.finish(throwing: error)
            } catch {
                continuation.yield(.failed(error.userFacingDescription))
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// The state a failed sign-in ends in.
    static func finalState(for error: AuthError) -> AuthState {
        if case .cancelledSignIn = error { return .signedOut }
        return error.requiresReauthentication ? .reauthenticationRequired : .failed(error.userFacingDescription)
    }

    private func poll(events: @Sendable (SignInEvent) -> Void) async throws(AuthError) -> (TokenResponse, AccountInfo) {
        let start = clock.now()
        if Task.isCancelled { throw .cancelledSignIn }
        let authorization = try await provider.authorize()
        events(.deviceCode(authorization))
        events(
            .state(
                .awaitingDeviceCode(
                    userCode: authorization.userCode,
                    verificationURL: authorization.completeVerificationURL ?? authorization.verificationURL
                )
            )
        )
        let giveUpAt = start + maximumDuration
        var interval = authorization.interval
        // The wait before the next poll: the interval, or after failed polls the backoff.
        var wait = interval
        var failures = 0
        // The last poll's failure while polls keep failing: what ends the sign-in if the code runs out first.
        var failing: String?
        func stopped() -> AuthError {
            if let failing {
                let end = giveUpAt < authorization.expiresAt ? "Lanyard stopped waiting" : "the device code expired"
                return .networkFailure("\(failing) (still failing when \(end))")
            }
            return giveUpAt <= authorization.expiresAt ? .pollingTimeout : .expiredDeviceCode
        }
        while true {
            let now = clock.now()
            if now >= min(giveUpAt, authorization.expiresAt) { throw stopped() }
            let remaining = min(giveUpAt, authorization.expiresAt).timeIntervalSince(now)
            events(.waiting(remaining: remaining))
            // Never wait (or poll) past the code's expiry or the time limit: when the next poll
            // would come after it, wait only until it and stop there.
            do { try await sleeper.sleep(seconds: min(wait, remaining)) } catch { throw .cancelledSignIn }
            if Task.isCancelled { throw .cancelledSignIn }
            if wait >= remaining { throw stopped() }
            let result: PollResult
            do {
                result = try await provider.poll(authorization)
            } catch .networkFailure(let message) {
                // A 5xx, a reset or a timeout says nothing about the code, which stays valid until
                // it expires: poll again, backing off, rather than lose an approval to one bad answer.
                failures += 1
                failing = message
                wait = Self.retryDelay(failures: failures, interval: interval, maximum: maximumRetryDelay)
                events(.retrying(reason: message, after: wait))
                continue
            }
            failures = 0
            failing = nil
            wait = interval
            switch result {
            case .pending: continue
            case .slowDown:
                interval += slowDownIncrement
                wait = interval
                events(.slowedDown(interval: interval))
            case .approved(let tokens):
                return (tokens, try provider.accountInfo(for: tokens))
            }
        }
    }

    /// The wait before the next poll after `failures` failed polls in a row: twice the interval
    /// (at least 1 s), doubling with each further failure, at most `maximum` (never less than the
    /// interval): the shared exponential ``BackoffPolicy``, without jitter or `Retry-After`.
    static func retryDelay(failures: Int, interval: TimeInterval, maximum: TimeInterval) -> TimeInterval {
        let policy = BackoffPolicy(
            maxRetries: .max,
            initialDelay: 2 * max(interval, 1),
            maximumDelay: max(maximum, interval),
            respectsRetryAfterHeader: false,
            jitter: 0
        )
        return policy.delay(beforeRetry: max(failures, 1) - 1, unitRandom: 0)!
    }
}
