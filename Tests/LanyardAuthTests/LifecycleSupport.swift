import Foundation
import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardTestSupport

/// Waits briefly instead of for real, and records what it was asked to wait.
final class RecordingSleeper: Sleeper, @unchecked Sendable {
    private let lock = NSLock()
    private(set) var delays: [TimeInterval] = []
    func sleep(seconds: TimeInterval) async throws {
        lock.withLock { delays.append(seconds) }
        try await Task.sleep(nanoseconds: 2_000_000)
    }
    var recorded: [TimeInterval] { lock.withLock { delays } }
}

/// A home whose config points the openai provider at the emulator, with a file store.
struct EmulatorHome {
    let server: OAuthTestServer
    let home = TestHome()

    init(extraConfig: String = "") async throws {
        server = try OAuthTestServer(.chatgptEmulator)
        try home.useEmulator(server, extraConfig: extraConfig)
    }

    var paths: Paths { Paths(environment: home.environment) }

    func manager(
        sleeper: any Sleeper = RecordingSleeper(),
        transport: any HTTPTransport = URLSessionTransport(timeout: 5),
        clock: any WallClock = SystemClock()
    ) throws -> AccountManager {
        let config = try ConfigFile.load(path: paths.configFile).config
        let paths = self.paths
        return AccountManager(
            paths: paths,
            config: config,
            openStore: { kind, _ in
                switch kind {
                case .file: return EncryptedFileStore(paths: paths)
                case .secretService: return SecretServiceStore(timeout: 5)
                }
            },
            transport: transport,
            clock: clock,
            sleeper: sleeper
        )
    }

    /// Signs `email` into `slot` through the library, approving on the emulator when the code shows.
    @discardableResult
    func signIn(_ slot: String, email: String, plan: String = "plus") async throws -> Credential {
        try await server.signIn(manager(), slot: slot, email: email, plan: plan)
    }

    func stored(_ slot: String) throws -> Credential { try EncryptedFileStore(paths: paths).get(try Slot(slot)) }
    func record(_ slot: String) throws -> SlotRecord? { try Registry(paths: paths).load().slots[try Slot(slot)] }
}
