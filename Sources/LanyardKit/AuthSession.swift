import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore
import Observation

/// Fine-grained progress through the device-code exchange.
public enum DeviceLinkState: Hashable, Sendable {
    case idle
    case requestingCode
    /// Show `userCode` and `verificationURL` to the person; the code expires at `expiresAt`.
    case waitingForApproval(userCode: String, verificationURL: URL, expiresAt: Date)
    case completed
    case failed
}

/// One slot's sign-in state, observable with Observation (`withObservationTracking`, SwiftUI-style)
/// or as an `AsyncStream` of states. Mirrors the Chappie auth session: `state`, `deviceLinkState`,
/// `accountInfo`, `lastError`; `startDeviceCodeSignIn()`, `signOut()`, `refreshAuth()`. Tokens are
/// never exposed here; use ``Client`` to make requests.
@Observable
public final class AuthSession: @unchecked Sendable {
    public private(set) var state: AuthState = .signedOut
    public private(set) var deviceLinkState: DeviceLinkState = .idle
    public private(set) var accountInfo: AccountInfo?
    public private(set) var lastError: AuthError?
    /// The slot this session manages (nil until a sign-in names one).
    public private(set) var slot: Slot?

    @ObservationIgnored private let manager: AccountManager
    @ObservationIgnored private let provider: String
    @ObservationIgnored private let lock = NSLock()
    @ObservationIgnored private var continuations: [UUID: AsyncStream<AuthState>.Continuation] = [:]

    /// Reads the slot's state from the registry (nothing is unlocked).
    public init(configuration: Configuration = Configuration()) throws {
        let (manager, slot) = try configuration.resolve()
        self.manager = manager
        provider = configuration.provider
        self.slot = slot
        if let slot, let record = try manager.registry.load().slots[slot] {
            state = record.state
            accountInfo = record.account
        }
    }

    /// Every state from now on, starting with the current one.
    public var states: AsyncStream<AuthState> {
        AsyncStream { continuation in
            let id = UUID()
            lock.withLock {
                continuations[id] = continuation
                continuation.yield(state)
            }
            continuation.onTermination = { [weak self] _ in self?.lock.withLock { _ = self?.continuations.removeValue(forKey: id) } }
        }
    }

    private func publish(_ newState: AuthState, link: DeviceLinkState? = nil) {
        lock.withLock {
            let changed = newState != state
            if changed { state = newState }
            if let link { deviceLinkState = link }
            if changed { for continuation in continuations.values { continuation.yield(newState) } }
        }
    }

    /// Runs the device-code sign-in into this session's slot (by default named after the email).
    /// States go signingIn → awaitingDeviceCode → signedIn; a failure ends in failed or
    /// reauthenticationRequired and throws ``AuthError``; cancelling the task gives `cancelledSignIn`
    /// and leaves any stored credential as it was.
    public func startDeviceCodeSignIn() async throws {
        lock.withLock { lastError = nil }
        publish(state, link: .requestingCode)
        do {
            let (slot, credential) = try await manager.signIn(slot: slot, providerID: provider) { [weak self] event in
                switch event {
                case .state(let s):
                    switch s {
                    case .signedIn, .awaitingDeviceCode: return  // published with the stored credential / the device code
                    default: self?.publish(s)
                    }
                case .deviceCode(let auth):
                    self?.publish(.awaitingDeviceCode(userCode: auth.userCode, verificationURL: auth.completeVerificationURL ?? auth.verificationURL),
                                  link: .waitingForApproval(userCode: auth.userCode, verificationURL: auth.verificationURL, expiresAt: auth.expiresAt))
                default: break
                }
            }
            lock.withLock {
                self.slot = slot
                accountInfo = credential.account
            }
            publish(.signedIn(expiresAt: credential.tokens.expiresAt), link: .completed)
        } catch let error as AuthError {
            lock.withLock { lastError = error }
            publish(state, link: .failed)
            throw error
        }
    }

    /// Removes the stored credential and resets the state to signedOut (never revokes).
    public func signOut() async throws {
        guard let slot else { return }
        try await manager.signOut(slot: slot, revoke: false)
        publish(.signedOut, link: .idle)
    }

    /// Refreshes now. A dead refresh token moves the session to reauthenticationRequired and throws.
    public func refreshAuth() async throws {
        guard let slot else { throw ClientError.missingCredential(slot: "(none)") }
        do {
            let credential = try await manager.freshCredential(slot: slot, force: true)
            lock.withLock { accountInfo = credential.account }
            publish(.signedIn(expiresAt: credential.tokens.expiresAt))
        } catch let error as ClientError {
            switch error {
            case .reauthenticationRequired, .missingRefreshToken:
                lock.withLock { lastError = .missingRefreshToken }
                publish(.reauthenticationRequired)
            default: break
            }
            throw error
        }
    }
}
