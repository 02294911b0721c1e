import Foundation
import LanyardSupport

#if DEBUG
import Testing
#endif

/// Runs a process to completion; returns its status, stdout and stderr. `environment` nil
/// inherits this process's; stdin is `stdin`, then end of input.
@discardableResult
package func runProcess(
    _ path: String,
    _ args: [String],
    environment: [String: String]? = nil,
    stdin: Data? = nil,
    workingDirectory: String? = nil
) throws -> (Int32, String, String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    p.environment = environment
    if let workingDirectory { p.currentDirectoryURL = URL(fileURLWithPath: workingDirectory) }
    let out = Pipe()
    let err = Pipe()
    let input = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = input
    try p.run()
    if let stdin { input.fileHandleForWriting.write(stdin) }
    try input.fileHandleForWriting.close()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}

/// A self-signed certificate for `subjectAltName` (`IP:127.0.0.1`, `DNS:wrong.example`) made with
/// openssl in `folder`: (certificate, key) paths.
package func selfSignedCertificate(_ subjectAltName: String, in folder: String) throws -> (String, String) {
    let cert = folder + "/\(subjectAltName.replacingOccurrences(of: ":", with: "-")).pem"
    let key = cert + ".key"
    let (status, _, err) = try runProcess(
        "/usr/bin/openssl",
        [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=lanyard-test",
            "-addext", "subjectAltName=\(subjectAltName)", "-keyout", key, "-out", cert,
        ]
    )
    guard status == 0 else { throw ServerError("openssl: \(err)") }
    return (cert, key)
}

#if DEBUG  // Testing is not there in the release build (make release builds every target)
/// Runs the calling test's `body` in a child process of this test binary of its own (the test
/// selected by `filter`, as `--filter` takes it): for a test that counts what the whole process
/// holds (sockets, threads), which the tests running beside it in parallel would change.
/// With `ownKeyring`, the child runs in a D-Bus session with a gnome-keyring of its own
/// (scripts/with-keyring.sh), for a test whose doctor must see only its own keyring items.
/// In the child (LANYARD_CHILD_TEST = `filter`) it runs `body`; here it waits for the child on
/// the blocking executor and fails with the child's output unless the child passed.
package func inProcessOfItsOwn(
    _ filter: String,
    ownKeyring: Bool = false,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async throws {
    let marker = "lanyard-child-test-passed: \(filter)"
    if ProcessInfo.processInfo.environment["LANYARD_CHILD_TEST"] == filter {
        try await body()
        print(marker)
        return
    }
    let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    var environment = ProcessInfo.processInfo.environment
    environment["LANYARD_CHILD_TEST"] = filter
    let arguments = ["--testing-library", "swift-testing", "--filter", filter]
    let keyringSession = repositoryRoot.appendingPathComponent("scripts/with-keyring.sh").path
    let (status, out, err) = try await BlockingExecutor.shared.run { [environment] in
        ownKeyring
            ? try runProcess(keyringSession, [executable] + arguments, environment: environment)
            : try runProcess(executable, arguments, environment: environment)
    }
    // A child that skipped (a service it needs is not around) skips its parent the same way.
    if status == 0, !out.contains(marker),
        let skipped = out.split(separator: "\n").first(where: { $0.contains("(skipped; ") })
    {
        struct ChildSkipped: Error, CustomStringConvertible { let description: String }
        try TestServices.missing(
            "child test \(filter): \(skipped)",
            failure: ChildSkipped(description: String(skipped))
        )
    }
    #expect(
        status == 0 && out.contains(marker),
        "child test \(filter) failed (status \(status)):\n\(out)\n\(err)",
        sourceLocation: sourceLocation
    )
}
#endif

/// The first line `pipe` carries (without its newline), or what came before it ended: for a
/// child that announces itself on stdout ("ready", an address) before it serves.
package func firstLine(of pipe: Pipe) -> String {
    var line = Data()
    while !line.contains(0x0a) {
        let chunk = pipe.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        line += chunk
    }
    return String(decoding: line.prefix { $0 != 0x0a }, as: UTF8.self)
}
