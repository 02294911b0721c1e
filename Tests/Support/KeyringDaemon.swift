import Foundation
import Glibc

/// A gnome-keyring-daemon (secrets only) on a given bus, unlocked with `password`, keeping its
/// keyrings under the environment's XDG_DATA_HOME. Killed on deinit.
package final class KeyringDaemon {
    package let process: Process
    package var pid: pid_t { process.processIdentifier }

    package init(environment: [String: String], password: String) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/gnome-keyring-daemon")
        process.arguments = ["--foreground", "--unlock", "--components=secrets"]
        process.environment = environment
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data(password.utf8))
        try input.fileHandleForWriting.close()
        let (status, _, errors) = try runProcess(
            "/usr/bin/gdbus",
            ["wait", "--session", "--timeout", "10", "org.freedesktop.secrets"],
            environment: environment
        )
        guard status == 0 else {
            Glibc.kill(pid, SIGKILL)
            process.waitUntilExit()
            throw ServerError("gnome-keyring-daemon did not appear on the bus: \(errors)")
        }
    }

    package func kill(signal: Int32 = SIGKILL) {
        Glibc.kill(pid, signal)
        if signal == SIGKILL || signal == SIGTERM { process.waitUntilExit() }
    }

    deinit {
        if process.isRunning {
            Glibc.kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }
}
