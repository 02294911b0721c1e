import FoundationEssentials

/// Lanyard's settings (`$XDG_CONFIG_HOME/lanyard/config.ini`), with the documented defaults.
/// `[desktop] label`: what the tray writes beside its icon on hosts that show a label.
package enum DesktopLabel: String, Sendable, Equatable, CaseIterable {
    /// "42 %": the active slot's busiest window.
    case percent
    /// "work": the active slot's name.
    case slot
    case off
}

package struct LanyardConfig: Hashable, Sendable {
    /// Which backend new slots use.
    public enum BackendChoice: String, Hashable, Sendable, CaseIterable {
        /// The Secret Service when it answers, else the encrypted file.
        case auto
        case secretService = "secret-service"
        case file
    }

    public var backend: BackendChoice = .auto
    /// Bound on each keyring call for non-interactive commands, in seconds.
    public var storeTimeout: TimeInterval = 5
    /// Bound for interactive commands (a person may be typing the keyring password).
    public var interactiveStoreTimeout: TimeInterval = 120
    /// How long an unlocked file-store identity stays cached in the kernel keyring, in seconds.
    public var unlockCacheSeconds: TimeInterval = 900
    /// Refresh when the access token expires within this many seconds…
    public var refreshLead: TimeInterval = 300
    /// …or within this share of its lifetime, when that is less (a token that lives no longer
    /// than the lead would otherwise be refreshed on every use).
    public var refreshLeadShare: Double = 0.5
    /// Refresh anyway when the last refresh is older than this and `exp` is unreadable.
    public var refreshMaxAge: TimeInterval = 8 * 24 * 3600
    public var backoff: BackoffPolicy = .default
    /// Seconds each HTTP request to a provider may take.
    public var httpTimeout: TimeInterval = 30
    /// Seconds added to the polling interval on each `slow_down` (RFC 8628 says 5).
    public var slowDownIncrement: TimeInterval = 5
    /// The longest `login` waits for approval; nil means the provider's own limit.
    public var loginTimeout: TimeInterval?
    /// The Secret Service collection new items go into: an alias (`default`, `login`, `session`)
    /// or a collection's D-Bus object path; nil means the `default` alias.
    public var keyringCollection: String?
    /// `[store] tpm-tcti`: the TCTI of the TPM that seals the file store's identity, as tpm2-tools
    /// take it (`device:/dev/tpmrm0`, `swtpm:host=…,port=…`), when neither TPM2TOOLS_TCTI nor TCTI
    /// is set; nil means libtss2's default (the resource manager `/dev/tpmrm0`).
    package var tpmTCTI: String?
    /// Keep Codex's auth.json in step with `lanyard switch`.
    public var codexIntegration = false
    /// The agent's spread: each slot refreshes up to this many seconds after it falls due (capped at
    /// half the refresh lead), so slots do not refresh together.
    public var agentJitter: TimeInterval = 30
    /// A command (run with `/bin/sh -c`) that receives each agent event as one JSON line on stdin.
    public var agentHook: String?
    /// Whether the agent shows desktop notifications (org.freedesktop.Notifications).
    public var agentNotify = true
    /// The event log's size cap in bytes; beyond it the log rotates to `events.jsonl.1`.
    public var eventsMaxBytes: Int = 1 << 20
    /// `[switch]`: whether the agent switches away from an active slot that runs out of usage.
    public var autoSwitch = AutoSwitchPolicy()
    /// `[desktop] notify`: the used percentages (ascending, 1 to 100) at which `lanyard tray`
    /// notifies that the active slot crossed them; empty when off.
    package var desktopNotifyPercents: [Int] = [80, 95]
    /// `[desktop] label`: the text beside the tray's icon where the host shows one (Ayatana's
    /// `XAyatanaLabel`): the active slot's busiest percentage, its name, or nothing.
    package var desktopLabel: DesktopLabel = .percent
    /// How streams reach the backend (`[stream]`).
    public var streaming: StreamingTransportPolicy = .default
    /// The model `lanyard ask` asks when no `--model` is given.
    public var streamModel = "gpt-5-codex"
    /// Providers by id; `openai` and `github` are always present.
    public var providers: [String: ProviderConfig] = ["openai": .openAI, "github": .gitHub]
    /// `[git]` mappings for `lanyard git-credential`: `HOST` or `HOST/PATH/PREFIX` (host lowercased,
    /// no leading or trailing slash) to the slot whose token git gets.
    public var gitCredentials: [String: Slot] = [:]
    /// `[docker]` mappings for `docker-credential-lanyard`: registry host (lowercased, with `:PORT`
    /// when not 443) to the slot whose token the registry gets.
    public var dockerCredentials: [String: Slot] = [:]
    /// `[netrc]` mappings for `lanyard netrc`: host to slot.
    public var netrcCredentials: [String: Slot] = [:]
    /// `[fleet]`: the etcd cluster this machine shares slots through; nil when not configured.
    package var fleet: FleetSettings?

    public init() {}
}

/// `[fleet]`: how this machine reaches the fleet's etcd cluster, and its name there.
package struct FleetSettings: Hashable, Sendable {
    /// The fleet's name: its keys live under `/lanyard/NAME/`.
    package var name: String
    /// This machine's name in the fleet (default: the host name).
    package var machine: String
    /// etcd client URLs, tried in order: `https://` unless one says `http://`, which config.ini
    /// allows only to this machine (loopback).
    package var endpoints: [String]
    /// The CA that signed etcd's server certificates (default: the system's).
    package var caFile: String?
    /// This machine's TLS client certificate and key.
    package var certFile: String?
    package var keyFile: String?
    /// etcd user (with `password-file`), when etcd's authentication is on.
    package var user: String?
    package var passwordFile: String?
    /// The fleet lock's lease in seconds; nil: derived from the HTTP timeout (a refresh request's
    /// hard limit) so a live request never outlasts its lock.
    package var lockTTL: TimeInterval?
    /// Seconds each request to etcd may take.
    package var requestTimeout: TimeInterval = 5

    package init(name: String, machine: String, endpoints: [String]) {
        self.name = name
        self.machine = machine
        self.endpoints = endpoints
    }

    /// Where the fleet's keys live.
    package var prefix: String { "/lanyard/\(name)/" }
}

/// `[switch]`: the agent's usage-aware switching of the active slot.
package struct AutoSwitchPolicy: Hashable, Sendable {
    /// What makes the agent switch.
    public enum Mode: String, Hashable, Sendable, CaseIterable {
        /// Never (the default).
        case off
        /// When the active slot's busiest usage window reaches ``AutoSwitchPolicy/threshold`` or
        /// it hits its usage limit.
        case usage
    }

    public var mode: Mode = .off
    /// The busiest window's used percentage at which the active slot counts as run out.
    public var threshold: Double = 95
    /// Seconds between checks of the active slot's usage (see ``pollInterval(usageBaseURL:)``).
    public var poll: TimeInterval = 300

    /// The shortest interval between usage checks against a provider on another machine.
    public static let minimumPoll: TimeInterval = 60

    public init(mode: Mode = .off, threshold: Double = 95, poll: TimeInterval = 300) {
        self.mode = mode
        self.threshold = threshold
        self.poll = poll
    }

    /// The seconds between usage checks against a usage endpoint at `usageBaseURL`: ``poll``, but
    /// at least ``minimumPoll`` unless the endpoint is on this machine (a test server, a local proxy).
    public func pollInterval(usageBaseURL: URL?) -> TimeInterval {
        if let host = usageBaseURL?.host, Loopback.isLoopback(host: host) { return poll }
        return max(poll, Self.minimumPoll)
    }
}

/// One sign-in provider.
package struct ProviderConfig: Hashable, Sendable {
    public enum Kind: String, Hashable, Sendable {
        /// ChatGPT's device sign-in, as the Codex CLI speaks it.
        case openai
        /// RFC 8628 device authorization with OIDC discovery or explicit endpoints.
        case deviceCode = "device-code"
    }

    public var id: String
    public var kind: Kind
    public var issuer: URL
    public var clientID: String
    public var scopes: [String]
    /// Dotted claim path that carries a plan name (generic providers).
    public var planClaim: String?
    /// Dotted claim path that carries an account id (generic providers).
    public var accountClaim: String?
    public var deviceAuthorizationEndpoint: URL?
    /// Where a browser sign-in starts (RFC 6749 §3.1, `authorization-endpoint`): with it, a
    /// generic provider signs in through the browser with a loopback redirect (RFC 8252).
    public var authorizationEndpoint: URL?
    public var tokenEndpoint: URL?
    public var revocationEndpoint: URL?
    /// ChatGPT backend base for the usage endpoint (openai).
    public var usageBaseURL: URL?
    /// The provider's own page of the account's usage, for people (`usage-page-url`): the tray's
    /// "Open usage details" opens it in the browser when there is no terminal to run
    /// `lanyard usage --all` in.
    public var usagePageURL: URL?
    /// The provider's page where a person revokes a personal access token (`tokens-page-url`):
    /// `fleet remove` names it for a shared slot that holds one, which nothing can rotate.
    public var tokensPageURL: URL?
    /// Environment variables `lanyard exec`/`env` set, mapped to a token field
    /// (`access_token`, `id_token`, `account_id`).
    public var environment: [String: String]
    /// The username `lanyard git-credential get`, `docker-credential-lanyard` and `lanyard netrc`
    /// answer for this provider's slots (`git-username`); nil means `x-access-token`.
    public var gitUsername: String?
    /// Which token `lanyard kube-credential` hands to kubectl (`kube-token`).
    public var kubeToken: KubeToken = .accessToken

    /// The token a Kubernetes exec credential carries.
    public enum KubeToken: String, Hashable, Sendable {
        case accessToken = "access-token"
        case idToken = "id-token"
    }

    public init(
        id: String,
        kind: Kind,
        issuer: URL,
        clientID: String,
        scopes: [String] = [],
        planClaim: String? = nil,
        accountClaim: String? = nil,
        deviceAuthorizationEndpoint: URL? = nil,
        tokenEndpoint: URL? = nil,
        revocationEndpoint: URL? = nil,
        usageBaseURL: URL? = nil,
        environment: [String: String] = [:]
    ) {
        self.id = id
        self.kind = kind
        self.issuer = issuer
        self.clientID = clientID
        self.scopes = scopes
        self.planClaim = planClaim
        self.accountClaim = accountClaim
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.usageBaseURL = usageBaseURL
        self.environment = environment
    }

    /// GitHub, for tokens adopted from the GitHub CLI (`lanyard gh import`): `GH_TOKEN` for
    /// `exec`/`env`. Signing in needs an OAuth app of your own with device flow enabled
    /// (`client-id` in `[provider.github]`); GitHub publishes no OIDC discovery, hence the endpoints.
    public static let gitHub: ProviderConfig = {
        var github = ProviderConfig(
            id: "github",
            kind: .deviceCode,
            issuer: URL(string: "https://github.com")!,
            clientID: "",
            scopes: ["repo", "read:org", "gist"],
            deviceAuthorizationEndpoint: URL(string: "https://github.com/login/device/code")!,
            tokenEndpoint: URL(string: "https://github.com/login/oauth/access_token")!,
            environment: ["GH_TOKEN": "access_token"]
        )
        github.gitUsername = "x-access-token"
        return github
    }()

    /// ChatGPT sign-in with the Codex CLI's public client.
    public static let openAI: ProviderConfig = {
        var openAI = ProviderConfig(
            id: "openai",
            kind: .openai,
            issuer: URL(string: "https://auth.openai.com")!,
            clientID: "app_EMoamEEZ73f0CkXaXp7hrann",
            scopes: ["openid", "profile", "email", "offline_access"],
            usageBaseURL: URL(string: "https://chatgpt.com")!,
            environment: [:]
        )
        // The page Codex's own usage-limit messages send people to.
        openAI.usagePageURL = URL(string: "https://chatgpt.com/codex/settings/usage")!
        return openAI
    }()
}
