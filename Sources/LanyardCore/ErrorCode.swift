/// The stable machine code of a ``LanyardError``: one case for each code Lanyard reports.
///
/// Raw values are what `--json` output writes (`{"error": {"code": …}}`), the event log records
/// and scripts compare, so they never change once published; docs/cli.md's error-code table lists
/// each with its exit status. Programs compare cases, never strings: a code read back from
/// outside (another process's output) is parsed with `init(rawValue:)` and falls back to a
/// generic case. A new case does not compile until the `lanyard` command has decided its exit
/// status.
public enum ErrorCode: String, CaseIterable, Sendable {
    // Not signed in.
    /// The slot has no stored credential.
    case missingCredential = "missing_credential"
    /// No slot by that name.
    case unknownSlot = "unknown_slot"
    /// No slot was given and none is active.
    case noActiveSlot = "no_active_slot"

    // The slot must sign in again.
    /// The refresh token is dead.
    case reauthenticationRequired = "reauthentication_required"
    /// The slot (or the server's answer) has no refresh token.
    case missingRefreshToken = "missing_refresh_token"
    /// The slot has no account id.
    case missingAccountID = "missing_account_id"
    /// The token endpoint refused the sign-in (HTTP 400, 401 or 403).
    case tokenExchangeRefused = "token_exchange_refused"

    // The credential store.
    /// No keyring or encrypted store to talk to.
    case storeUnavailable = "store_unavailable"
    /// The keyring collection or encrypted store is locked.
    case storeLocked = "store_locked"
    /// The store did not answer in time.
    case storeTimedOut = "store_timed_out"
    /// Stored data did not decode (it is left as it is).
    case storeCorrupt = "store_corrupt"
    /// The passphrase does not open the store or bundle.
    case wrongPassphrase = "wrong_passphrase"
    /// A path is a symbolic link, owned by someone else, or writable by others.
    case unsafePath = "unsafe_path"
    /// The file store is sealed by a TPM, and no TPM answers (or libtss2 is not installed).
    case tpmUnavailable = "tpm_unavailable"
    /// The TPM's device exists but this user may not open it (group `tss` on Debian).
    case tpmPermissionDenied = "tpm_permission_denied"
    /// The file store was sealed by another TPM (a copied home), or this TPM was cleared since.
    case tpmMismatch = "tpm_mismatch"
    /// The TPM is in dictionary-attack lockout after too many wrong PINs.
    case tpmLockout = "tpm_lockout"
    /// The TPM PIN is wrong (the TPM counted the failure).
    case tpmWrongPIN = "tpm_wrong_pin"
    /// Any other TPM failure, or a sealed identity the TPM refuses.
    case tpmFailed = "tpm_failed"
    /// Reading or writing a file failed.
    case ioError = "io_error"
    /// Refreshed tokens could not be stored; they wait in the slot's recovery file.
    case refreshedTokensInRecoveryFile = "refreshed_tokens_in_recovery_file"
    /// Refreshed tokens could be written neither to the store nor to the recovery file; they
    /// wait in memory, in the kernel keyring, until the machine restarts.
    case refreshedTokensInKernelKeyring = "refreshed_tokens_in_kernel_keyring"
    /// Refreshed tokens could be kept nowhere after the server replaced the refresh token: the
    /// sign-in is lost.
    case refreshedSignInLost = "refreshed_sign_in_lost"
    /// The registry did not parse (it was moved aside).
    case registryCorrupt = "registry_corrupt"
    /// The slot name is taken.
    case slotExists = "slot_exists"
    /// `logout --revoke` could not revoke (no revocation endpoint, a fleet's token) and was not
    /// told to sign out anyway (`--yes`).
    case revocationUnavailable = "revocation_unavailable"
    /// A sign-in came back as another account than the slot's.
    case slotHoldsAnotherAccount = "slot_holds_another_account"
    /// Another sign-in into the same slot is in progress.
    case signInInProgress = "sign_in_in_progress"
    /// config.ini does not parse or holds a bad value.
    case configInvalid = "config_invalid"
    /// No passphrase source (terminal, file or askpass).
    case passphraseUnavailable = "passphrase_unavailable"

    // Network and servers.
    /// No answer from the server.
    case networkFailure = "network_failure"
    /// `lanyard-net` (the HTTP half) could not be run.
    case networkUnavailable = "network_unavailable"
    /// The server's answer was malformed or carried text Lanyard refuses.
    case invalidResponse = "invalid_response"
    /// The server answered with an error status.
    case httpError = "http_error"
    /// The token endpoint failed (statuses other than 400, 401 and 403).
    case tokenExchangeFailed = "token_exchange_failed"
    /// A reconnected stream replayed different text.
    case streamingReplayDiverged = "streaming_replay_diverged"
    /// The response ended failed or incomplete.
    case responseFailed = "response_failed"
    /// A request header would carry a control character (refused, not sent).
    case invalidHeader = "invalid_header"
    /// The account's usage limit is reached.
    case usageLimitReached = "usage_limit_reached"

    // Signing in.
    /// Ctrl-C during sign-in.
    case cancelledSignIn = "cancelled_sign_in"
    /// The device code expired before it was approved.
    case expiredDeviceCode = "expired_device_code"
    /// Approval did not come in time.
    case pollingTimeout = "polling_timeout"
    /// The sign-in callback did not come in time.
    case callbackTimeout = "callback_timeout"
    /// Every port a browser sign-in may listen on is taken (another sign-in, such as Codex's own).
    case callbackPortInUse = "callback_port_in_use"
    /// The sign-in was denied.
    case authorizationDenied = "authorization_denied"
    /// The system's random source failed.
    case secureRandomFailed = "secure_random_failed"
    /// The provider does not offer device-code sign-in here.
    case deviceCodeNotEnabled = "device_code_not_enabled"
    /// An unexpected sign-in failure.
    case unknown = "unknown"

    // The command line and the programs Lanyard serves.
    /// A bad command line, or a question the slot's provider cannot answer.
    case usage = "usage"
    /// `--account`, `LANYARD_ACCOUNT` or a pin names an invalid slot.
    case invalidSlotName = "invalid_slot_name"
    /// git's request on stdin is malformed or too long.
    case gitCredentialInput = "git_credential_input"
    /// Docker's request on stdin is malformed or too long.
    case dockerCredentialInput = "docker_credential_input"
    /// `KUBERNETES_EXEC_INFO` asks for what Lanyard cannot give.
    case kubeExecInfo = "kube_exec_info"
    /// The command was interrupted.
    case cancelled = "cancelled"
    /// `exec`'s command is not on PATH.
    case commandNotFound = "command_not_found"
    /// `exec`'s command was found but could not be started.
    case commandNotRunnable = "command_not_runnable"
    /// A value no environment variable can hold (a NUL byte).
    case invalidValue = "invalid_value"
    /// The integration cannot do this for the slot.
    case integrationUnsupported = "integration_unsupported"
    /// Codex keeps its sign-in in the keyring (`cli_auth_credentials_store`), and that keyring
    /// does not answer or is locked: nothing was written.
    case codexKeyringUnavailable = "codex_keyring_unavailable"
    /// `login --with-access-token` was given a token the server refused (HTTP 401 or 403).
    case accessTokenRejected = "access_token_rejected"
    /// `login --with-access-token` was given a token of a kind Lanyard does not hold (an agent
    /// identity), or the provider has no such tokens.
    case accessTokenUnsupported = "access_token_unsupported"
    /// A netrc value has white space or a control character.
    case netrcField = "netrc_field"
    /// gh's hosts.yml does not parse.
    case ghHostsCorrupt = "gh_hosts_corrupt"
    /// The bundle is not a whole, authentic bundle.
    case bundleCorrupt = "bundle_corrupt"
    /// The bundle holds no slots.
    case bundleEmpty = "bundle_empty"
    /// The bundle could not be encrypted or written.
    case bundleEncrypt = "bundle_encrypt"
    /// The bundle file does not exist.
    case bundleMissing = "bundle_missing"
    /// No identity given opens the bundle.
    case bundleNoIdentity = "bundle_no_identity"
    /// A bundle record's provider differs from its credential's.
    case bundleProviderMismatch = "bundle_provider_mismatch"
    /// A bundle names a provider config.ini does not know.
    case bundleUnknownProvider = "bundle_unknown_provider"
    /// No slot to export.
    case nothingToExport = "nothing_to_export"
    /// Another agent is running.
    case agentRunning = "agent_running"
    /// `git config` failed.
    case gitConfigFailed = "git_config_failed"
    /// A refresh worker failed without saying why (the status it exited with is passed on).
    case refreshFailed = "refresh_failed"
    /// Any other failure (an error that is not a ``LanyardError``).
    case error = "error"

    // Fleets.
    /// config.ini has no `[fleet]` group.
    case fleetNotConfigured = "fleet_not_configured"
    /// The fleet's etcd cannot be reached or has no quorum.
    case fleetUnavailable = "fleet_unavailable"
    /// Another machine held a shared slot's fleet lock too long.
    case fleetLockTimeout = "fleet_lock_timeout"
    /// `fleet init` on a fleet that exists.
    case fleetExists = "fleet_exists"
    /// The fleet has not been created.
    case fleetMissing = "fleet_missing"
    /// This machine is not an approved member of the fleet.
    case fleetNotMember = "fleet_not_member"
    /// No member or join request by that name.
    case fleetUnknownMachine = "fleet_unknown_machine"
    /// `fleet approve`'s fingerprint is not the one the join request carries.
    case fleetFingerprintMismatch = "fleet_fingerprint_mismatch"
    /// `fleet join --fleet-fingerprint` is not the fleet's genesis in etcd.
    case fleetPinMismatch = "fleet_pin_mismatch"
    /// This machine has not joined the fleet `[fleet] name` names.
    case fleetNotJoined = "fleet_not_joined"
    /// The fleet's membership log does not verify from this machine's pin.
    case fleetUntrusted = "fleet_untrusted"
    /// A shared slot's value was deleted from etcd.
    case fleetValueMissing = "fleet_value_missing"
    /// Another machine presented this refresh token and has not written its successor.
    case fleetRefreshInFlight = "fleet_refresh_in_flight"
    /// The slot was unshared and its live credential stayed on another machine.
    case fleetHandedOver = "fleet_handed_over"
    /// The slot is already shared, or is shared and cannot be changed on one machine.
    case fleetSlotShared = "fleet_slot_shared"
    /// The slot is not shared.
    case fleetSlotNotShared = "fleet_slot_not_shared"
    /// A credential from etcd did not decrypt, decode or name the slot's account.
    case fleetCredentialRefused = "fleet_credential_refused"
    /// This machine's fleet identity cannot be read from its store.
    case fleetIdentityUnavailable = "fleet_identity_unavailable"
    /// The fleet lock's lease ran out before a refresh could start or be written.
    case fleetLockLost = "fleet_lock_lost"
    /// A fleet key in etcd does not decode.
    case fleetDataCorrupt = "fleet_data_corrupt"
    /// A member signed something for a membership entry this machine cannot verify: it writes
    /// nothing for the fleet until it can.
    case fleetMembershipBehind = "fleet_membership_behind"
    /// Two different membership entries claim one number: nothing is written until a person
    /// resolves it.
    case fleetForked = "fleet_forked"

    // etcd.
    /// No etcd endpoint answered.
    case etcdUnreachable = "etcd_unreachable"
    /// etcd answered but could not serve the request (no leader, no quorum).
    case etcdUnavailable = "etcd_unavailable"
    /// TLS to etcd failed.
    case etcdTLS = "etcd_tls"
    /// etcd refused the user, token or permission.
    case etcdPermissionDenied = "etcd_permission_denied"
    /// etcd's answer could not be read.
    case etcdMalformedAnswer = "etcd_malformed_answer"
    /// A watch started from a revision etcd has compacted away.
    case etcdCompacted = "etcd_compacted"
    /// A request to etcd was cancelled.
    case etcdCancelled = "etcd_cancelled"
    /// Any other error etcd returned.
    case etcdError = "etcd_error"
}

extension ErrorCode: CustomStringConvertible {
    /// The raw value, so that a code written into text reads as scripts see it.
    public var description: String { rawValue }
}
