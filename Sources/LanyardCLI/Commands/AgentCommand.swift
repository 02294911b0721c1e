import FoundationEssentials
import Glibc
import LanyardAgent
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSystem

/// A second agent for the same user.
struct AgentRunningError: LanyardError {
    let lockPath: String
    var code: ErrorCode { .agentRunning }
    var errorDescription: String? { "another lanyard agent is already running (it holds \(lockPath))" }
}

extension AgentCommands {
    static let agent = CommandSpec(
        name: "agent",
        summary: "keep every slot's tokens fresh in the background",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [FlagSpec("once", "refresh the slots that are due now, then exit (for a systemd timer)")],
        prints: false,
        takesAccount: false,
        details: """
            Runs in the foreground until SIGTERM or Ctrl-C. Each signed-in slot is refreshed once it is within \
            [refresh] lead of expiry, plus a random delay of up to [agent] jitter seconds (at most half the lead) \
            so slots do not refresh together. Transient failures are retried with exponential backoff. The \
            agent sleeps until the next due time and wakes early when another process changes the registry. \
            A slot whose session ends raises a desktop notification \
            and runs the [agent] hook. With [switch] auto = usage \
            it also checks the active slot's usage every [switch] poll seconds, \
            and at once when a Lanyard command logs a \
            usage_limit_reached for it, and switches to the slot with the most headroom once the active one reaches \
            [switch] threshold (a notification, the hook and a switch event say so). One agent runs \
            per user; it shares the per-slot refresh lock with every other Lanyard command.
            """,
        examples: [
            CommandExample("lanyard agent", "keep every slot fresh, in the foreground until Ctrl-C"),
            CommandExample(
                "systemctl --user enable --now lanyard-agent.service",
                "run it as a user service (the unit ships with the package)"
            ),
            CommandExample("lanyard agent --once", "refresh what is due and exit (for lanyard-refresh.timer or cron)"),
        ],
        network: true
    ) { inv in
        let once = inv.args.has("once")
        let config = try inv.config()
        let paths = inv.paths
        setenv("LANYARD_EVENT_SOURCE", "agent", 1)
        var environment = inv.context.environment
        environment["LANYARD_EVENT_SOURCE"] = "agent"
        var manager = try inv.accounts()
        if manager.refreshRunner != nil {
            manager.refreshRunner = RefreshWorker.runner(environment: environment, executable: nil)
        }
        guard let lock = try RefreshAgent.lock(paths: paths) else {
            if once {
                inv.stderr.line("lanyard: the agent is running; nothing to do")
                return .ok
            }
            throw AgentRunningError(lockPath: paths.lockDirectory + "/agent.lock")
        }
        defer { withExtendedLifetime(lock) {} }
        let stderr = inv.stderr
        var options = RefreshAgent.Options(
            jitter: config.agentJitter,
            notify: config.agentNotify,
            hook: config.agentHook
        )
        options.autoSwitch = config.autoSwitch.mode == .usage
        options.environment = environment
        options.clockTime = { RelativeTime.clockTime($0, now: Date()) }
        let agent = RefreshAgent(
            manager: manager,
            options: options,
            diagnostics: { stderr.line("lanyard agent: \($0)") }
        )
        if once {
            return try agent.runOnce() == 0 ? .ok : .network
        }
        let stopper = agent.stopper
        let watch = inv.onInterrupt { stopper.stop() }
        defer { watch?.cancel() }
        stderr.line("lanyard agent: started (pid \(getpid()))")
        try agent.run()
        stderr.line("lanyard agent: stopped")
        return .ok
    }
}
