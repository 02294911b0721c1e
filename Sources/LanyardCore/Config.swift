import Foundation

/// Lanyard's settings (`$XDG_CONFIG_HOME/lanyard/config.ini`), with the documented defaults.
public struct LanyardConfig: Hashable, Sendable {
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
    /// Refresh when the access token expires within this many seconds.
    public var refreshLead: TimeInterval = 300
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
    /// How streams reach the backend (`[stream]`).
    public var streaming: StreamingTransportPolicy = .default
    /// The model `lanyard ask` asks when no `--model` is given.
    public var streamModel = "gpt-5-codex"
    /// Providers by id; `openai` is always present.
    public var providers: [String: ProviderConfig] = ["openai": .openAI]
    /// `[git]` mappings for `lanyard git-credential`: `HOST` or `HOST/PATH/PREFIX` (host lowercased,
    /// no leading or trailing slash) to the slot whose token git gets.
    public var gitCredentials: [String: Slot] = [:]

    public init() {}
}

/// One sign-in provider.
public struct ProviderConfig: Hashable, Sendable {
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
    public var tokenEndpoint: URL?
    public var revocationEndpoint: URL?
    /// ChatGPT backend base for the usage endpoint (openai).
    public var usageBaseURL: URL?
    /// Environment variables `lanyard exec`/`env` set, mapped to a token field
    /// (`access_token`, `id_token`, `account_id`).
    public var environment: [String: String]
    /// The username `lanyard git-credential get` answers for this provider's slots (`git-username`);
    /// nil means `x-access-token`.
    public var gitUsername: String?

    public init(id: String, kind: Kind, issuer: URL, clientID: String, scopes: [String] = [], planClaim: String? = nil,
                accountClaim: String? = nil, deviceAuthorizationEndpoint: URL? = nil, tokenEndpoint: URL? = nil,
                revocationEndpoint: URL? = nil, usageBaseURL: URL? = nil, environment: [String: String] = [:]) {
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

    /// ChatGPT sign-in with the Codex CLI's public client.
    public static let openAI = ProviderConfig(
        id: "openai", kind: .openai, issuer: URL(string: "https://auth.openai.com")!,
        clientID: "app_EMoamEEZ73f0CkXaXp7hrann", scopes: ["openid", "profile", "email", "offline_access"],
        usageBaseURL: URL(string: "https://chatgpt.com")!, environment: [:])
}
