import Foundation
import LanyardCore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardFleet

/// An etcd member of the test's own (plain HTTP on loopback, a fresh data folder), for what must
/// not happen to the shared test cluster: compaction, turning authentication on, losing quorum.
final class PrivateEtcd {
    static let binary = "/usr/bin/etcd"
    let folder: String
    let endpoint: String
    private let arguments: [String]
    private var process: Process?

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// A one-member cluster, started.
    convenience init(extraArguments: [String] = []) throws {
        let peer = "http://127.0.0.1:\(closedLoopbackPort())"
        try self.init(name: "solo", peer: peer, cluster: "solo=\(peer)", extraArguments: extraArguments)
        try start()
        try waitUntilReady()
    }

    /// Two members of one cluster, started and ready (each serves only once both have met).
    static func pair() throws -> (PrivateEtcd, PrivateEtcd) {
        let peers = ["http://127.0.0.1:\(closedLoopbackPort())", "http://127.0.0.1:\(closedLoopbackPort())"]
        let cluster = "one=\(peers[0]),two=\(peers[1])"
        let one = try PrivateEtcd(name: "one", peer: peers[0], cluster: cluster, extraArguments: [])
        let two = try PrivateEtcd(name: "two", peer: peers[1], cluster: cluster, extraArguments: [])
        try one.start()
        try two.start()
        try one.waitUntilReady()
        try two.waitUntilReady()
        return (one, two)
    }

    private init(name: String, peer: String, cluster: String, extraArguments: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw Failure(description: "\(Self.binary) is missing: install etcd-server (make deps does)")
        }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("lanyard-etcd-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        endpoint = "http://127.0.0.1:\(closedLoopbackPort())"
        arguments =
            [
                "--name", name, "--data-dir", folder + "/data", "--listen-client-urls", endpoint,
                "--advertise-client-urls", endpoint,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster,
            ] + extraArguments
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: folder)
    }

    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = arguments
        _ = FileManager.default.createFile(atPath: folder + "/log", contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/log"))
        process.standardOutput = log
        process.standardError = log
        try process.run()
        self.process = process
    }

    /// Waits until it answers a status request.
    func waitUntilReady() throws {
        try waitUntil("answers") { (try? post("/v3/maintenance/status", "{}").status) == 200 }
    }

    /// Waits until `condition` holds, with ``eventually(_:seconds:every:sourceLocation:_:until:)``
    /// (whose failure shows etcd's state and the end of its log); fails at once if etcd exits.
    func waitUntil(_ what: String, _ condition: () -> Bool) throws {
        try eventually("etcd at \(endpoint) \(what)") {
            if condition() { return "" }
            let report = "etcd at \(endpoint) (\(state)) never \(what); its log ends:\n\(logTail())"
            guard process?.isRunning == true else { throw Failure(description: report) }
            return report
        } until: {
            $0.isEmpty
        }
    }

    /// Whether it runs, or how it ended.
    private var state: String {
        process.map { $0.isRunning ? "still running" : "exited with status \($0.terminationStatus)" } ?? "not started"
    }

    /// The last 2,000 bytes of its log.
    private func logTail() -> String {
        guard let log = FileHandle(forReadingAtPath: folder + "/log") else { return "" }
        defer { try? log.close() }
        let size = (try? log.seekToEnd()) ?? 0
        try? log.seek(toOffset: size > 2000 ? size - 2000 : 0)
        return String(decoding: (try? log.readToEnd()) ?? Data(), as: UTF8.self)
    }

    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
        self.process = nil
    }

    /// A POST without the client, for administration (compaction, users, roles).
    func post(_ path: String, _ body: String, token: String? = nil) throws -> (status: Int, body: String) {
        var answer: [UInt8] = []
        let result = CurlTransfer.post(
            CurlRequest(
                url: endpoint + path,
                body: Array(body.utf8),
                headers: token.map { ["Authorization: \($0)"] } ?? [],
                timeout: 10,
                connectTimeout: 5
            )
        ) {
            answer += $0
            return true
        }
        guard case .answered(let status) = result else { throw Failure(description: "\(path): \(result)") }
        return (status, String(decoding: answer, as: UTF8.self))
    }

    func administer(_ path: String, _ body: String) throws {
        let (status, text) = try post(path, body)
        guard status == 200 else { throw Failure(description: "\(path) answered \(status): \(text)") }
    }
}

func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

@Suite struct EtcdGatewayClientPrivateServerTests {

    @Test func aCompactedStartRevisionThrowsCompacted() throws {
        let server = try PrivateEtcd()
        let etcd = EtcdGatewayClient(endpoints: [server.endpoint], requestTimeout: 20)
        let first = try etcd.put("/k", value: [1], lease: 0)
        let second = try etcd.put("/k", value: [2], lease: 0)
        try server.administer("/v3/kv/compaction", #"{"revision":"\#(second)","physical":true}"#)
        var delivered = 0
        #expect(throws: EtcdError.compacted(revision: second)) {
            try etcd.watch(prefix: "/", startRevision: first, handle: nil) { events, _ in
                delivered += events.count
                return true
            }
        }
        #expect(delivered == 0)
        // From the compaction revision on, the watch works.
        try etcd.watch(prefix: "/", startRevision: second, handle: nil) { events, _ in
            delivered += events.count
            return false
        }
        #expect(delivered == 1)
    }

    @Test func aMemberWithoutALeaderIsPassedOverAtOnce() throws {
        let healthy = try PrivateEtcd()
        // A member whose only peer is gone keeps answering but has no leader.
        let (leaderless, peer) = try PrivateEtcd.pair()
        peer.stop()
        try leaderless.waitUntil("lost its leader") {
            (try? leaderless.post("/v3/maintenance/status", "{}").body.contains("no leader")) == true
        }
        let etcd = EtcdGatewayClient(endpoints: [leaderless.endpoint, healthy.endpoint], requestTimeout: 20)
        // A write too: etcd refuses it before proposing anything, so sending it elsewhere is safe.
        let revision = try etcd.put("/k", value: [1], lease: 0)
        #expect(try EtcdGatewayClient(endpoints: [healthy.endpoint]).get("/k")?.modRevision == revision)

        let alone = EtcdGatewayClient(endpoints: [leaderless.endpoint], requestTimeout: 20)
        for call in ["put", "range", "watch"] {
            #expect(
                performing: {
                    switch call {
                    case "put": try alone.put("/k", value: [2], lease: 0)
                    case "range": _ = try alone.get("/k")
                    default: try alone.watch(prefix: "/", startRevision: 0, handle: nil) { _, _ in false }
                    }
                },
                throws: { error in
                    guard case .unavailable(let endpoint, let detail)? = error as? EtcdError else { return false }
                    return endpoint == leaderless.endpoint && detail.contains("no leader")
                }
            )
        }
        let statuses = etcd.endpointStatus()
        #expect(statuses[0].leaderID == nil && statuses[0].problem?.contains("no leader") == true, "\(statuses[0])")
        #expect(
            statuses[1].leaderID != nil && statuses[1].leaderID == statuses[1].memberID && statuses[1].problem == nil
        )
    }

    @Test func passwordAuthenticationAndRenewal() throws {
        let server = try PrivateEtcd(extraArguments: ["--auth-token-ttl", "1"])
        let rootPassword = "root-\(UUID().uuidString)"
        let fleetPassword = "fleet-\(UUID().uuidString)"
        try server.administer("/v3/auth/user/add", #"{"name":"root","password":"\#(rootPassword)"}"#)
        try server.administer("/v3/auth/user/grant", #"{"user":"root","role":"root"}"#)
        try server.administer("/v3/auth/role/add", #"{"name":"fleet"}"#)
        try server.administer(
            "/v3/auth/role/grant",
            #"{"name":"fleet","perm":{"permType":"READWRITE","key":"\#(base64("/fleet/"))","#
                + #""range_end":"\#(base64("/fleet0"))"}}"#
        )
        try server.administer("/v3/auth/user/add", #"{"name":"fleet","password":"\#(fleetPassword)"}"#)
        try server.administer("/v3/auth/user/grant", #"{"user":"fleet","role":"fleet"}"#)
        try server.administer("/v3/auth/enable", "{}")

        let etcd = EtcdGatewayClient(
            endpoints: [server.endpoint],
            user: "fleet",
            password: fleetPassword,
            requestTimeout: 20
        )
        let watcher = EtcdGatewayClient(
            endpoints: [server.endpoint],
            user: "fleet",
            password: fleetPassword,
            requestTimeout: 20
        )
        let start = try watcher.put("/fleet/a", value: [1], lease: 0)
        #expect(try etcd.get("/fleet/a")?.value == [1])
        let lease = try etcd.grantLease(ttl: 30)
        #expect(try etcd.keepAlive(lease.id) > 0)

        var errors: [EtcdError] = []
        #expect {
            try etcd.put("/elsewhere", value: [1], lease: 0)
        } throws: { error in
            errors += [error as? EtcdError].compactMap { $0 }
            guard case .permissionDenied(let detail)? = error as? EtcdError else { return false }
            return detail.contains("permission denied")
        }
        #expect {
            _ = try EtcdGatewayClient(endpoints: [server.endpoint], requestTimeout: 20).get("/fleet/a")
        } throws: { error in
            errors += [error as? EtcdError].compactMap { $0 }
            guard case .permissionDenied(let detail)? = error as? EtcdError else { return false }
            return detail.contains("configure a user and password")
        }
        #expect {
            _ = try EtcdGatewayClient(
                endpoints: [server.endpoint],
                user: "fleet",
                password: "wrong",
                requestTimeout: 20
            ).get("/fleet/a")
        } throws: { error in
            errors += [error as? EtcdError].compactMap { $0 }
            guard case .permissionDenied(let detail)? = error as? EtcdError else { return false }
            return detail.contains("refused the name or password of user fleet")
        }
        for error in errors {
            let text = error.errorDescription ?? ""
            #expect(!text.contains(fleetPassword) && !text.contains("wrong"), "\(text)")
        }

        // etcd's simple tokens expire --auth-token-ttl seconds after their last use: once one
        // issued after the client's last call is refused, the client's is gone too, and the
        // client authenticates again by itself. (Checked every 2.5 s: a use renews a token.)
        let (_, answer) = try server.post("/v3/auth/authenticate", #"{"name":"fleet","password":"\#(fleetPassword)"}"#)
        let laterToken = try #require(try JSONValue.parse(Data(answer.utf8))["token"]?.string)
        let refused = try eventually("a token unused for 2.5 s is refused", every: .milliseconds(2500)) {
            try server.post("/v3/kv/range", #"{"key":"\#(base64("/fleet/a"))"}"#, token: laterToken)
        } until: {
            $0.status != 200
        }.body
        #expect(refused.contains("invalid auth token"), "the premise: an expired token is refused (\(refused))")
        #expect(try etcd.get("/fleet/a")?.value == [1])
        var seen: [EtcdWatchEvent] = []
        try watcher.watch(prefix: "/fleet/", startRevision: start, handle: nil) { events, _ in
            seen += events
            return false
        }
        #expect(seen.first?.kv.value == [1])
        try etcd.revoke(lease.id)
    }
}
