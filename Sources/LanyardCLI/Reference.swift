/// The reference facts help and the man page print besides the command table: environment
/// variables, files, and what each exit status means. docs/cli.md carries the same tables (a test
/// compares them).
extension Lanyard {
    /// A name and what it means, as help and the man page list them.
    package struct ReferenceEntry: Sendable {
        package let name: String
        package let meaning: String
    }

    /// Environment variables Lanyard reads.
    package static let environment: [ReferenceEntry] = [
        .init(name: "LANYARD_ACCOUNT", meaning: "the slot to act on, unless --account is given"),
        .init(
            name: "LANYARD_PASSPHRASE_FILE",
            meaning: "a file whose first line is the passphrase (file store, export and import bundles)"
        ),
        .init(name: "LANYARD_ASKPASS", meaning: "a program that prints the passphrase (called with a prompt argument)"),
        .init(
            name: "TPM2TOOLS_TCTI",
            meaning: "the TPM that seals a file store made with store init --tpm, "
                + "as tpm2-tools take it (device:/dev/tpmrm0, swtpm:host=HOST,port=PORT)"
        ),
        .init(name: "TCTI", meaning: "the same, when TPM2TOOLS_TCTI is unset; then [store] tpm-tcti, else /dev/tpmrm0"),
        .init(name: "NO_COLOR", meaning: "any non-empty value turns colour off"),
        .init(name: "XDG_CONFIG_HOME", meaning: "config: $XDG_CONFIG_HOME/lanyard/config.ini (default ~/.config)"),
        .init(
            name: "XDG_DATA_HOME",
            meaning: "registry and encrypted store: $XDG_DATA_HOME/lanyard/ (default ~/.local/share)"
        ),
        .init(
            name: "XDG_STATE_HOME",
            meaning: "event log and recovery files: $XDG_STATE_HOME/lanyard/ (default ~/.local/state)"
        ),
        .init(name: "XDG_RUNTIME_DIR", meaning: "locks and per-process homes: $XDG_RUNTIME_DIR/lanyard/"),
        .init(
            name: "LANYARD_EVENT_SOURCE",
            meaning: "the source written in the event log (set to agent by the agent, tray by the tray; default cli)"
        ),
        .init(
            name: "LANYARD_TRACE_STARTUP",
            meaning:
                "1 prints how long each start-up phase took, in ms, on stderr (never a secret; see docs/performance.md)"
        ),
    ]

    /// Files Lanyard reads and writes.
    package static let files: [ReferenceEntry] = [
        .init(name: "$XDG_CONFIG_HOME/lanyard/config.ini", meaning: "settings (GLib key-file syntax; see docs/cli.md)"),
        .init(
            name: "$XDG_DATA_HOME/lanyard/registry.json",
            meaning: "the slots, the active slot and per-slot metadata (no secrets); "
                + "registry.json.prev is the previous generation"
        ),
        .init(
            name: "$XDG_DATA_HOME/lanyard/store.age",
            meaning: "the encrypted-file backend (age v1), with identity.age, "
                + "identity.tpm (sealed by the TPM) or identity.txt beside it"
        ),
        .init(
            name: "$XDG_STATE_HOME/lanyard/recovery/SLOT.json",
            meaning: "refreshed tokens not yet in the store (0600)"
        ),
        .init(
            name: "$XDG_STATE_HOME/lanyard/events.jsonl",
            meaning: "the event log (JSON lines, 0600; never a token) and events.jsonl.1, its previous generation"
        ),
        .init(
            name: "$XDG_DATA_HOME/lanyard/locks/SLOT.lock",
            meaning:
                "the per-slot refresh lock (beside the data it guards, so every process that shares the data shares it)"
        ),
        .init(
            name: "$XDG_DATA_HOME/lanyard/locks/agent.lock",
            meaning: "held by the running agent (one per data folder)"
        ),
        .init(name: "$XDG_RUNTIME_DIR/lanyard/tray.lock", meaning: "held by the running tray (one per session)"),
        .init(
            name: "$XDG_CONFIG_HOME/autostart/lanyard-tray.desktop",
            meaning: "the tray's XDG autostart entry (`lanyard tray --install-autostart`)"
        ),
        .init(
            name: "$XDG_RUNTIME_DIR/lanyard/exec/",
            meaning: "private per-process folders of `lanyard exec` (CODEX_HOME, with .lanyard-exec.lock), removed "
                + "when the command exits, or by doctor or the next exec once a killed one's lock is free"
        ),
        .init(
            name: ".lanyard",
            meaning: "a pin: the slot name on its first non-comment line, found in the working directory or a parent"
        ),
    ]
}

extension ExitStatus {
    /// One line for help, the man page and docs/cli.md.
    package var meaning: String {
        switch self {
        case .ok: return "success"
        case .failure: return "error (corrupt registry or config, I/O failure, …)"
        case .usage: return "usage: unknown command or option, bad argument, missing confirmation"
        case .notSignedIn: return "not signed in: no such slot, no active slot, no stored credential"
        case .reauthenticationRequired: return "the slot must sign in again (reauthentication required)"
        case .storeUnavailable: return "credential store locked, unavailable or not answering"
        case .network: return "network or server failure"
        case .usageLimit: return "usage limit reached"
        case .commandNotRunnable: return "exec: the command was found but could not be run (as a shell)"
        case .commandNotFound: return "exec: the command was not found (as a shell)"
        case .cancelled: return "cancelled"
        }
    }
}
