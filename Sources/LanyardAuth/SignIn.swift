import Foundation
import LanyardCore

/// What a sign-in reports while it runs.
public enum SignInEvent: Sendable, Equatable {
    /// The Chappie auth-state sequence: signingIn → awaitingDeviceCode → signedIn / failed.
    case state(AuthState)
    /// The device code to show (with the URL that has it filled in, when the server gives one).
    case deviceCode(DeviceAuthorization)
    /// Still waiting; seconds until the code expires or Lanyard stops waiting.
    case waiting(remaining: TimeInterval)
    /// The server asked to poll less often; the new interval.
    case slowedDown(interval: TimeInterval)
}

/// The device-code flow: request a code, show it, poll honouring `interval` and `slow_down`, and
/// return the tokens. Stores nothing: the caller stores the credential once it is in hand, so a
/// cancelled or failed sign-in leaves the slot as it was.
public struct SignInFlow: Sendable {
    public let provider: any DeviceCodeProvider
    public let clock: any WallClock
    public let sleeper: any Sleeper
    /// Seconds added to the interval on each `slow_down` (RFC 8628 says 5).
    public var slowDownIncrement: TimeInterval = 5
    /// The longest Lanyard waits for approval (the provider's limit by default).
    public var maximumDuration: TimeInterval

    public init(provider: any DeviceCodeProvider, clock: any WallClock = SystemClock(), sleeper: any Sleeper = TaskSleeper()) {
        self.provider = provider
        self.clock = clock
        self.sleeper = sleeper
        maximumDuration = provider.maximumPollingDuration
    }

    /// Runs the flow; `events` sees every state change. Task cancellation gives `cancelledSignIn`.
    public func run(events: @Sendable (SignInEvent) -> Void) async throws(AuthError) -> (TokenResponse, AccountInfo) {
        events(.state(.signingIn))
        do {
            let result = try await poll(events: events)
            return result
        } catch {
            if case .cancelledSignIn = error { events(.state(.signedOut)) } else {
                events(.state(error.requiresReauthentication ? .reauthenticationRequired : .failed(error.localizedDescription)))
            }
            throw error
        }
    }

    private func poll(events: @Sendable (SignInEvent) -> Void) async throws(AuthError) -> (TokenResponse, AccountInfo) {
        let start = clock.now()
        if Task.isCancelled { throw .cancelledSignIn }
        let authorization = try await provider.authorize()
        events(.deviceCode(authorization))
        events(.state(.awaitingDeviceCode(userCode: authorization.userCode,
                                          verificationURL: authorization.completeVerificationURL ?? authorization.verificationURL)))
        let giveUpAt = start + maximumDuration
        var interval = authorization.interval
        while true {
            let now = clock.now()
            if now >= giveUpAt { throw .pollingTimeout }
            if now >= authorization.expiresAt { throw .expiredDeviceCode }
            events(.waiting(remaining: min(giveUpAt, authorization.expiresAt).timeIntervalSince(now)))
            do { try await sleeper.sleep(seconds: interval) } catch { throw .cancelledSignIn }
            if Task.isCancelled { throw .cancelledSignIn }
            switch try await provider.poll(authorization) {
            case .pending: continue
            case .slowDown:
                interval += slowDownIncrement
                events(.slowedDown(interval: interval))
            case .approved(let tokens):
                let info = provider.accountInfo(for: tokens)
                events(.state(.signedIn(expiresAt: tokens.expiresAt(now: clock.now()))))
                return (tokens, info)
            }
        }
    }
}
