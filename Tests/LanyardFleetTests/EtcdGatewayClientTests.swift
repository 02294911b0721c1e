import Foundation
import LanyardCore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardFleet

/// The TLS test cluster from LANYARD_TEST_ETCD_* (scripts/with-etcd.sh starts one and sets them):
/// comma-separated https endpoints, the CA, and a client certificate with its key.
struct TestCluster {
    let endpoints: [String]
    let ca: String
    let cert: String
    let key: String

    struct Missing: Error, CustomStringConvertible {
        let variable: String
        var description: String {
            "\(variable) is not set: these tests need the etcd test cluster; run them under scripts/with-etcd.sh "
                + "(make test and make check do), e.g. scripts/with-etcd.sh "
                + "swift test --skip-build --filter EtcdGatewayClient"
        }
    }

    static func fromEnvironment() throws -> TestCluster {
        let environment = ProcessInfo.processInfo.environment
        func value(_ name: String) throws -> String {
            guard let value = environment[name], !value.isEmpty else {
                try TestServices.missing(
                    "needs the etcd test cluster (scripts/with-etcd.sh)",
                    failure: Missing(variable: name)
                )
            }
            return value
        }
        let endpoints = try value("LANYARD_TEST_ETCD_ENDPOINTS").split(separator: ",").map { String($0) }
        return TestCluster(
            endpoints: endpoints,
            ca: try value("LANYARD_TEST_ETCD_CA"),
            cert: try value("LANYARD_TEST_ETCD_CERT"),
            key: try value("LANYARD_TEST_ETCD_KEY")
        )
    }

    func client(endpoints: [String]? = nil, ca: String? = "", withCertificate: Bool = true) -> EtcdGatewayClient {
        EtcdGatewayClient(
            endpoints: endpoints ?? self.endpoints,
            caFile: ca == "" ? self.ca : ca,
            certFile: withCertificate ? cert : nil,
            keyFile: withCertificate ? key : nil,
            requestTimeout: 20,
            connectTimeout: 5
        )
    }

    /// A key prefix no other test or run uses.
    static func freshPrefix(_ test: String) -> String { "/lanyard-test/etcd-client/\(test)/\(UUID().uuidString)/" }
}

/// A port nothing listens on (bound, then closed).
func closedLoopbackPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length)
            return getsockname(fd, $0, &length)
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// The client against a real etcd cluster over TLS with client certificates.
@Suite struct EtcdGatewayClientTests {

    @Test func binaryValuesRoundTrip() throws {
        let cluster = try TestCluster.fromEnvironment()
        let etcd = cluster.client()
        let prefix = TestCluster.freshPrefix("round-trip")
        let value = (0...255).map { UInt8($0) } + [0, 0, 0xFF, 0x0A, 0x0D]
        let key = prefix + "slot é/ü"
        let revision = try etcd.put(key, value: value, lease: 0)
        let kv = try #require(try etcd.get(key))
        #expect(kv.key == key)
        #expect(kv.value == value)
        #expect(kv.modRevision == revision)
        #expect(kv.createRevision == revision)
        #expect(kv.version == 1)
        #expect(try etcd.put(key, value: [], lease: 0) > revision)
        #expect(try etcd.get(key)?.value == [])
        #expect(try etcd.get(prefix + "absent") == nil)
        #expect(try etcd.delete(prefix, prefix: true) == 1)
        #expect(try etcd.range(prefix, prefix: true).kvs.isEmpty)
    }

    @Test func prefixRangeSortedByCreationWithLimit() throws {
        let etcd = try TestCluster.fromEnvironment().client()
        let prefix = TestCluster.freshPrefix("range")
        // Created in an order other than the keys' own.
        let revisions = try ["c", "a", "b"].map { try etcd.put(prefix + $0, value: Array($0.utf8), lease: 0) }
        try etcd.put(String(prefix.dropLast()) + "0-outside", value: [1], lease: 0)  // shares all but the last byte

        let all = try etcd.range(prefix, prefix: true)
        #expect(all.kvs.map(\.key) == ["a", "b", "c"].map { prefix + $0 })
        #expect(all.count == 3)
        #expect(all.revision >= revisions[2])

        let oldestTwo = try etcd.range(prefix, EtcdRangeOptions(prefix: true, limit: 2, sortByCreateRevision: true))
        #expect(oldestTwo.kvs.map(\.key) == ["c", "a"].map { prefix + $0 })
        #expect(oldestTwo.count == 3, "count is every matching key, not the limited page")

        let newest = try etcd.range(
            prefix,
            EtcdRangeOptions(prefix: true, limit: 1, sortByCreateRevision: true, descending: true)
        )
        #expect(newest.kvs.map(\.key) == [prefix + "b"])

        // The key created just before "b" (etcd's mutex waiter's query).
        let before = try etcd.range(
            prefix,
            EtcdRangeOptions(
                prefix: true,
                limit: 1,
                sortByCreateRevision: true,
                descending: true,
                maxCreateRevision: revisions[2] - 1
            )
        )
        #expect(before.kvs.map(\.key) == [prefix + "a"])

        let keysOnly = try etcd.range(prefix, EtcdRangeOptions(prefix: true, keysOnly: true))
        #expect(keysOnly.kvs.count == 3)
        #expect(keysOnly.kvs.allSatisfy { $0.value.isEmpty && $0.modRevision > 0 })

        #expect(try etcd.delete(prefix, prefix: true) == 3)
        #expect(try etcd.get(String(prefix.dropLast()) + "0-outside") != nil)
        try etcd.delete(String(prefix.dropLast()) + "0-outside", prefix: false)
    }

    @Test func transactionBranches() throws {
        let etcd = try TestCluster.fromEnvironment().client()
        let prefix = TestCluster.freshPrefix("txn")
        let key = prefix + "k"
        try etcd.put(key, value: Array("one".utf8), lease: 0)

        let held = try etcd.transaction(
            compare: [.value(key, equals: Array("one".utf8))],
            success: [.put(key, value: Array("two".utf8)), .range(key)],
            failure: [.range(key)]
        )
        #expect(held.succeeded)
        #expect(held.ranges.count == 2)
        #expect(held.ranges[0] == nil)
        #expect(held.ranges[1]?.kvs.first?.value == Array("two".utf8))

        let failed = try etcd.transaction(
            compare: [.value(key, equals: Array("one".utf8))],
            success: [.delete(key)],
            failure: [.range(key), .range(prefix, EtcdRangeOptions(prefix: true, keysOnly: true))]
        )
        #expect(!failed.succeeded, "etcd leaves out succeeded=false; it reads as false")
        #expect(failed.ranges.count == 2)
        #expect(failed.ranges[0]?.kvs.first?.value == Array("two".utf8))
        #expect(failed.ranges[1]?.kvs.map(\.key) == [key])
        #expect(try etcd.get(key) != nil, "the success branch did not run")

        // "Absent": create revision 0, then the put-if-absent fails once the key exists.
        let absent = prefix + "new"
        let created = try etcd.transaction(
            compare: [.createRevision(absent, equals: 0)],
            success: [.put(absent, value: [1])],
            failure: []
        )
        #expect(created.succeeded)
        let again = try etcd.transaction(
            compare: [.createRevision(absent, equals: 0)],
            success: [.put(absent, value: [2])],
            failure: []
        )
        #expect(!again.succeeded)
        #expect(try etcd.get(absent)?.value == [1])
        try etcd.delete(prefix, prefix: true)
    }

    /// The fence of docs' fleet notes: a write under a lock compares the lock key's create revision
    /// with ours and the credential's mod revision with the one read; a stale writer loses.
    @Test func fencedWrite() throws {
        let etcd = try TestCluster.fromEnvironment().client()
        let prefix = TestCluster.freshPrefix("fence")
        let lease = try etcd.grantLease(ttl: 60)
        defer { try? etcd.revoke(lease.id) }
        let lockKey = prefix + "locks/work/\(String(lease.id, radix: 16))"
        let credential = prefix + "credentials/work"

        let lock = try etcd.transaction(
            compare: [.createRevision(lockKey, equals: 0)],
            success: [.put(lockKey, value: [], lease: lease.id)],
            failure: [.range(lockKey)]
        )
        #expect(lock.succeeded)
        let myRevision = try #require(try etcd.get(lockKey)).createRevision
        #expect(myRevision == lock.revision)
        let readRevision = try etcd.put(credential, value: Array("sealed v1".utf8), lease: 0)

        let fence: [EtcdCompare] = [
            .createRevision(lockKey, equals: myRevision), .modRevision(credential, equals: readRevision),
        ]
        let first = try etcd.transaction(
            compare: fence,
            success: [.put(credential, value: Array("sealed v2".utf8))],
            failure: [.range(credential)]
        )
        #expect(first.succeeded)
        let stale = try etcd.transaction(
            compare: fence,
            success: [.put(credential, value: Array("sealed v3".utf8))],
            failure: [.range(credential)]
        )
        #expect(!stale.succeeded)
        #expect(stale.ranges.first??.kvs.first?.value == Array("sealed v2".utf8))
        #expect(stale.ranges.first??.kvs.first?.modRevision == first.revision)
        try etcd.delete(prefix, prefix: true)
    }

    @Test func leaseKeepAliveAndRevokeDeletesItsKeys() throws {
        let etcd = try TestCluster.fromEnvironment().client()
        let prefix = TestCluster.freshPrefix("lease")
        let lease = try etcd.grantLease(ttl: 60)
        #expect(lease.ttl == 60)
        try etcd.put(prefix + "held", value: [7], lease: lease.id)
        #expect(try etcd.get(prefix + "held")?.lease == lease.id)
        let left = try etcd.keepAlive(lease.id)
        #expect(left > 0 && left <= 60)
        try etcd.revoke(lease.id)
        #expect(try etcd.get(prefix + "held") == nil)
        #expect(try etcd.keepAlive(lease.id) == 0, "a gone lease answers without TTL")
        try etcd.revoke(lease.id)  // already gone: still revoked
    }

    @Test func watchSeesChangesInOrderFromARevision() throws {
        let etcd = try TestCluster.fromEnvironment().client()
        let prefix = TestCluster.freshPrefix("watch")
        let start = try etcd.put(prefix + "a", value: [1], lease: 0)
        try etcd.put(prefix + "a", value: [2], lease: 0)
        let deleted = try etcd.delete(prefix + "a", prefix: false)
        #expect(deleted == 1)
        try etcd.put(prefix + "b", value: [3], lease: 0)

        var seen: [EtcdWatchEvent] = []
        var revisions: [Int64] = []
        try etcd.watch(prefix: prefix, startRevision: start, handle: nil) { events, revision in
            seen += events
            revisions.append(revision)
            return seen.count < 4
        }
        #expect(seen.map(\.kind) == [.put, .put, .delete, .put])
        #expect(seen.map(\.kv.key) == ["a", "a", "a", "b"].map { prefix + $0 })
        #expect(seen[0].kv.value == [1] && seen[0].kv.modRevision == start)
        #expect(seen[1].previous?.value == [1])
        #expect(seen[2].kv.value.isEmpty && seen[2].previous?.value == [2])
        #expect(seen[3].kv.value == [3])
        #expect(revisions.allSatisfy { $0 >= seen[3].kv.modRevision })

        // Resuming after the delete sees only what followed it; the callback may use the client.
        var resumed: [EtcdWatchEvent] = []
        var readInside: [UInt8]?
        try etcd.watch(prefix: prefix, startRevision: seen[2].kv.modRevision + 1, handle: nil) { events, _ in
            resumed += events
            readInside = try? etcd.get(prefix + "b")?.value
            return false
        }
        #expect(resumed.map(\.kv.key) == [prefix + "b"])
        #expect(readInside == [3])
        try etcd.delete(prefix, prefix: true)
    }

    @Test func aLiveWatchSeesAPutAndIsCancelledByItsHandle() throws {
        let etcd = try TestCluster.fromEnvironment().client()
        let prefix = TestCluster.freshPrefix("live-watch")
        let handle = etcd.makeWatchHandle()
        let sawPut = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        let outcome = Locked<(events: [EtcdWatchEvent], error: String?)>(([], nil))
        let watcher = Thread {
            do {
                try etcd.watch(prefix: prefix, startRevision: 0, handle: handle) { events, _ in
                    outcome.withLock { $0.events += events }
                    sawPut.signal()
                    return true
                }
            } catch {
                outcome.withLock { $0.error = "\(error)" }
            }
            ended.signal()
        }
        watcher.start()
        // From now: the watch may not be set up yet, so put until it reports.
        let put = try eventually("the watch sees a put") {
            try etcd.put(prefix + "k", value: [9], lease: 0)
            return sawPut.wait(timeout: .now() + 0.5) == .success
        } until: {
            $0
        }
        #expect(put, "the watch saw no put")
        handle.cancel()
        #expect(ended.wait(timeout: .now() + 30) == .success, "the cancelled watch did not return")
        let (events, error) = outcome.withLock { $0 }
        #expect(error == nil)
        #expect(events.first?.kind == .put && events.first?.kv.value == [9])
        try etcd.delete(prefix, prefix: true)
    }

    @Test func aDeadFirstEndpointFallsOverToTheNext() throws {
        let cluster = try TestCluster.fromEnvironment()
        let dead = "https://127.0.0.1:\(closedLoopbackPort())"
        let etcd = cluster.client(endpoints: [dead] + cluster.endpoints)
        let prefix = TestCluster.freshPrefix("failover")
        let revision = try etcd.put(prefix + "k", value: [1], lease: 0)
        #expect(try etcd.get(prefix + "k")?.modRevision == revision)
        try etcd.delete(prefix, prefix: true)

        let statuses = etcd.endpointStatus()
        #expect(statuses.map(\.endpoint) == [dead] + cluster.endpoints.map(EtcdGatewayClient.normalized))
        #expect(statuses[0].problem?.contains("cannot connect") == true)
        for status in statuses.dropFirst() {
            #expect(status.problem == nil)
            #expect(status.memberID?.isEmpty == false)
            #expect(status.version?.hasPrefix("3.") == true)
            #expect(status.raftTerm > 0)
        }
        #expect(Set(statuses.dropFirst().compactMap(\.leaderID)).count == 1, "every member names the same leader")

        let nothing = cluster.client(endpoints: [dead])
        #expect {
            _ = try nothing.get(prefix + "k")
        } throws: { error in
            guard case .unreachable(let endpoints, let detail)? = error as? EtcdError else { return false }
            return endpoints == [dead] && detail.contains("cannot connect")
        }
    }

    @Test func aWrongCAIsATLSErrorNamingTheEndpoint() throws {
        let cluster = try TestCluster.fromEnvironment()
        // The client certificate is not the CA that signed the servers' certificates.
        let etcd = cluster.client(endpoints: [cluster.endpoints[0]], ca: cluster.cert)
        #expect {
            _ = try etcd.get("/lanyard-test/etcd-client/any")
        } throws: { error in
            guard let error = error as? EtcdError, case .tls(let endpoint, let detail) = error else { return false }
            let text = error.errorDescription ?? ""
            return endpoint == EtcdGatewayClient.normalized(cluster.endpoints[0]) && detail.contains(cluster.cert)
                && text.contains(endpoint) && text.contains("does not verify")
        }
    }

    @Test func aClientWithoutACertificateIsToldItNeedsOne() throws {
        let cluster = try TestCluster.fromEnvironment()
        let etcd = cluster.client(endpoints: [cluster.endpoints[0]], withCertificate: false)
        #expect {
            _ = try etcd.get("/lanyard-test/etcd-client/any")
        } throws: { error in
            guard let error = error as? EtcdError, case .tls(_, let detail) = error else { return false }
            return detail.contains("requires a client certificate and none is configured")
        }
    }

    /// Values may be secrets' ciphertext: no error says them, whatever went wrong.
    @Test func errorsNeverShowAStoredValue() throws {
        let cluster = try TestCluster.fromEnvironment()
        let etcd = cluster.client()
        let prefix = TestCluster.freshPrefix("no-values")
        let marker = "SECRET-MARKER-\(UUID().uuidString)"
        let value = Array(marker.utf8)
        try etcd.put(prefix + "k", value: value, lease: 0)
        var errors: [Error] = []
        func collect(_ body: () throws -> Void) {
            do { try body() } catch { errors.append(error) }
        }
        // Too large for etcd (1.5 MiB per request), made of the marker.
        collect {
            try etcd.put(
                prefix + "big",
                value: Array(repeating: value, count: 2_000_000 / value.count).flatMap { $0 },
                lease: 0
            )
        }
        // A comparison against the value inside a txn of too many operations.
        collect {
            _ = try etcd.transaction(
                compare: [.value(prefix + "k", equals: value)],
                success: Array(repeating: .put(prefix + "k", value: value), count: 200),
                failure: []
            )
        }
        collect { try etcd.put("", value: value, lease: 0) }
        collect { try etcd.put(prefix + "k", value: value, lease: 12345) }  // no such lease
        collect { _ = try cluster.client(ca: cluster.cert).get(prefix + "k") }
        collect { _ = try cluster.client(withCertificate: false).get(prefix + "k") }
        #expect(errors.count == 6, "\(errors)")
        let base64 = Data(value).base64EncodedString()
        for error in errors {
            let text = "\((error as? EtcdError)?.errorDescription ?? "") \(error)"
            #expect(
                !text.contains(marker) && !text.contains(base64) && !text.contains(String(base64.prefix(16))),
                "\(text)"
            )
        }
        try etcd.delete(prefix, prefix: true)
    }
}

/// The gateway's encoding rules, without a server.
@Suite struct EtcdGatewayMessageTests {
    @Test func prefixRangeEnds() {
        #expect(EtcdGatewayMessages.prefixRangeEnd(Array("a/".utf8)) == Array("a0".utf8))
        #expect(EtcdGatewayMessages.prefixRangeEnd([0x61, 0xFF]) == [0x62])
        #expect(EtcdGatewayMessages.prefixRangeEnd([0xFF, 0xFF]) == [0])
        #expect(EtcdGatewayMessages.prefixRangeEnd([]) == [0])
    }

    @Test func serverErrorsAreSorted() {
        typealias E = EtcdGatewayClient.ServerError
        #expect(E(code: 14, message: "etcdserver: no leader").kind == .unavailable(beforeApplying: true))
        #expect(E(code: 14, message: "etcdserver: request timed out").kind == .unavailable(beforeApplying: false))
        #expect(E(code: 16, message: "etcdserver: invalid auth token").kind == .invalidToken)
        #expect(
            E(code: 3, message: "etcdserver: authentication failed, invalid user ID or password").kind == .permission
        )
        #expect(E(code: 7, message: "etcdserver: permission denied").kind == .permission)
        #expect(E(code: 3, message: "etcdserver: key is not provided").kind == .other)
        // A stream's error line, and text that must not reach a terminal as it is.
        let streamed = E(["error": .object(["grpc_code": .number(14), "message": .string("no\u{1B}[2J leader")])])
        #expect(streamed.code == 14)
        #expect(!streamed.message.contains("\u{1B}"))
    }

    @Test func endpointsAreNormalized() {
        #expect(EtcdGatewayClient.normalized("127.0.0.1:2379") == "https://127.0.0.1:2379")
        #expect(EtcdGatewayClient.normalized(" http://127.0.0.1:2379/ ") == "http://127.0.0.1:2379")
    }

    @Test func missingFieldsReadAsZero() throws {
        let answer = try EtcdGatewayMessages.Answer(
            .object([
                "header": .object(["revision": .string("42")]),
                "responses": .array([.object(["response_put": .object([:])])]),
            ]),
            endpoint: "e"
        )
        let result = try EtcdGatewayMessages.transaction(answer)
        #expect(result == EtcdTransactionResult(succeeded: false, revision: 42, ranges: [nil]))
        let event = try EtcdGatewayMessages.watchEvents(
            EtcdGatewayMessages.Answer(
                .object([
                    "events": .array([.object(["kv": .object(["key": .string("YQ=="), "mod_revision": .string("5")])])])
                ]),
                endpoint: "e"
            )
        )
        #expect(event == [EtcdWatchEvent(kind: .put, kv: EtcdKeyValue(key: "a", value: [], modRevision: 5))])
    }

    @Test func aBadAnswerSaysWhereWithoutQuotingIt() {
        #expect {
            _ = try EtcdGatewayMessages.range(
                EtcdGatewayMessages.Answer(
                    .object([
                        "kvs": .array([.object(["key": .string("YQ=="), "value": .string("not base64 SECRET!")])])
                    ]),
                    endpoint: "e"
                )
            )
        } throws: { error in
            let text = (error as? EtcdError)?.errorDescription ?? ""
            return text.contains("answer.kvs[0] value is not base64") && !text.contains("SECRET")
        }
    }
}
