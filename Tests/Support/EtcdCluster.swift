import Foundation

/// A 3-member etcd 3.4 cluster on 127.0.0.1 with TLS and required client certificates, run by
/// scripts/etcd-cluster.sh: the one scripts/with-etcd.sh starts around `make test` and
/// `make check` (`fromEnvironment()`), or a private one (`withPrivateCluster`) for a test that
/// kills members, which would break the tests of the other test processes sharing the first.
/// The calls that change the cluster run the script as a child process and wait without blocking
/// a thread.
package struct EtcdCluster: Sendable {
    /// The members' client URLs (`https://127.0.0.1:PORT`), in member order.
    package let endpoints: [URL]
    /// The CA certificate that signed every server, peer and client certificate (PEM).
    package let caFile: String
    /// A client certificate with an empty Common Name and its key (PEM): the JSON gateway rejects
    /// a certificate with a Common Name when RBAC is on.
    package let certFile: String
    package let keyFile: String
    /// A client certificate with Common Name `root` and its key: etcd's root user once a test
    /// turns authentication on (the script's health checks use it).
    package let adminCertFile: String
    package let adminKeyFile: String

    /// The cluster's folder: certificates, `env`, `members/NAME/{pid,url,cmd,data,log}`.
    package let directory: String
    /// The members' names (`m1`, `m2`, `m3`), in the order of `endpoints`.
    package let memberNames: [String]
    /// True for a cluster from `withPrivateCluster`, which stops it.
    private let isPrivate: Bool

    /// config.ini's `[fleet]` section for machine `machine` of fleet `fleet` on this cluster.
    package func fleetSection(fleet: String, machine: String) -> String {
        """
        [fleet]
        name = \(fleet)
        machine = \(machine)
        endpoints = \(endpoints.map(\.absoluteString).joined(separator: ","))
        ca = \(caFile)
        cert = \(certFile)
        key = \(keyFile)
        """
    }

    private static let variables = [
        "LANYARD_TEST_ETCD_ENDPOINTS", "LANYARD_TEST_ETCD_CA", "LANYARD_TEST_ETCD_CERT",
        "LANYARD_TEST_ETCD_KEY", "LANYARD_TEST_ETCD_DIR",
    ]

    /// The cluster scripts/with-etcd.sh started, from its `LANYARD_TEST_ETCD_*` variables. When they
    /// are missing the test is skipped under plain `swift test`, and fails under `make test`
    /// (``TestServices``).
    package static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> EtcdCluster {
        let missing = variables.filter { environment[$0]?.isEmpty ?? true }
        guard missing.isEmpty else {
            #if DEBUG
            try TestServices.missing(
                "needs the etcd test cluster (scripts/with-etcd.sh)",
                failure: EtcdClusterError.notConfigured(missing: missing)
            )
            #else
            throw EtcdClusterError.notConfigured(missing: missing)
            #endif
        }
        let directory = environment["LANYARD_TEST_ETCD_DIR"]!
        let endpoints = environment["LANYARD_TEST_ETCD_ENDPOINTS"]!.split(separator: ",").compactMap {
            URL(string: String($0))
        }
        let names = (environment["LANYARD_TEST_ETCD_MEMBERS"] ?? "m1 m2 m3").split(separator: " ").map(String.init)
        return EtcdCluster(
            endpoints: endpoints,
            caFile: environment["LANYARD_TEST_ETCD_CA"]!,
            certFile: environment["LANYARD_TEST_ETCD_CERT"]!,
            keyFile: environment["LANYARD_TEST_ETCD_KEY"]!,
            adminCertFile: environment["LANYARD_TEST_ETCD_ADMIN_CERT"] ?? directory + "/certs/admin.pem",
            adminKeyFile: environment["LANYARD_TEST_ETCD_ADMIN_KEY"] ?? directory + "/certs/admin.key",
            directory: directory,
            memberNames: names,
            isPrivate: false
        )
    }

    /// Starts a cluster of its own (about 1 to 4 s on a loaded 2-core machine), runs `body` with
    /// it, and stops it and removes its folder however `body` ends. The folder is under the shared
    /// cluster's, when there is one, so scripts/with-etcd.sh stops it even if this process dies.
    package static func withPrivateCluster<T: Sendable>(_ body: (EtcdCluster) async throws -> T) async throws -> T {
        let environment = ProcessInfo.processInfo.environment
        let parent: String
        if let shared = environment["LANYARD_TEST_ETCD_DIR"], !shared.isEmpty {
            parent = shared + "/private"
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        } else {
            parent = (NSTemporaryDirectory() as NSString).standardizingPath
        }
        var template = Array((parent + "/lanyard-etcd.XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw EtcdClusterError.scriptFailed(arguments: ["mkdtemp", parent], status: errno, output: "")
        }
        let directory = String(cString: made)
        let cluster = EtcdCluster(
            endpoints: [],
            caFile: directory + "/certs/ca.pem",
            certFile: directory + "/certs/client.pem",
            keyFile: directory + "/certs/client.key",
            adminCertFile: directory + "/certs/admin.pem",
            adminKeyFile: directory + "/certs/admin.key",
            directory: directory,
            memberNames: ["m1", "m2", "m3"],
            isPrivate: true
        )
        let started: EtcdCluster
        do {
            try await cluster.script("start")
            started = try cluster.withEndpointsFromDirectory()
        } catch {
            try? await cluster.stopPrivate()
            throw error
        }
        do {
            let result = try await body(started)
            try await started.stopPrivate()
            return result
        } catch {
            try? await started.stopPrivate()
            throw error
        }
    }

    /// The client URL of `member`.
    package func clientURL(of member: String) throws -> URL {
        guard let index = memberNames.firstIndex(of: member), index < endpoints.count else {
            throw EtcdClusterError.noSuchMember(member, members: memberNames)
        }
        return endpoints[index]
    }

    /// SIGKILLs `member` and waits until its process is gone.
    package func kill(member: String) async throws {
        _ = try clientURL(of: member)
        try await script("kill", member)
    }

    /// Starts `member` again on its data folder and waits until it answers a linearizable read
    /// (up to 60 s; a restart usually takes well under a second).
    package func restart(member: String) async throws {
        _ = try clientURL(of: member)
        try await script("restart", member)
    }

    /// The name of the current leader, waiting up to `timeout` for an election to end.
    package func leaderName(timeout: Duration = .seconds(15)) async throws -> String {
        try await script("leader", Self.seconds(timeout)).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Waits until every member answers a linearizable read; throws after `timeout`.
    package func waitHealthy(timeout: Duration = .seconds(60)) async throws {
        try await script("health", Self.seconds(timeout))
    }

    /// A further client certificate signed by the cluster's CA, `certs/NAME.pem` and its key,
    /// with `commonName` (empty: none), such as one per simulated machine.
    package func makeClientCertificate(
        name: String,
        commonName: String = ""
    ) async throws -> (certFile: String, keyFile: String) {
        try await script(["cert", name] + (commonName.isEmpty ? [] : [commonName]))
        return (directory + "/certs/\(name).pem", directory + "/certs/\(name).key")
    }

    private func stopPrivate() async throws {
        precondition(isPrivate, "only a private cluster is stopped by a test")
        try await script("stop")
        try FileManager.default.removeItem(atPath: directory)
    }

    private func withEndpointsFromDirectory() throws -> EtcdCluster {
        let urls = try memberNames.map { name -> URL in
            let text = try String(contentsOfFile: directory + "/members/\(name)/url", encoding: .utf8)
            guard let url = URL(string: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw EtcdClusterError.scriptFailed(
                    arguments: ["start", directory],
                    status: 0,
                    output: "bad URL for \(name): \(text)"
                )
            }
            return url
        }
        return EtcdCluster(
            endpoints: urls,
            caFile: caFile,
            certFile: certFile,
            keyFile: keyFile,
            adminCertFile: adminCertFile,
            adminKeyFile: adminKeyFile,
            directory: directory,
            memberNames: memberNames,
            isPrivate: isPrivate
        )
    }

    private static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(max(1, seconds + (attoseconds > 0 ? 1 : 0)))
    }

    /// scripts/etcd-cluster.sh, from LANYARD_SOURCE_ROOT (set by the Makefile) or this file's tree.
    private static var scriptPath: String {
        if let root = ProcessInfo.processInfo.environment["LANYARD_SOURCE_ROOT"], !root.isEmpty,
            FileManager.default.fileExists(atPath: root + "/scripts/etcd-cluster.sh")
        {
            return root + "/scripts/etcd-cluster.sh"
        }
        return repositoryRoot.appendingPathComponent("scripts/etcd-cluster.sh").path
    }

    @discardableResult
    private func script(_ command: String, _ arguments: String...) async throws -> String {
        try await script([command] + arguments)
    }

    /// Runs `etcd-cluster.sh COMMAND DIR ARGS…` and returns its standard output; its output goes
    /// to files rather than pipes, and it is awaited through the termination handler.
    @discardableResult
    private func script(_ commandAndArguments: [String]) async throws -> String {
        let arguments = [commandAndArguments[0], directory] + commandAndArguments.dropFirst()
        let stamp = UUID().uuidString
        let outPath = directory + "/script-\(stamp).out"
        let errPath = directory + "/script-\(stamp).err"
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        guard FileManager.default.createFile(atPath: outPath, contents: nil),
            FileManager.default.createFile(atPath: errPath, contents: nil)
        else {
            throw EtcdClusterError.scriptFailed(arguments: arguments, status: -1, output: "cannot create \(outPath)")
        }
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [Self.scriptPath] + arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        try? out.close()
        try? err.close()
        let stdout = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        guard status == 0 else {
            let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
            throw EtcdClusterError.scriptFailed(arguments: arguments, status: status, output: stdout + stderr)
        }
        return stdout
    }
}

/// Why the etcd test cluster could not be used.
package enum EtcdClusterError: Error, CustomStringConvertible {
    /// The `LANYARD_TEST_ETCD_*` variables scripts/with-etcd.sh sets are missing.
    case notConfigured(missing: [String])
    case noSuchMember(String, members: [String])
    /// scripts/etcd-cluster.sh failed; `output` is what it printed (member log tails included).
    case scriptFailed(arguments: [String], status: Int32, output: String)

    package var description: String {
        switch self {
        case .notConfigured(let missing):
            "no etcd test cluster: \(missing.joined(separator: ", ")) not set; run the tests through "
                + "scripts/with-etcd.sh (make test and make check do), e.g. "
                + "scripts/with-etcd.sh scripts/with-keyring.sh swift test --skip-build --filter NAME"
        case .noSuchMember(let name, let members):
            "no etcd test member \(name) (members: \(members.joined(separator: ", ")))"
        case .scriptFailed(let arguments, let status, let output):
            "scripts/etcd-cluster.sh \(arguments.joined(separator: " ")) failed (exit \(status)):\n\(output)"
        }
    }
}
