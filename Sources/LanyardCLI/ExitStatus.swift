import LanyardCore

/// The documented exit statuses of the `lanyard` command (docs/cli.md). Stable: scripts rely on them.
package enum ExitStatus: Int32, Sendable, CaseIterable {
    case ok = 0
    case failure = 1
    case usage = 2
    case notSignedIn = 3
    case reauthenticationRequired = 4
    case storeUnavailable = 5
    case network = 6
    case usageLimit = 7
    /// `exec`'s command exists but cannot be run, as a shell says.
    case commandNotRunnable = 126
    /// `exec`'s command does not exist, as a shell says.
    case commandNotFound = 127
    case cancelled = 130
}

extension ExitStatus {
    /// What each error code means to the `lanyard` command: the one place where a library
    /// error becomes an exit status. `ErrorCode` is extensible (a struct), so the switch ends in
    /// `default`; every code is still listed here with its status, and docs/cli.md's error-code
    /// table lists the same pairs, a row for every code (`ExitCodeTests` checks both ways).
    init(code: ErrorCode) {
        switch code {
        // not signed in
        case .missingCredential, .unknownSlot, .noActiveSlot:
            self = .notSignedIn
        // the slot must sign in again
        case .reauthenticationRequired, .missingRefreshToken, .missingAccountID, .tokenExchangeRefused,
            .fleetHandedOver:
            self = .reauthenticationRequired
        // The server replaced the refresh token and the new one was kept nowhere: only a new
        // sign-in helps, as with a refused refresh token.
        case .refreshedSignInLost:
            self = .reauthenticationRequired
        // the credential store
        case .storeUnavailable, .storeLocked, .storeTimedOut, .fleetUnavailable, .fleetLockTimeout,
            .etcdUnreachable, .etcdUnavailable, .etcdTLS, .etcdPermissionDenied, .codexKeyringUnavailable:
            self = .storeUnavailable
        // A TPM-sealed file store that the TPM does not open (yet): like a locked store, nothing
        // changed, and the fix is outside Lanyard (the TPM, its permissions, its lockout, the PIN).
        case .tpmUnavailable, .tpmPermissionDenied, .tpmMismatch, .tpmLockout, .tpmWrongPIN, .tpmFailed:
            self = .storeUnavailable
        // The store refused refreshed tokens, which wait in the recovery file or the kernel
        // keyring: the sign-in is intact, and what must be fixed is the store (then `doctor
        // --repair`), as with any store that does not answer.
        case .refreshedTokensInRecoveryFile, .refreshedTokensInKernelKeyring:
            self = .storeUnavailable
        // network and servers
        case .networkFailure, .networkUnavailable, .invalidResponse, .httpError, .tokenExchangeFailed,
            .streamingReplayDiverged, .responseFailed:
            self = .network
        // usage
        case .usageLimitReached:
            self = .usageLimit
        // the command line
        // like a missing --yes: the confirmation to sign out without revoking
        case .usage, .invalidSlotName, .gitCredentialInput, .dockerCredentialInput, .kubeExecInfo,
            .revocationUnavailable:
            self = .usage
        case .cancelledSignIn, .cancelled, .etcdCancelled:
            self = .cancelled
        case .commandNotFound:
            self = .commandNotFound
        case .commandNotRunnable:
            self = .commandNotRunnable
        // everything else that went wrong
        case .storeCorrupt, .wrongPassphrase, .unsafePath, .ioError, .registryCorrupt, .slotExists,
            .slotHoldsAnotherAccount,
            .signInInProgress, .configInvalid, .passphraseUnavailable,
            .expiredDeviceCode, .pollingTimeout, .callbackTimeout, .callbackPortInUse, .authorizationDenied,
            .secureRandomFailed,
            .deviceCodeNotEnabled, .unknown, .invalidHeader, .invalidValue, .integrationUnsupported,
            .accessTokenRejected, .accessTokenUnsupported,
            .netrcField, .ghHostsCorrupt, .bundleCorrupt, .bundleEmpty, .bundleEncrypt, .bundleMissing,
            .bundleNoIdentity,
            .bundleProviderMismatch, .bundleUnknownProvider, .nothingToExport, .agentRunning, .gitConfigFailed,
            .refreshFailed, .error,
            .fleetNotConfigured, .fleetExists, .fleetMissing, .fleetNotMember, .fleetUnknownMachine,
            .fleetFingerprintMismatch, .fleetSlotShared, .fleetSlotNotShared, .fleetCredentialRefused,
            .fleetIdentityUnavailable, .fleetLockLost, .fleetDataCorrupt, .fleetPinMismatch, .fleetNotJoined,
            .fleetUntrusted, .fleetValueMissing, .fleetRefreshInFlight, .fleetMembershipBehind, .fleetForked,
            .fleetWritePending,
            .etcdMalformedAnswer, .etcdCompacted, .etcdError:
            self = .failure
        default:
            self = .failure
        }
    }

    /// The exit status for `error`: by its code (``init(code:)``), except a refresh worker's
    /// failure, which passes on the status the worker (this same command) already chose.
    init(for error: any Error) {
        switch error {
        case let worker as WorkerError: self = ExitStatus(rawValue: worker.status) ?? .failure
        case let e as any LanyardError: self = ExitStatus(code: e.code)
        case is CancellationError: self = .cancelled
        default: self = .failure
        }
    }
}

extension LanyardError {
    /// The `lanyard` command's exit status for this error (``ExitStatus/init(code:)``).
    var exitStatus: ExitStatus { ExitStatus(for: self) }
}
