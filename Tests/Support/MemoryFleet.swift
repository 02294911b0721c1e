import Age
import Foundation
import LanyardAuth
import LanyardCore
import LanyardFleet
import LanyardStore

/// Two machines of one fleet on an in-memory etcd (``MemoryEtcd``), with the ChatGPT emulator as
/// the provider: m1 signed `work` in and shared it; m2 joined, was approved and synced. Each
/// machine's `AccountManager` reaches the etcd through `etcdConnector`, so the real refresh, sync
/// and agent paths run on it, as the CLI, the agent and LanyardKit run them.
package struct MemoryFleetPair: Sendable {
    package let server: OAuthTestServer
    package let kv = MemoryEtcd()
    package let homes = [TestHome(), TestHome()]
    package let slot = try! Slot("work")
    private let transport: @Sendable () -> any HTTPTransport

    /// - Parameter transport: the HTTP transport each manager talks to the emulator with.
    package init(
        server: OAuthTestServer,
        email: String,
        extraConfig: String = "",
        transport: @escaping @Sendable () -> any HTTPTransport
    ) async throws {
        self.server = server
        self.transport = transport
        for (i, home) in homes.enumerated() {
            try home.useEmulator(
                server,
                extraConfig: """
                    [fleet]
                    name = mem
                    machine = m\(i + 1)
                    endpoints = http://127.0.0.1:9
                    \(extraConfig)
                    """
            )
        }
        let m1 = try manager(0)
        let m2 = try manager(1)
        try await server.signIn(m1, slot: "work", email: email)
        _ = try m1.fleetCreate()
        _ = try await m1.fleetShare(slot)
        guard let fingerprint = m1.fleetFingerprint() else { throw ServerError("m1 has no fleet fingerprint") }
        let asked = try m2.fleetJoin(fleetFingerprint: fingerprint)
        _ = try m1.fleetApprove(machine: "m2", fingerprint: asked.fingerprint)
        let synced = try await m2.fleetSync().map(\.1)
        guard synced == [.added] else { throw ServerError("m2's first sync: \(synced), not [added]") }
    }

    /// Machine `i`'s manager (m1 is 0), on the file store and the in-memory etcd.
    package func manager(_ i: Int) throws -> AccountManager {
        let paths = self.paths(i)
        var manager = AccountManager(
            paths: paths,
            config: try ConfigFile.load(path: paths.configFile).config,
            openStore: { _, _ in EncryptedFileStore(paths: paths) },
            transport: transport()
        )
        let kv = self.kv
        manager.etcdConnector = { _ in kv }
        return manager
    }

    package func paths(_ i: Int) -> Paths { Paths(environment: homes[i].environment) }

    /// The credential machine `i` holds for `work`.
    package func stored(_ i: Int) throws -> Credential { try EncryptedFileStore(paths: paths(i)).getInTest(slot) }

    package var keys: FleetKeys { FleetKeys(fleet: "mem") }
}

extension Membership {
    /// The log entry `seq` that adds a machine "evil" with the keys of `evil`, chained to `previous`
    /// (the entry before it as etcd holds it) and signed by `signer` with `key`: what a member's key
    /// can forge, which only the log's chain and its members' memory can tell from a real entry.
    package static func forgedAddition(
        fleet: String,
        seq: Int64,
        after previous: EtcdKeyValue,
        signer: String,
        key: Ed25519.SigningKey,
        adding evil: MachineIdentity = MachineIdentity(identity: X25519Identity.generate())
    ) throws -> [UInt8] {
        entry(
            fleet: fleet,
            seq: seq,
            prev: try SignedDocument(previous.value, key: previous.key, kind: entryType).digest,
            change: .add(
                FleetMember(
                    machine: "evil",
                    recipient: evil.recipient,
                    signingKey: evil.signingKey,
                    addedAt: nil,
                    approvedBy: nil
                )
            ),
            signer: signer,
            at: Date(),
            key: key
        )
    }
}
