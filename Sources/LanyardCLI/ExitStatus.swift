import LanyardAuth
import LanyardCore
import LanyardStore

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
    /// error becomes an exit status. docs/cli.md's error-code table lists the same pairs
    /// (`DocumentationTests` checks both ways); a code missing here exits 1.
    static let byCode: [String: ExitStatus] = [
        // not signed in
        "missing_credential": .notSignedIn, "unknown_slot": .notSignedIn, "no_active_slot": .notSignedIn,
        // the slot must sign in again
        "reauthentication_required": .reauthenticationRequired, "missing_refresh_token": .reauthenticationRequired,
        "missing_account_id": .reauthenticationRequired, "token_exchange_refused": .reauthenticationRequired,
        // the credential store
        "store_unavailable": .storeUnavailable, "store_locked": .storeUnavailable, "store_timed_out": .storeUnavailable,
        "fleet_unavailable": .storeUnavailable, "fleet_lock_timeout": .storeUnavailable,
        "etcd_unreachable": .storeUnavailable, "etcd_unavailable": .storeUnavailable, "etcd_tls": .storeUnavailable,
        "etcd_permission_denied": .storeUnavailable,
        // network and servers
        "network_failure": .network, "network_unavailable": .network, "invalid_response": .network, "http_error": .network,
        "token_exchange_failed": .network, "streaming_replay_diverged": .network, "response_failed": .network,
        // usage
        "usage_limit_reached": .usageLimit,
        // the command line
        "usage": .usage, "invalid_slot_name": .usage, "git_credential_input": .usage, "docker_credential_input": .usage,
        "kube_exec_info": .usage,
        "cancelled_sign_in": .cancelled, "cancelled": .cancelled, "command_not_found": .commandNotFound,
        "command_not_runnable": .commandNotRunnable,
        // everything else that went wrong
        "store_corrupt": .failure, "wrong_passphrase": .failure, "unsafe_path": .failure, "io_error": .failure,
        "registry_corrupt": .failure, "slot_exists": .failure, "slot_holds_another_account": .failure, "sign_in_in_progress": .failure, "config_invalid": .failure, "passphrase_unavailable": .failure,
        "expired_device_code": .failure, "polling_timeout": .failure, "callback_timeout": .failure,
        "authorization_denied": .failure, "secure_random_failed": .failure, "device_code_not_enabled": .failure,
        "unknown": .failure, "invalid_header": .failure, "invalid_value": .failure, "integration_unsupported": .failure,
        "netrc_field": .failure, "gh_hosts_corrupt": .failure, "bundle_corrupt": .failure, "bundle_empty": .failure,
        "bundle_encrypt": .failure, "bundle_missing": .failure, "bundle_no_identity": .failure,
        "bundle_provider_mismatch": .failure, "bundle_unknown_provider": .failure, "nothing_to_export": .failure,
        "agent_running": .failure, "git_config_failed": .failure, "error": .failure,
        "fleet_not_configured": .failure, "fleet_exists": .failure, "fleet_missing": .failure, "fleet_not_member": .failure,
        "fleet_unknown_machine": .failure, "fleet_fingerprint_mismatch": .failure, "fleet_slot_shared": .failure,
        "fleet_slot_not_shared": .failure, "fleet_credential_refused": .failure, "fleet_identity_unavailable": .failure,
        "fleet_lock_lost": .failure, "fleet_data_corrupt": .failure,
        "fleet_pin_mismatch": .failure, "fleet_not_joined": .failure, "fleet_untrusted": .failure, "fleet_value_missing": .failure,
        "fleet_refresh_in_flight": .failure, "fleet_handed_over": .reauthenticationRequired, "etcd_malformed_answer": .failure, "etcd_compacted": .failure,
        "etcd_error": .failure, "etcd_cancelled": .cancelled,
    ]

    /// The exit status for `error`: by its code, except a refresh worker's failure, which passes
    /// on the status the worker (this same command) already chose.
    init(for error: any Error) {
        switch error {
        case let worker as WorkerError: self = ExitStatus(rawValue: worker.status) ?? .failure
        case let e as any LanyardError: self = Self.byCode[e.code] ?? .failure
        case is CancellationError: self = .cancelled
        default: self = .failure
        }
    }
}

extension LanyardError {
    /// The `lanyard` command's exit status for this error (``ExitStatus/byCode``).
    var exitStatus: ExitStatus { ExitStatus(for: self) }
}
