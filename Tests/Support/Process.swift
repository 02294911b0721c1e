import Foundation

/// Runs a process to completion; returns its status, stdout and stderr. `environment` nil
/// inherits this process's; stdin is `stdin`, then end of input.
@discardableResult
public func runProcess(_ path: String, _ args: [String], environment: [String: String]? = nil, stdin: Data? = nil,
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
