import Foundation

/// Runs a process to completion; returns its status, stdout and stderr. `environment` nil
/// inherits this process's; stdin is `stdin`, then end of input.
@discardableResult
package func runProcess(_ path: String, _ args: [String], environment: [String: String]? = nil, stdin: Data? = nil,
                       workingDirectory: String? = nil) throws -> (Int32, String, String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    p.environment = environment
    if let workingDirectory { p.currentDirectoryURL = URL(fileURLWithPath: workingDirectory) }
    let out = Pipe(), err = Pipe(), input = Pipe()
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
    let cert = folder + "/\(subjectAltName.replacingOccurrences(of: ":", with: "-")).pem", key = cert + ".key"
    let (status, _, err) = try runProcess("/usr/bin/openssl", [
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=lanyard-test",
        "-addext", "subjectAltName=\(subjectAltName)", "-keyout", key, "-out", cert,
    ])
    guard status == 0 else { throw ServerError("openssl: \(err)") }
    return (cert, key)
}
