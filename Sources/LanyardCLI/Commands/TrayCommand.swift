import FoundationEssentials
import Glibc
import LanyardCore
import LanyardDesktop
import LanyardIntegrations
import LanyardSupport
import LanyardSystem

extension AgentCommands {
    static let tray = CommandSpec(
        name: "tray",
        summary: "show every slot's usage in the desktop's tray and switch from its menu",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [
            FlagSpec(
                "install-autostart",
                "start the tray at login: write $XDG_CONFIG_HOME/autostart/lanyard-tray.desktop, then exit"
            ),
            FlagSpec("uninstall-autostart", "remove that entry (only if Lanyard wrote it), then exit"),
            FlagSpec("force", "with --install-autostart: replace an entry Lanyard did not write"),
        ],
        prints: false,
        takesAccount: false,
        details: """
            Runs in the foreground until Quit is chosen, \
            SIGTERM or Ctrl-C. Puts a StatusNotifierItem on the session bus \
            (KDE Plasma, GNOME with the AppIndicator extension, waybar, Xfce and other hosts; see docs/desktop.md) and \
            registers it with org.kde.StatusNotifierWatcher, \
            waiting for one when none runs and again after it restarts. \
            Its icon is a meter of the active slot's two busiest \
            windows drawn by Lanyard (pixels only, no theme icon), \
            its tooltip and [desktop] label say the busiest window. \
            Its menu has one radio entry per slot, its state first \
            (work — 42 % of 5 h, bob — at limit until 21:11; the active one checked; \
            choosing one switches as `lanyard \
            switch` does), Details (email, plan, each window with its reset; \
            figures kept and marked stale when a check \
            fails), Best account now, Refresh now, \
            Sign in again… (`lanyard login SLOT` in a terminal; without one, the \
            browser sign-in) and Open usage details (`lanyard usage --all` in a terminal; without one, the \
            provider's usage page in the browser). It follows \
            changes of the registry made anywhere at once; \
            usage is asked at start, of the active slot every [switch] poll \
            seconds while [desktop] notify is on, \
            and of the others when the menu opens and their figures are older than \
            that. When the active slot's usage reaches a [desktop] \
            notify percentage (80 and 95 by default; off: never) a \
            desktop notification says so once per window and percentage, \
            with Switch to SLOT (N %) and Dismiss buttons; \
            also at the limit, when such a window resets, \
            when a switch makes a slot active that is at its limit or must \
            sign in, and when a slot is signed in again. One tray runs per \
            session: a second one (lanyard-tray.service and the autostart entry both enabled, or started twice) prints \
            "already running (pid N)" and exits 0. \
            --install-autostart writes an XDG autostart entry that runs this binary \
            (its absolute path) at login, --uninstall-autostart removes it; neither starts the tray. The package also \
            ships lanyard-tray.service, a systemd user unit bound to graphical-session.target (see docs/desktop.md).
            """,
        examples: [
            CommandExample("lanyard tray", "the tray item, until Quit or Ctrl-C"),
            CommandExample("lanyard tray --install-autostart", "start it at every login (XDG autostart)"),
            CommandExample(
                "systemctl --user enable --now lanyard-tray.service",
                "or as a systemd user service of the graphical session"
            ),
        ],
        network: true
    ) { inv in
        let install = inv.args.has("install-autostart")
        let uninstall = inv.args.has("uninstall-autostart")
        if install && uninstall {
            throw UsageError(
                message: "--install-autostart and --uninstall-autostart do not go together",
                command: "tray"
            )
        }
        if inv.args.has("force") && !install {
            throw UsageError(message: "--force goes with --install-autostart", command: "tray")
        }
        if install || uninstall { return try autostart(inv, install: install) }
        let instance: TrayInstanceLock
        switch try TrayInstanceLock.acquire(paths: inv.paths) {
        case .acquired(let lock): instance = lock
        case .held(let pid):
            inv.stderr.line(
                "lanyard tray: already running "
                    + "(\(pid > 0 ? "pid \(pid)" : "it holds \(TrayInstanceLock.path(inv.paths))"))"
            )
            return .ok
        }
        defer { withExtendedLifetime(instance) {} }
        // The tray's switches are logged `by tray` (its children keep the caller's environment).
        setenv("LANYARD_EVENT_SOURCE", "tray", 1)
        let manager = try inv.accounts()
        var options = TrayService.Options()
        options.environment = inv.context.environment
        options.describe = { RelativeTime.describe($0, now: Date()) }
        options.clockTime = { RelativeTime.clockTime($0, now: Date()) }
        let stderr = inv.stderr
        options.diagnostics = { stderr.line("lanyard tray: \($0)") }
        let lanyard = NetworkHandoff.frontExecutable()
        let environment = inv.context.environment
        options.launch = { action in TrayTerminal.open(action, lanyard: lanyard, environment: environment) }
        options.signInWithoutTerminal = { slot in
            await TrayTerminal.signInWithoutTerminal(slot, lanyard: lanyard, environment: environment)
        }
        options.openPage = { page in
            SignInProgress.open(page, what: "the usage page", err: stderr, environment: environment)
        }
        let service = TrayService(manager: manager, options: options)
        try inv.runAsync { try await service.run() }
        return .ok
    }
}

extension AgentCommands {
    /// `lanyard tray --install-autostart` / `--uninstall-autostart`: says what it did, starts nothing.
    static func autostart(_ inv: Invocation, install: Bool) throws -> ExitStatus {
        let environment = inv.context.environment
        if install {
            // `tray` runs in lanyard-net (it talks to the usage endpoint): the entry runs `lanyard`.
            let binary = NetworkHandoff.frontExecutable()
            let (path, done) = try TrayAutostart.install(
                executable: binary,
                environment: environment,
                force: inv.args.has("force")
            )
            switch done {
            case .created: inv.stdout.line("installed \(path): `\(binary) tray` starts at login")
            case .replaced: inv.stdout.line("replaced \(path): `\(binary) tray` starts at login")
            case .unchanged: inv.stdout.line("already installed: \(path) starts `\(binary) tray` at login")
            }
        } else {
            let (path, done) = try TrayAutostart.uninstall(environment: environment)
            switch done {
            case .removed: inv.stdout.line("removed \(path): the tray no longer starts at login")
            case .absent: inv.stdout.line("no autostart entry to remove (\(path) does not exist)")
            }
        }
        return .ok
    }
}
