import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardStore

/// How an ``AuthSession`` or ``Client`` finds its slot, store and provider. One value serves both.
public struct Configuration: Sendable {
    /// The slot to use; nil applies the CLI's rules (`LANYARD_ACCOUNT`, the nearest `.lanyard`
    /// file, the active slot).
    public var slot: String?
    /// The provider new sign-ins use (from config.ini; `openai` is built in).
    public var provider: String
    /// The backend for a new slot; nil uses config.ini's `[store] backend`.
    public var backend: BackendKind?
    /// The 429 policy; nil uses config.ini's `[backoff]` (2 retries, 1 s, 30 s by default).
    public var backoff: BackoffPolicy?
    /// XDG variables and `LANYARD_ACCOUNT` are read from here.
    public var environment: [String: String]
    /// Where `.lanyard` pin files are looked for.
    public var workingDirectory: String
    /// HTTP to providers; nil uses Lanyard's own (libcurl, answers capped at 1 MiB while they
    /// arrive) with config.ini's `[http] timeout`.
    public var transport: (any HTTPTransport)?
    /// How ``Client/stream(_:model:instructions:policy:)`` reaches the backend; nil uses config.ini's
    /// `[stream]` (WebSocket with 5 reconnections, then SSE, by default).
    public var streamingTransportPolicy: StreamingTransportPolicy?

    public init(
        slot: String? = nil,
        provider: String = "openai",
        backend: BackendKind? = nil,
        backoff: BackoffPolicy? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        workingDirectory: String = FileManager.default.currentDirectoryPath,
        transport: (any HTTPTransport)? = nil,
        streamingTransportPolicy: StreamingTransportPolicy? = nil
    ) {
        self.slot = slot
        self.provider = provider
        self.backend = backend
        self.backoff = backoff
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.transport = transport
        self.streamingTransportPolicy = streamingTransportPolicy
    }

    /// The account manager and resolved slot this configuration describes.
    func resolve() throws -> (AccountManager, Slot?) {
        let manager = try makeManager()
        let resolution = try manager.resolveSlot(flag: slot, environment: environment, directory: workingDirectory)
        return (manager, resolution?.slot)
    }

    /// The account manager for this configuration's config file, stores and transport.
    func makeManager() throws -> AccountManager {
        let paths = Paths(environment: environment)
        var config = try ConfigFile.load(path: paths.configFile).config
        if let backoff { config.backoff = backoff }
        if let backend { config.backend = backend == .file ? .file : .secretService }
        if let streamingTransportPolicy { config.streaming = streamingTransportPolicy }
        let storeConfig = config
        let passphraseEnvironment = environment.filter { CredentialStores.storeVariables.contains($0.key) }
        return AccountManager(
            paths: paths,
            config: config,
            openStore: { kind, interactive in
                CredentialStores.open(
                    kind,
                    config: storeConfig,
                    paths: paths,
                    interactive: interactive,
                    passphraseEnvironment: passphraseEnvironment
                )
            },
            transport: transport ?? CurlTransport(timeout: config.httpTimeout)
        )
    }
}
