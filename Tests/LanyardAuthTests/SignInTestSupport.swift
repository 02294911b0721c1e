import Foundation
import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardTestSupport
import Testing

// Shared pieces of the sign-in tests: virtual time, event recording, a private Lanyard home with
// real stores, and providers pointed at the OAuth test servers.

/// A one-shot signal a test awaits (set from a sleeper hook or an event handler).
final class Signal: @unchecked Sendable {
    private let lock = NSLock()
    private var fired = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func fire() {
        let toResume = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            fired = true
            defer { waiters = [] }
            return waiters
        }
        for waiter in toResume { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if fired { return true }
                waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// Parks the calling task until it is cancelled (the "user is still looking at the code" state
/// that cancellation tests interrupt). Never returns normally within a test's lifetime.
func parkUntilCancelled() async throws {
    try await Task.sleep(nanoseconds: 120 * 1_000_000_000)
    Issue.record("a parked sign-in was never cancelled")
}

/// Collects ``SignInEvent``s from any thread.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [SignInEvent] = []
    let onEvent: (@Sendable (SignInEvent) -> Void)?

    init(onEvent: (@Sendable (SignInEvent) -> Void)? = nil) { self.onEvent = onEvent }

    func record(_ event: SignInEvent) {
        lock.withLock { items.append(event) }
        onEvent?(event)
    }

    var events: [SignInEvent] { lock.withLock { items } }
    var states: [AuthState] {
        events.compactMap {
            if case .state(let s) = $0 { return s }
            return nil
        }
    }
    var deviceCode: DeviceAuthorization? {
        events.lazy.compactMap {
            if case .deviceCode(let d) = $0 { return d }
            return nil
        }.first
    }
    var slowDowns: [TimeInterval] {
        events.compactMap {
            if case .slowedDown(let i) = $0 { return i }
            return nil
        }
    }
}

/// The device code the servers most recently issued (for approving by code).
extension OAuthTestServer {
    func lastUserCode() async throws -> String? {
        let devices = try await get("/_test/devices")["devices"] as? [[String: Any]] ?? []
        return devices.last?["user_code"] as? String
    }

    /// Reads a value at a dotted path of `/_test/devices`' last device.
    func lastDevice() async throws -> [String: Any] {
        (try await get("/_test/devices")["devices"] as? [[String: Any]] ?? []).last ?? [:]
    }
}

enum Providers {
    /// The openai provider pointed at the emulator.
    static func openAI(_ server: OAuthTestServer) -> ProviderConfig {
        var config = ProviderConfig.openAI
        config.issuer = server.baseURL
        return config
    }

    /// A generic RFC 8628 provider named `test` using the device server's OIDC discovery.
    static func device(_ server: OAuthTestServer) -> ProviderConfig {
        ProviderConfig(
            id: "test",
            kind: .deviceCode,
            issuer: server.baseURL,
            clientID: "lanyard-test-client",
            scopes: ["openid", "email", "profile", "offline_access"],
            planClaim: "org.example.plan"
        )
    }
}

/// A private Lanyard home (temporary XDG folders) with real stores: the age file store,
/// initialised without a passphrase, or the Secret Service of the test keyring.
final class SignInHome: @unchecked Sendable {
    let root: String
    let paths: Paths
    /// Virtual time: the sleeper advances it.
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
    let backend: BackendKind

    init(backend: BackendKind = .file) throws {
        let base = (NSTemporaryDirectory() as NSString).standardizingPath
        var template = Array((base + "/lanyard-signin.XXXXXX").utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        paths = Paths(
            configDirectory: root + "/config/lanyard",
            dataDirectory: root + "/data/lanyard",
            stateDirectory: root + "/state/lanyard",
            runtimeDirectory: root + "/run/lanyard"
        )
        self.backend = backend
        if backend == .file { try EncryptedFileStore(paths: paths).initialize(passphrase: nil) }
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var registry: Registry { Registry(paths: paths) }

    func store(_ kind: BackendKind) -> any CredentialStore {
        kind == .file ? EncryptedFileStore(paths: paths) : SecretServiceStore(timeout: 10)
    }

    /// An account manager with `providers`, this home's stores, the virtual clock and `sleeper`.
    func manager(
        _ providers: [ProviderConfig],
        sleeper: any Sleeper,
        transport: any HTTPTransport = URLSessionTransport()
    ) -> AccountManager {
        var config = LanyardConfig()
        config.backend = backend == .file ? .file : .secretService
        for provider in providers { config.providers[provider.id] = provider }
        return AccountManager(
            paths: paths,
            config: config,
            openStore: { [self] kind, _ in store(kind) },
            transport: transport,
            clock: clock,
            sleeper: sleeper
        )
    }

    /// A slot signed in earlier with a known credential (for "a failed re-sign-in keeps it").
    @discardableResult
    func seed(_ name: String, provider: String = "openai") throws -> (Slot, Credential) {
        let slot = try Slot(name)
        let account = AccountInfo(
            email: "\(name)@old.example",
            userID: "user-old",
            accountID: "acct-old",
            plan: Plan(rawValue: "team")
        )
        let credential = Credential(
            provider: provider,
            tokens: TokenSet(
                accessToken: "AT-OLD-\(name)",
                refreshToken: "RT-OLD-\(name)",
                idToken: nil,
                expiresAt: clock.now() + 1000
            ),
            lastRefresh: clock.now() - 60,
            account: account
        )
        try store(backend).put(credential, for: slot)
        try registry.update { doc in
            doc.slots[slot] = SlotRecord(
                provider: provider,
                backend: backend,
                account: account,
                state: .signedIn(expiresAt: credential.tokens.expiresAt),
                lastRefresh: credential.lastRefresh,
                createdAt: clock.now() - 3600
            )
            doc.active = slot
        }
        return (slot, credential)
    }

    /// Everything sign-in could change: the registry and the stored credentials, parsed and as bytes.
    struct Snapshot: Equatable {
        var registry: RegistryDocument
        var credentials: [Slot: Credential]
        var registryBytes: Data?
        var storeBytes: Data?
    }

    func snapshot(slots: [Slot] = []) throws -> Snapshot {
        let document = try registry.load()
        var credentials: [Slot: Credential] = [:]
        let store = store(backend)
        let names = backend == .file ? try store.list() : slots
        for slot in Set(names + Array(document.slots.keys)) { credentials[slot] = try? store.get(slot) }
        return Snapshot(
            registry: document,
            credentials: credentials,
            registryBytes: FileManager.default.contents(atPath: paths.registryFile),
            storeBytes: backend == .file ? FileManager.default.contents(atPath: paths.encryptedStoreFile) : nil
        )
    }
}

/// Runs `body` and returns the ``AuthError`` it throws (recording an issue when it throws another
/// error or none).
func authError(_ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async -> AuthError? {
    do {
        try await body()
        Issue.record("expected an AuthError, but the call succeeded", sourceLocation: sourceLocation)
    } catch let error as AuthError {
        return error
    } catch {
        Issue.record("expected an AuthError, got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// One test server of either kind, a private home, and the provider config that points at it.
struct SignInRig: Sendable {
    enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// ChatGPT sign-in against chatgpt_emulator.py.
        case openai
        /// RFC 8628 with OIDC discovery against device_server.py.
        case device
        var testDescription: String { rawValue }
    }

    let kind: Kind
    let server: OAuthTestServer
    let home: SignInHome

    /// Starts the server. The device server gets a large poll tolerance so fast (virtual-time)
    /// polling never draws `slow_down` unless a test asks for it.
    static func start(_ kind: Kind, backend: BackendKind = .file, arguments: [String] = []) throws -> SignInRig {
        let server: OAuthTestServer
        switch kind {
        case .openai: server = try OAuthTestServer(.chatgptEmulator, arguments: arguments)
        case .device: server = try OAuthTestServer(.deviceServer, arguments: ["--poll-tolerance", "1000"] + arguments)
        }
        return SignInRig(kind: kind, server: server, home: try SignInHome(backend: backend))
    }

    var providerID: String { kind == .openai ? "openai" : "test" }
    var provider: ProviderConfig { kind == .openai ? Providers.openAI(server) : Providers.device(server) }

    func manager(sleeper: any Sleeper) -> AccountManager { home.manager([provider], sleeper: sleeper) }

    /// The fault-injection endpoint names of each step.
    var deviceCodeEndpoint: String { kind == .openai ? "usercode" : "device_authorization" }
    var pollEndpoint: String { kind == .openai ? "deviceauth_token" : "token" }

    func approve(_ fields: [String: Any] = [:]) async throws { try await server.hook("/_test/approve", fields) }
    func deny() async throws { try await server.hook("/_test/deny") }
    func expire() async throws { try await server.hook("/_test/expire") }
    func fault(_ spec: [String: Any]) async throws { try await server.hook("/_test/fault", spec) }

    /// Polls the server handled (whatever their outcome).
    func polls() async throws -> Int { try await server.stat(kind == .openai ? "device_polls" : "token_polls") }
}
