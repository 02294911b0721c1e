import Glibc
import LanyardCore
import LanyardSupport
import LanyardSystem

/// The tray's entries that need a terminal: `lanyard login SLOT` and `lanyard usage --all` in
/// the desktop's default terminal (Debian's x-terminal-emulator), kept open until Enter.
package enum TrayTerminal {
    /// Starts the terminal; nil, or why it could not.
    package static func open(_ action: TrayAction, lanyard: String, environment: [String: String]) -> String? {
        let arguments: [String]
        switch action {
        case .signIn(let slot): arguments = ["login", slot.name]
        case .openUsage: arguments = ["usage", "--all"]
        default: return nil
        }
        guard let terminal = Spawn.searchPath("x-terminal-emulator", environment["PATH"] ?? "/usr/bin:/bin") else {
            return "no terminal to run `lanyard \(arguments.joined(separator: " "))` in (x-terminal-emulator is not installed)"
        }
        // The program and its arguments are sh's positional parameters, never part of the script.
        let script = #""$0" "$@"; printf '\nPress Enter to close. '; read -r _"#
        var spawn = Spawn(terminal, arguments: ["-e", "sh", "-c", script, lanyard] + arguments, environment: environment)
        spawn.newSession = true
        do {
            let pid = try spawn.start()
            Task.detached { _ = await BlockingExecutor.shared.run { waitpid(pid, nil, 0) } }
            return nil
        } catch {
            return "cannot start \(terminal): \(error.userFacingDescription)"
        }
    }
}
