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
            return "no terminal to run `lanyard \(arguments.joined(separator: " "))` "
                + "in (x-terminal-emulator is not installed)"
        }
        // The program and its arguments are sh's positional parameters, never part of the script.
        let script = #""$0" "$@"; printf '\nPress Enter to close. '; read -r _"#
        var spawn = Spawn(
            terminal,
            arguments: ["-e", "sh", "-c", script, lanyard] + arguments,
            environment: environment
        )
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

extension TrayTerminal {
    /// "Sign in again…" with no terminal: `lanyard login SLOT --browser` in the background (the
    /// browser sign-in needs no terminal: it opens the browser and waits for its callback), waited
    /// for on a thread of its own (a person may take minutes). Its success shows as the slot signed
    /// in again; a failure is said by notification, so it needs no stderr anyone reads.
    /// - Returns: nil when it signed in, else why not, for people.
    package static func signInWithoutTerminal(
        _ slot: Slot,
        lanyard: String,
        environment: [String: String]
    ) async -> String? {
        let display = [environment["DISPLAY"], environment["WAYLAND_DISPLAY"]].contains { !($0 ?? "").isEmpty }
        let opener = Spawn.searchPath("xdg-open", environment["PATH"] ?? "/usr/bin:/bin")
        guard display, opener != nil else {
            return "No terminal to run `lanyard login \(slot.name)` in "
                + "(x-terminal-emulator is not installed) and no browser to sign in "
                + "with (\(display ? "xdg-open is not installed" : "no graphical session")). "
                + "Run `lanyard login \(slot.name)` in a terminal."
        }
        let outcome = await BlockingExecutor.shared.run(.ownThread) { () -> (status: Int32, stderr: [UInt8])? in
            guard
                let result = try? Subprocess.run(
                    lanyard,
                    ["login", slot.name, "--browser"],
                    environment: environment,
                    stdout: .discard,
                    stderr: .capture
                )
            else { return nil }
            return (result.status, result.stderr)
        }
        guard let outcome else { return "`lanyard login \(slot.name)` could not be started." }
        if outcome.status == 0 { return nil }
        let said = String(decoding: outcome.stderr, as: UTF8.self).split(separator: "\n").last { !$0.isEmpty }.map(
            String.init
        )
        return "Signing in failed"
            + (said.map { ": " + TerminalText.escaped(String($0.prefix(300))) } ?? " (exit status \(outcome.status)).")
    }
}
