/// The stable machine code of a ``LanyardError``: one case for each code Lanyard reports.
///
/// Raw values are what `--json` output writes (`{"error": {"code": …}}`), the event log records
/// and scripts compare, so they never change once published; docs/cli.md's error-code table lists
/// each with its exit status. Programs compare cases, never strings: a code read back from
/// outside (another process's output) is parsed with `init(rawValue:)` and falls back to a
/// generic case.
///
/// A struct over a private enum, not a public enum (as swift-nio's `FileSystemError.Code` does):
/// a new code is a new static member, so adding one never breaks a library user's exhaustive
/// `switch`. Every code's exit status and its line in docs/cli.md are checked by ExitCodeTests.
public struct ErrorCode: Hashable, Sendable, RawRepresentable, CaseIterable {
    private enum Code: String, CaseIterable, Sendable {
        case missingCredential = "missing_credential"
        case unknownSlot = "unknown_slot"
        case noActiveSlot = "no_active_slot"
        case reauthenticationRequired = "reauthentication_required"
        case missingRefreshToken = "missing_refresh_token"
        case missingAccountID = "missing_account_id"
        case tokenExchangeRefused = "token_exchange_refused"
        case storeUnavailable = "store_unavailable"
        case storeLocked = "store_locked"
        case storeTimedOut = "store_timed_out"
        case storeCorrupt = "store_corrupt"
        case wrongPassphrase = "wrong_passphrase"
        case unsafePath = "unsafe_path"
        case tpmUnavailable = "tpm_unavailable"
        case tpmPermissionDenied = "tpm_permission_denied"
        case tpmMismatch = "tpm_mismatch"
        case tpmLockout = "tpm_lockout"
        case tpmWrongPIN = "tpm_wrong_pin"
        case tpmFailed = "tpm_failed"
        case ioError = "io_error"
        case refreshedTokensInRecoveryFile = "refreshed_tokens_in_recovery_file"
        case refreshedTokensInKernelKeyring = "refreshed_tokens_in_kernel_keyring"
        case refreshedSignInLost = "refreshed_sign_in_lost"
        case registryCorrupt = "registry_corrupt"
        case slotExists = "slot_exists"
        case revocationUnavailable = "revocation_unavailable"
        case slotHoldsAnotherAccount = "slot_holds_another_account"
        case signInInProgress = "sign_in_in_progress"
        case configInvalid = "config_invalid"
        case passphraseUnavailable = "passphrase_unavailable"
        case networkFailure = "network_failure"
        case networkUnavailable = "network_unavailable"
        case invalidResponse = "invalid_response"
        case httpError = "http_error"
        case tokenExchangeFailed = "token_exchange_failed"
        case streamingReplayDiverged = "streaming_replay_diverged"
        case responseFailed = "response_failed"
        case invalidHeader = "invalid_header"
        case usageLimitReached = "usage_limit_reached"
        case cancelledSignIn = "cancelled_sign_in"
        case expiredDeviceCode = "expired_device_code"
        case pollingTimeout = "polling_timeout"
        case callbackTimeout = "callback_timeout"
        case callbackPortInUse = "callback_port_in_use"
        case authorizationDenied = "authorization_denied"
        case secureRandomFailed = "secure_random_failed"
        case deviceCodeNotEnabled = "device_code_not_enabled"
        case unknown = "unknown"
        case usage = "usage"
        case invalidSlotName = "invalid_slot_name"
        case gitCredentialInput = "git_credential_input"
        case dockerCredentialInput = "docker_credential_input"
        case kubeExecInfo = "kube_exec_info"
        case cancelled = "cancelled"
        case commandNotFound = "command_not_found"
        case commandNotRunnable = "command_not_runnable"
        case invalidValue = "invalid_value"
        case integrationUnsupported = "integration_unsupported"
        case codexKeyringUnavailable = "codex_keyring_unavailable"
        case accessTokenRejected = "access_token_rejected"
        case accessTokenUnsupported = "access_token_unsupported"
        case netrcField = "netrc_field"
        case ghHostsCorrupt = "gh_hosts_corrupt"
        case bundleCorrupt = "bundle_corrupt"
        case bundleEmpty = "bundle_empty"
        case bundleEncrypt = "bundle_encrypt"
        case bundleMissing = "bundle_missing"
        case bundleNoIdentity = "bundle_no_identity"
        case bundleProviderMismatch = "bundle_provider_mismatch"
        case bundleUnknownProvider = "bundle_unknown_provider"
        case nothingToExport = "nothing_to_export"
        case agentRunning = "agent_running"
        case gitConfigFailed = "git_config_failed"
        case refreshFailed = "refresh_failed"
        case error = "error"
        case fleetNotConfigured = "fleet_not_configured"
        case fleetUnavailable = "fleet_unavailable"
        case fleetLockTimeout = "fleet_lock_timeout"
        case fleetExists = "fleet_exists"
        case fleetMissing = "fleet_missing"
        case fleetNotMember = "fleet_not_member"
        case fleetUnknownMachine = "fleet_unknown_machine"
        case fleetFingerprintMismatch = "fleet_fingerprint_mismatch"
        case fleetPinMismatch = "fleet_pin_mismatch"
        case fleetNotJoined = "fleet_not_joined"
        case fleetUntrusted = "fleet_untrusted"
        case fleetValueMissing = "fleet_value_missing"
        case fleetRefreshInFlight = "fleet_refresh_in_flight"
        case fleetHandedOver = "fleet_handed_over"
        case fleetSlotShared = "fleet_slot_shared"
        case fleetSlotNotShared = "fleet_slot_not_shared"
        case fleetCredentialRefused = "fleet_credential_refused"
        case fleetIdentityUnavailable = "fleet_identity_unavailable"
        case fleetLockLost = "fleet_lock_lost"
        case fleetDataCorrupt = "fleet_data_corrupt"
        case fleetMembershipBehind = "fleet_membership_behind"
        case fleetForked = "fleet_forked"
        case fleetWritePending = "fleet_write_pending"
        case etcdUnreachable = "etcd_unreachable"
        case etcdUnavailable = "etcd_unavailable"
        case etcdTLS = "etcd_tls"
        case etcdPermissionDenied = "etcd_permission_denied"
        case etcdMalformedAnswer = "etcd_malformed_answer"
        case etcdCompacted = "etcd_compacted"
        case etcdCancelled = "etcd_cancelled"
        case etcdError = "etcd_error"
    }

    private let code: Code

    private init(_ code: Code) { self.code = code }

    /// The code as `--json` and the event log write it (`missing_credential`, …).
    public var rawValue: String { code.rawValue }

    /// The code written as `rawValue`, nil for one this version does not know.
    public init?(rawValue: String) {
        guard let code = Code(rawValue: rawValue) else { return nil }
        self.code = code
    }

    /// Every code this version knows.
    public static var allCases: [ErrorCode] { Code.allCases.map(ErrorCode.init) }

    // Not signed in.
    /// The slot has no stored credential.
    public static let missingCredential = ErrorCode(.missingCredential)
    /// No slot by that name.
    public static let unknownSlot = ErrorCode(.unknownSlot)
    /// No slot was given and none is active.
    public static let noActiveSlot = ErrorCode(.noActiveSlot)

    // The slot must sign in again.
    /// The refresh token is dead.
    public static let reauthenticationRequired = ErrorCode(.reauthenticationRequired)
    /// The slot (or the server's answer) has no refresh token.
    public static let missingRefreshToken = ErrorCode(.missingRefreshToken)
    /// The slot has no account id.
    public static let missingAccountID = ErrorCode(.missingAccountID)
    /// The token endpoint refused the sign-in (HTTP 400, 401 or 403).
    public static let tokenExchangeRefused = ErrorCode(.tokenExchangeRefused)

    // The credential store.
    /// No keyring or encrypted store to talk to.
    public static let storeUnavailable = ErrorCode(.storeUnavailable)
    /// The keyring collection or encrypted store is locked.
    public static let storeLocked = ErrorCode(.storeLocked)
    /// The store did not answer in time.
    public static let storeTimedOut = ErrorCode(.storeTimedOut)
    /// Stored data did not decode (it is left as it is).
    public static let storeCorrupt = ErrorCode(.storeCorrupt)
    /// The passphrase does not open the store or bundle.
    public static let wrongPassphrase = ErrorCode(.wrongPassphrase)
    /// A path is a symbolic link, owned by someone else, or writable by others.
    public static let unsafePath = ErrorCode(.unsafePath)
    /// The file store is sealed by a TPM, and no TPM answers (or libtss2 is not installed).
    public static let tpmUnavailable = ErrorCode(.tpmUnavailable)
    /// The TPM's device exists but this user may not open it (group `tss` on Debian).
    public static let tpmPermissionDenied = ErrorCode(.tpmPermissionDenied)
    /// The file store was sealed by another TPM (a copied home), or this TPM was cleared since.
    public static let tpmMismatch = ErrorCode(.tpmMismatch)
    /// The TPM is in dictionary-attack lockout after too many wrong PINs.
    public static let tpmLockout = ErrorCode(.tpmLockout)
    /// The TPM PIN is wrong (the TPM counted the failure).
    public static let tpmWrongPIN = ErrorCode(.tpmWrongPIN)
    /// Any other TPM failure, or a sealed identity the TPM refuses.
    public static let tpmFailed = ErrorCode(.tpmFailed)
    /// Reading or writing a file failed.
    public static let ioError = ErrorCode(.ioError)
    /// Refreshed tokens could not be stored; they wait in the slot's recovery file.
    public static let refreshedTokensInRecoveryFile = ErrorCode(.refreshedTokensInRecoveryFile)
    /// Refreshed tokens could be written neither to the store nor to the recovery file; they
    /// wait in memory, in the kernel keyring, until the machine restarts.
    public static let refreshedTokensInKernelKeyring = ErrorCode(.refreshedTokensInKernelKeyring)
    /// Refreshed tokens could be kept nowhere after the server replaced the refresh token: the
    /// sign-in is lost.
    public static let refreshedSignInLost = ErrorCode(.refreshedSignInLost)
    /// The registry did not parse (it was moved aside).
    public static let registryCorrupt = ErrorCode(.registryCorrupt)
    /// The slot name is taken.
    public static let slotExists = ErrorCode(.slotExists)
    /// `logout --revoke` could not revoke (no revocation endpoint, a fleet's token) and was not
    /// told to sign out anyway (`--yes`).
    public static let revocationUnavailable = ErrorCode(.revocationUnavailable)
    /// A sign-in came back as another account than the slot's.
    public static let slotHoldsAnotherAccount = ErrorCode(.slotHoldsAnotherAccount)
    /// Another sign-in into the same slot is in progress.
    public static let signInInProgress = ErrorCode(.signInInProgress)
    /// config.ini does not parse or holds a bad value.
    public static let configInvalid = ErrorCode(.configInvalid)
    /// No passphrase source (terminal, file or askpass).
    public static let passphraseUnavailable = ErrorCode(.passphraseUnavailable)

    // Network and servers.
    /// No answer from the server.
    public static let networkFailure = ErrorCode(.networkFailure)
    /// `lanyard-net` (the HTTP half) could not be run.
    public static let networkUnavailable = ErrorCode(.networkUnavailable)
    /// The server's answer was malformed or carried text Lanyard refuses.
    public static let invalidResponse = ErrorCode(.invalidResponse)
    /// The server answered with an error status.
    public static let httpError = ErrorCode(.httpError)
    /// The token endpoint failed (statuses other than 400, 401 and 403).
    public static let tokenExchangeFailed = ErrorCode(.tokenExchangeFailed)
    /// A reconnected stream replayed different text.
    public static let streamingReplayDiverged = ErrorCode(.streamingReplayDiverged)
    /// The response ended failed or incomplete.
    public static let responseFailed = ErrorCode(.responseFailed)
    /// A request header would carry a control character (refused, not sent).
    public static let invalidHeader = ErrorCode(.invalidHeader)
    /// The account's usage limit is reached.
    public static let usageLimitReached = ErrorCode(.usageLimitReached)

    // Signing in.
    /// Ctrl-C during sign-in.
    public static let cancelledSignIn = ErrorCode(.cancelledSignIn)
    /// The device code expired before it was approved.
    public static let expiredDeviceCode = ErrorCode(.expiredDeviceCode)
    /// Approval did not come in time.
    public static let pollingTimeout = ErrorCode(.pollingTimeout)
    /// The sign-in callback did not come in time.
    public static let callbackTimeout = ErrorCode(.callbackTimeout)
    /// Every port a browser sign-in may listen on is taken (another sign-in, such as Codex's own).
    public static let callbackPortInUse = ErrorCode(.callbackPortInUse)
    /// The sign-in was denied.
    public static let authorizationDenied = ErrorCode(.authorizationDenied)
    /// The system's random source failed.
    public static let secureRandomFailed = ErrorCode(.secureRandomFailed)
    /// The provider does not offer device-code sign-in here.
    public static let deviceCodeNotEnabled = ErrorCode(.deviceCodeNotEnabled)
    /// An unexpected sign-in failure.
    public static let unknown = ErrorCode(.unknown)

    // The command line and the programs Lanyard serves.
    /// A bad command line, or a question the slot's provider cannot answer.
    public static let usage = ErrorCode(.usage)
    /// `--account`, `LANYARD_ACCOUNT` or a pin names an invalid slot.
    public static let invalidSlotName = ErrorCode(.invalidSlotName)
    /// git's request on stdin is malformed or too long.
    public static let gitCredentialInput = ErrorCode(.gitCredentialInput)
    /// Docker's request on stdin is malformed or too long.
    public static let dockerCredentialInput = ErrorCode(.dockerCredentialInput)
    /// `KUBERNETES_EXEC_INFO` asks for what Lanyard cannot give.
    public static let kubeExecInfo = ErrorCode(.kubeExecInfo)
    /// The command was interrupted.
    public static let cancelled = ErrorCode(.cancelled)
    /// `exec`'s command is not on PATH.
    public static let commandNotFound = ErrorCode(.commandNotFound)
    /// `exec`'s command was found but could not be started.
    public static let commandNotRunnable = ErrorCode(.commandNotRunnable)
    /// A value no environment variable can hold (a NUL byte).
    public static let invalidValue = ErrorCode(.invalidValue)
    /// The integration cannot do this for the slot.
    public static let integrationUnsupported = ErrorCode(.integrationUnsupported)
    /// Codex keeps its sign-in in the keyring (`cli_auth_credentials_store`), and that keyring
    /// does not answer or is locked: nothing was written.
    public static let codexKeyringUnavailable = ErrorCode(.codexKeyringUnavailable)
    /// `login --with-access-token` was given a token the server refused (HTTP 401 or 403).
    public static let accessTokenRejected = ErrorCode(.accessTokenRejected)
    /// `login --with-access-token` was given a token of a kind Lanyard does not hold (an agent
    /// identity), or the provider has no such tokens.
    public static let accessTokenUnsupported = ErrorCode(.accessTokenUnsupported)
    /// A netrc value has white space or a control character.
    public static let netrcField = ErrorCode(.netrcField)
    /// gh's hosts.yml does not parse.
    public static let ghHostsCorrupt = ErrorCode(.ghHostsCorrupt)
    /// The bundle is not a whole, authentic bundle.
    public static let bundleCorrupt = ErrorCode(.bundleCorrupt)
    /// The bundle holds no slots.
    public static let bundleEmpty = ErrorCode(.bundleEmpty)
    /// The bundle could not be encrypted or written.
    public static let bundleEncrypt = ErrorCode(.bundleEncrypt)
    /// The bundle file does not exist.
    public static let bundleMissing = ErrorCode(.bundleMissing)
    /// No identity given opens the bundle.
    public static let bundleNoIdentity = ErrorCode(.bundleNoIdentity)
    /// A bundle record's provider differs from its credential's.
    public static let bundleProviderMismatch = ErrorCode(.bundleProviderMismatch)
    /// A bundle names a provider config.ini does not know.
    public static let bundleUnknownProvider = ErrorCode(.bundleUnknownProvider)
    /// No slot to export.
    public static let nothingToExport = ErrorCode(.nothingToExport)
    /// Another agent is running.
    public static let agentRunning = ErrorCode(.agentRunning)
    /// `git config` failed.
    public static let gitConfigFailed = ErrorCode(.gitConfigFailed)
    /// A refresh worker failed without saying why (the status it exited with is passed on).
    public static let refreshFailed = ErrorCode(.refreshFailed)
    /// Any other failure (an error that is not a ``LanyardError``).
    public static let error = ErrorCode(.error)

    // Fleets.
    /// config.ini has no `[fleet]` group.
    public static let fleetNotConfigured = ErrorCode(.fleetNotConfigured)
    /// The fleet's etcd cannot be reached or has no quorum.
    public static let fleetUnavailable = ErrorCode(.fleetUnavailable)
    /// Another machine held a shared slot's fleet lock too long.
    public static let fleetLockTimeout = ErrorCode(.fleetLockTimeout)
    /// `fleet init` on a fleet that exists.
    public static let fleetExists = ErrorCode(.fleetExists)
    /// The fleet has not been created.
    public static let fleetMissing = ErrorCode(.fleetMissing)
    /// This machine is not an approved member of the fleet.
    public static let fleetNotMember = ErrorCode(.fleetNotMember)
    /// No member or join request by that name.
    public static let fleetUnknownMachine = ErrorCode(.fleetUnknownMachine)
    /// `fleet approve`'s fingerprint is not the one the join request carries.
    public static let fleetFingerprintMismatch = ErrorCode(.fleetFingerprintMismatch)
    /// `fleet join --fleet-fingerprint` is not the fleet's genesis in etcd.
    public static let fleetPinMismatch = ErrorCode(.fleetPinMismatch)
    /// This machine has not joined the fleet `[fleet] name` names.
    public static let fleetNotJoined = ErrorCode(.fleetNotJoined)
    /// The fleet's membership log does not verify from this machine's pin.
    public static let fleetUntrusted = ErrorCode(.fleetUntrusted)
    /// A shared slot's value was deleted from etcd.
    public static let fleetValueMissing = ErrorCode(.fleetValueMissing)
    /// Another machine presented this refresh token and has not written its successor.
    public static let fleetRefreshInFlight = ErrorCode(.fleetRefreshInFlight)
    /// The slot was unshared and its live credential stayed on another machine.
    public static let fleetHandedOver = ErrorCode(.fleetHandedOver)
    /// The slot is already shared, or is shared and cannot be changed on one machine.
    public static let fleetSlotShared = ErrorCode(.fleetSlotShared)
    /// The slot is not shared.
    public static let fleetSlotNotShared = ErrorCode(.fleetSlotNotShared)
    /// A credential from etcd did not decrypt, decode or name the slot's account.
    public static let fleetCredentialRefused = ErrorCode(.fleetCredentialRefused)
    /// This machine's fleet identity cannot be read from its store.
    public static let fleetIdentityUnavailable = ErrorCode(.fleetIdentityUnavailable)
    /// The fleet lock's lease ran out before a refresh could start or be written.
    public static let fleetLockLost = ErrorCode(.fleetLockLost)
    /// A fleet key in etcd does not decode.
    public static let fleetDataCorrupt = ErrorCode(.fleetDataCorrupt)
    /// A member signed something for a membership entry this machine cannot verify: it writes
    /// nothing for the fleet until it can.
    public static let fleetMembershipBehind = ErrorCode(.fleetMembershipBehind)
    /// Two different membership entries claim one number: nothing is written until a person
    /// resolves it.
    public static let fleetForked = ErrorCode(.fleetForked)
    /// A shared slot's new credential is kept on this machine and not yet written to etcd (the
    /// next sync or refresh writes it): the event log records it; no command fails with it.
    public static let fleetWritePending = ErrorCode(.fleetWritePending)

    // etcd.
    /// No etcd endpoint answered.
    public static let etcdUnreachable = ErrorCode(.etcdUnreachable)
    /// etcd answered but could not serve the request (no leader, no quorum).
    public static let etcdUnavailable = ErrorCode(.etcdUnavailable)
    /// TLS to etcd failed.
    public static let etcdTLS = ErrorCode(.etcdTLS)
    /// etcd refused the user, token or permission.
    public static let etcdPermissionDenied = ErrorCode(.etcdPermissionDenied)
    /// etcd's answer could not be read.
    public static let etcdMalformedAnswer = ErrorCode(.etcdMalformedAnswer)
    /// A watch started from a revision etcd has compacted away.
    public static let etcdCompacted = ErrorCode(.etcdCompacted)
    /// A request to etcd was cancelled.
    public static let etcdCancelled = ErrorCode(.etcdCancelled)
    /// Any other error etcd returned.
    public static let etcdError = ErrorCode(.etcdError)
}

extension ErrorCode: CustomStringConvertible {
    /// The raw value, so that a code written into text reads as scripts see it.
    public var description: String { rawValue }
}
