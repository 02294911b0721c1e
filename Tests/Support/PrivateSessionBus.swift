import Foundation
import Glibc

/// A dbus-daemon of a test's own: a session bus with no services to activate (nothing, such as
/// gnome-keyring, starts on demand), listening in `folder`. Killed on deinit.
package final class PrivateSessionBus: @unchecked Sendable {
    /// What `DBUS_SESSION_BUS_ADDRESS` takes.
    package let address: String
    private let process: Process

    package init(folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig><type>session</type><keep_umask/><listen>unix:dir=\(folder)</listen><auth>EXTERNAL</auth>
        <policy context="default"><allow send_destination="*" \
        eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
        </busconfig>
        """.write(toFile: folder + "/bus.conf", atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(folder)/bus.conf", "--nofork", "--print-address=1"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The first line it prints is the address.
        address = firstLine(of: output)
        guard address.hasPrefix("unix:") else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw ServerError("dbus-daemon ended before giving its address")
        }
    }

    deinit {
        // SIGKILL: the test process ignores SIGTERM, and its children inherit that.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
