import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore

/// Every account operation of the `lanyard` command, for programs: list and resolve slots, switch
/// the active one (Codex's auth.json follows when configured), rename, remove, pin to a folder,
/// sign out, refresh, move between backends, diagnose and repair, and recover what killed
/// `lanyard exec` runs left. The CLI runs the same
/// library functions, so a program and the command always agree on the order of writes, the
/// recovery paths and the events logged. Sign-in is ``AuthSession``; requests are ``Client``.
public struct Accounts: Sendable {
    let manager: AccountManager
    let configuration: Configuration

    /// Reads config.ini and finds the stores as `configuration` says; unlocks nothing.
    public init(configuration: Configuration = Configuration()) throws {
        manager = try configuration.makeManager()
        self.configuration = configuration
    }

    /// The registry: every slot with its account, state and backend, and the active slot. Reads
    /// no secret and unlocks nothing.
    public func list() throws -> RegistryDocument { try manager.registry.load() }

    /// The slot commands act on here and the rule that chose it (`Configuration.slot`, then
    /// `LANYARD_ACCOUNT`, the nearest `.lanyard`, the active slot); nil when no rule names one.
    public func resolve() throws -> AccountResolution? {
        try manager.resolveSlot(
            flag: configuration.slot,
            environment: configuration.environment,
            directory: configuration.workingDirectory
        )
    }

    /// Makes `slot` the active slot; with `[integrations] codex = true`, Codex's auth.json follows.
    /// A switch Codex cannot follow (its keyring locked in keyring mode, say) is undone and throws
    /// an error with the cause's code: when this throws, the active slot is what it was.
    public func switchActive(to slot: Slot) async throws -> SwitchOutcome {
        try await manager.switchActive(to: slot, environment: configuration.environment)
    }

    /// The slot `lanyard switch` goes to when given none: the only slot; with exactly two, one of
    /// them active, the other one; nil otherwise.
    public func impliedSwitchTarget() throws -> Slot? { try manager.impliedSwitchTarget() }

    /// Weighs the active provider's slots by their usage windows (see ``BestSlotChoice``).
    public func bestSlot() async throws -> BestSlotChoice { try await manager.bestSlot() }

    /// Switches away from an active slot that ran out of usage, as the agent does with
    /// `[switch] auto = usage` (whatever that setting says: calling this is asking): when the
    /// active slot's busiest window is at or over `[switch] threshold` (or it is at its limit), the
    /// slot of the same provider with the most headroom under the threshold becomes active, and a
    /// `switch` event is logged. When every slot is out, nothing switches and one `switch_blocked`
    /// event is logged (not again until a switch or a check under the threshold). Pins and
    /// `LANYARD_ACCOUNT` are never overridden: only the active slot changes.
    public func autoSwitchIfNeeded() async throws -> AutoSwitchOutcome {
        try await manager.autoSwitchIfNeeded(environment: configuration.environment)
    }

    /// Renames a slot, moving its stored credential (copied and read back before the old copy goes).
    /// The outcome lists `.lanyard` pins near the working directory and under the home folder
    /// that still name the old slot (they are not rewritten).
    public func rename(_ old: Slot, to new: Slot) throws -> RenameOutcome {
        try manager.rename(old, to: new, pins: pinSearch)
    }

    /// Pins are looked for at and below the working directory and under the home folder.
    var pinSearch: PinSearch {
        PinSearch(workingDirectory: configuration.workingDirectory, environment: configuration.environment)
    }

    /// Deletes a slot and its stored credential locally (never revokes).
    public func remove(_ slot: Slot) throws { try manager.remove(slot) }

    /// Pins `slot` to `directory` (by default the configuration's working directory) and below.
    /// - Returns: the `.lanyard` file written.
    public func pin(_ slot: Slot, in directory: String? = nil) throws -> String {
        try manager.pin(slot, in: directory ?? configuration.workingDirectory)
    }

    /// Removes the `.lanyard` file of `directory` (by default the working directory).
    public func unpin(in directory: String? = nil) throws -> UnpinOutcome {
        try manager.unpin(in: directory ?? configuration.workingDirectory)
    }

    /// Forgets a slot's credential locally and marks it signed out; `revoke` also revokes the
    /// refresh token at the provider (which ends that session in every tool). When it cannot be
    /// revoked (no revocation endpoint, as for ChatGPT; a fleet's token; a failed request), this
    /// throws ``NotRevokedError`` and changes nothing: sign out without `revoke` to go ahead.
    @discardableResult
    public func signOut(_ slot: Slot, revoke: Bool = false) async throws -> SignOutOutcome {
        try await manager.signOut(slot: slot, revoke: revoke)
    }

    /// Refreshes a slot now (a refresh another process is doing is waited for and adopted).
    /// - Returns: when the new access token expires, if the provider said.
    @discardableResult
    public func refresh(_ slot: Slot) async throws -> Date? {
        try await manager.freshCredential(slot: slot, force: true).tokens.expiresAt
    }

    /// The slot's plan and usage windows.
    public func usage(_ slot: Slot) async throws -> UsageReport { try await manager.usage(slot: slot) }

    /// Moves `slots` (every slot when empty) to another backend, verifying each copy first.
    public func migrate(to target: BackendKind, slots: [Slot] = [], dryRun: Bool = false) throws -> [MigrationStep] {
        try manager.migrate(to: target, slots: slots, dryRun: dryRun)
    }

    /// Runs `command` with `slot`'s credentials, as `lanyard exec` does: the slot's variables
    /// (`LANYARD_ACCOUNT`, the provider's `env.NAME`) added to the configuration's environment,
    /// and for an openai slot a private `CODEX_HOME` whose rotated tokens are copied back when the
    /// command exits. The command runs in the foreground of this process (SIGTERM and SIGHUP
    /// sent to this process are forwarded to it; SIGINT and SIGQUIT are ignored meanwhile), and a
    /// thread is blocked until it exits.
    /// - Throws: ``ExecError`` when the command cannot be found or started (nothing is refreshed
    ///   or written for a command that is not found).
    public func exec(_ command: [String], slot: Slot) async throws -> ExecOutcome {
        try await manager.exec(command, slot: slot, environment: configuration.environment)
    }

    /// Checks the backends and the registry against each other, and looks for `.lanyard` pins
    /// (at and below the working directory, under the home folder) that name no slot. Reads only.
    public func diagnose() throws -> DoctorReport { try manager.diagnose(pins: pinSearch) }

    /// Fixes what `report` found; returns it with its `repairs` filled in.
    public func repair(_ report: DoctorReport) throws -> DoctorReport { try manager.repair(report) }

    /// Recovers the private Codex homes that killed `lanyard exec` runs left (those whose lock
    /// neither `exec` nor its command holds any more): tokens rotated there go back into their
    /// slot and the folder is removed; a folder whose copy-back fails stays. `doctor` and `exec`
    /// run this first; fold the result into a report with `DoctorReport.include(_:)`.
    public func recoverAbandonedExecFolders() async -> [ExecFolderRecovery] {
        await manager.recoverAbandonedExecFolders()
    }
}
