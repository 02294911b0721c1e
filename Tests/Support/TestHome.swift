import Foundation

/// A private HOME with XDG folders for one test, removed when released, and a way to run the
/// built `lanyard` binary in it as a separate process.
package final class TestHome: @unchecked Sendable {
    package let root: String

    package init() {
        let base = (NSTemporaryDirectory() as NSString).standardizingPath
        var template = Array((base + "/lanyard-home.XXXXXX").utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        for dir in ["home", "config/lanyard", "data", "state", "run"] {
            try? FileManager.default.createDirectory(
                atPath: root + "/" + dir,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    /// Runs commands without the test keyring's session bus: for a home whose slots are in the
    /// file store and whose `doctor` must not see the keyring items of the tests running beside
    /// it (`swift test` runs them in parallel, all on one test keyring).
    package var withoutSessionBus = false

    /// The XDG environment, plus the test keyring's bus when there is one (and not
    /// ``withoutSessionBus``).
    package var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment.filter {
            ["DBUS_SESSION_BUS_ADDRESS", "PATH", "LANG"].contains($0.key)
        }
        if withoutSessionBus { env["DBUS_SESSION_BUS_ADDRESS"] = "disabled:" }
        env.merge([
            "HOME": root + "/home", "XDG_CONFIG_HOME": root + "/config", "XDG_DATA_HOME": root + "/data",
            "XDG_STATE_HOME": root + "/state", "XDG_RUNTIME_DIR": root + "/run",
        ]) { $1 }
        return env
    }

    /// Writes `config.ini`.
    package func writeConfig(_ text: String) throws {
        try text.write(toFile: root + "/config/lanyard/config.ini", atomically: true, encoding: .utf8)
    }

    package struct Output: Sendable {
        package let status: Int32
        package let stdout: String
        package let stderr: String
    }

    /// Starts `lanyard ARGS` without waiting; `launcher` (like `strace …`) runs it when given.
    package func start(
        _ args: [String],
        extraEnvironment: [String: String] = [:],
        launcher: [String] = []
    ) throws -> (Process, Pipe, Pipe) {
        let p = Process()
        let binary = URL(fileURLWithPath: builtBinary("lanyard"))
        if let program = launcher.first {
            p.executableURL = URL(fileURLWithPath: program)
            p.arguments = Array(launcher.dropFirst()) + [binary.path] + args
        } else {
            p.executableURL = binary
            p.arguments = args
        }
        p.environment = environment.merging(extraEnvironment) { $1 }
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return (p, out, err)
    }

    /// Runs `lanyard ARGS` to completion.
    @discardableResult
    package func run(_ args: String..., extraEnvironment: [String: String] = [:]) throws -> Output {
        try run(args, extraEnvironment: extraEnvironment)
    }

    /// Runs `lanyard ARGS` to completion.
    @discardableResult
    package func run(
        _ args: [String],
        extraEnvironment: [String: String] = [:],
        launcher: [String] = []
    ) throws -> Output {
        let (p, out, err) = try start(args, extraEnvironment: extraEnvironment, launcher: launcher)
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Output(
            status: p.terminationStatus,
            stdout: String(decoding: o, as: UTF8.self),
            stderr: String(decoding: e, as: UTF8.self)
        )
    }
}

extension TestHome {
    /// Points the openai provider at `server` (the ChatGPT emulator), keeps credentials in a file
    /// store without a passphrase, and appends `extraConfig` to config.ini.
    package func useEmulator(_ server: OAuthTestServer, extraConfig: String = "") throws {
        try writeConfig(
            """
            [store]
            backend = file
            [provider.openai]
            issuer = \(server.baseURL.absoluteString)
            usage-base-url = \(server.baseURL.absoluteString)
            \(extraConfig)
            """
        )
        let initialized = try run("store", "init", "--no-passphrase")
        guard initialized.status == 0 else { throw ServerError("store init failed: \(initialized.stderr)") }
    }
}

/// A file's permission bits.
package func permissionBits(_ path: String) -> mode_t {
    var st = stat()
    lstat(path, &st)
    return st.st_mode & 0o777
}
