import Foundation
import LanyardCLI
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// A refresh's error is the same object whether the refresh failed in this process or in the
/// refresh worker the `lanyard` binary starts: its code, message, slot and chain of causes cross
/// the process boundary.
@Suite(.serialized) struct FleetWorkerErrorTests {
    /// A shared slot refreshed while the fleet's CA does not sign etcd's certificate:
    /// `fleet_unavailable` caused by `etcd_tls`, exit 5, on both paths.
    @Test func aTLSFailureReadsTheSameThroughTheWorker() async throws {
        let h = try await FleetHarness(machines: 1)
        let m = h.machines[0]
        // The client's own certificate as the CA: a readable PEM file that signs nothing.
        let config = m.paths.configFile
        let text = try String(contentsOfFile: config, encoding: .utf8)
        try text.replacingOccurrences(of: "ca = \(h.cluster.caFile)", with: "ca = \(h.cluster.certFile)")
            .write(toFile: config, atomically: true, encoding: .utf8)

        let throughWorker = try m.run("refresh", "work", "--json")
        let environment = m.home.environment
        let root = m.home.root
        // As `lanyard` runs it, but in this process: the refresh fails here, not in a worker.
        let inProcess = await BlockingExecutor.shared.run(.ownThread) { () -> (Int32, String) in
            let out = TextSink()
            let err = TextSink()
            let context = CommandContext(
                stdout: out,
                stderr: err,
                environment: environment,
                workingDirectory: root,
                openStore: StoreOpeners.system,
                transportFactory: { URLSessionTransport(timeout: $0) }
            )
            return (Lanyard.run(["refresh", "work", "--json"], context: context), out.text)
        }

        let worker = try #require(
            Self.error(in: throughWorker.stdout),
            "\(throughWorker.stdout) \(throughWorker.stderr)"
        )
        let local = try #require(Self.error(in: inProcess.1), "\(inProcess.1)")
        #expect(worker["code"] as? String == "fleet_unavailable", "\(worker)")
        #expect(worker["cause"] as? [String] == ["etcd_tls"], "\(worker)")
        #expect(NSDictionary(dictionary: worker).isEqual(to: local), "worker: \(worker)\nin-process: \(local)")
        #expect(throughWorker.status == 5 && inProcess.0 == 5, "\(throughWorker.status) \(inProcess.0)")
    }

    /// The `error` object of a `--json` document.
    static func error(in stdout: String) -> [String: Any]? {
        ((try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any])?["error"] as? [String: Any]
    }
}
