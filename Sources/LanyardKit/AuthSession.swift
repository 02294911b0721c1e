import Foundation
import LanyardAuth
import LanyardCore
import LanyardSupport
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
///
/// Thread safety: every observed property lives in one ``Locked`` value, read and written only under its lock,
/// so a session may be shared between tasks and threads (the compiler checks `Sendable`).
/// Observation is wired by hand (not `@Observable`) so that each access goes through the lock.
public final class AuthSession: Observable, Sendable {
    /// The observed properties, guarded together.
    private struct Observed: Sendable {
        var state: AuthState = .signedOut
        var deviceLinkState: DeviceLinkState = .idle
        var accountInfo: AccountInfo?
        var lastError: AuthError?
        var slot: Slot?
        var fleetSignIn: FleetSignInOutcome?
        var continuations: [UUID: AsyncStream<AuthState>.Continuation] = [:]
    }

    private let observed: Locked<Observed>
    private let registrar = ObservationRegistrar()
    private let manager: AccountManager
    private let provider: String

    /// The slot's sign-in state.
    public var state: AuthState { read(\.state, as: \.state) }
    /// Progress of a device-code sign-in under way.
    public var deviceLinkState: DeviceLinkState { read(\.deviceLinkState, as: \.deviceLinkState) }
    /// The signed-in account (email, plan, ids), from the registry: no secret.
    public var accountInfo: AccountInfo? { read(\.accountInfo, as: \.accountInfo) }
    /// Why the last sign-in or refresh failed.
    public var lastError: AuthError? { read(\.lastError, as: \.lastError) }
    /// The slot this session manages (nil until a sign-in names one).
    public var slot: Slot? { read(\.slot, as: \.slot) }
    /// When the slot is shared in a fleet: what became of the last sign-in there (written for
    /// every member, kept here until the fleet can take it, or the slot found unshared). Nil for
    /// a slot of this machine alone.
    public var fleetSignIn: FleetSignInOutcome? { read(\.fleetSignIn, as: \.fleetSignIn) }

    /// Reads the slot's state from the registry (nothing is unlocked).
    public init(configuration: Configuration = Configuration()) throws {
        let (manager, slot) = try configuration.resolve()
        self.manager = manager
        provider = configuration.provider
        var initial = Observed(slot: slot)
        if let slot, let record = try manager.registry.load().slots[slot] {
            initial.state = record.state
            initial.accountInfo = record.account
        }
        observed = Locked(initial)
    }

    /// Every state from now on, starting with the current one.
    public var states: AsyncStream<AuthState> {
        AsyncStream { continuation in
            let id = UUID()
            observed.withLock {
                $0.continuations[id] = continuation
                continuation.yield($0.state)
            }
            continuation.onTermination = { [weak self] _ in
                self?.observed.withLock { _ = $0.continuations.removeValue(forKey: id) }
            }
        }
    }

    /// Reads a field under the lock, registering the access of its public property with Observation.
    private func read<T: Sendable>(_ field: KeyPath<Observed, T> & Sendable, as property: KeyPath<AuthSession, T>) -> T
    {
        registrar.access(self, keyPath: property)
        return observed.withLock { $0[keyPath: field] }
    }

    /// Changes a field under the lock when the value is new, telling Observation; `also` runs
    /// under the same lock after the change (the state also goes to every `states` stream).
    private func set<T: Equatable>(
        _ field: WritableKeyPath<Observed, T>,
        _ value: T,
        as property: KeyPath<AuthSession, T>,
        also: (inout Observed) -> Void = { _ in }
    ) {
        guard observed.withLock({ $0[keyPath: field] != value }) else { return }
        registrar.withMutation(of: self, keyPath: property) {
            observed.withLock { fields in
                fields[keyPath: field] = value
                also(&fields)
            }
        }
    }

    private func publish(_ newState: AuthState, link: DeviceLinkState? = nil) {
        set(\.state, newState, as: \.state) { fields in
            for continuation in fields.continuations.values { continuation.yield(newState) }
        }
        if let link { set(\.deviceLinkState, link, as: \.deviceLinkState) }
    }

    /// Runs the device-code sign-in into this session's slot (by default named after the email).
    /// States go signingIn → awaitingDeviceCode → signedIn; a failure ends in failed or
    /// reauthenticationRequired and throws ``AuthError``; cancelling the task gives `cancelledSignIn`
    /// and leaves any stored credential as it was.
    public func startDeviceCodeSignIn() async throws {
        set(\.lastError, nil, as: \.lastError)
        set(\.fleetSignIn, nil, as: \.fleetSignIn)
        publish(state, link: .requestingCode)
        do {
            let (slot, credential) = try await manager.signIn(slot: slot, providerID: provider) { [weak self] event in
                switch event {
                case .state(let s):
                    switch s {
                    // Published with the stored credential / the device code.
                    case .signedIn, .awaitingDeviceCode: return
                    default: self?.publish(s)
                    }
                case .deviceCode(let auth):
                    self?.publish(
                        .awaitingDeviceCode(
                            userCode: auth.userCode,
                            verificationURL: auth.completeVerificationURL ?? auth.verificationURL
                        ),
                        link: .waitingForApproval(
                            userCode: auth.userCode,
                            verificationURL: auth.verificationURL,
                            expiresAt: auth.expiresAt
                        )
                    )
                case .shared(let outcome):
                    self?.set(\.fleetSignIn, outcome, as: \.fleetSignIn)
                default: break
                }
            }
            set(\.slot, slot, as: \.slot)
            set(\.accountInfo, credential.account, as: \.accountInfo)
            publish(.signedIn(expiresAt: credential.tokens.expiresAt), link: .completed)
        } catch let error as AuthError {
            set(\.lastError, error, as: \.lastError)
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
            set(\.accountInfo, credential.account, as: \.accountInfo)
            publish(.signedIn(expiresAt: credential.tokens.expiresAt))
        } catch let error as ClientError {
            switch error {
            case .reauthenticationRequired, .missingRefreshToken:
                set(\.lastError, .missingRefreshToken, as: \.lastError)
                publish(.reauthenticationRequired)
            default: break
            }
            throw error
        }
    }
}
