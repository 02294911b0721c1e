import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardSystem

// `lanyard exec --follow`: Codex under a slot, moved to the slot a `switch` (or the agent's
// auto-switch) chooses while it runs. Codex does not reload auth.json when the account changes
// (openai/codex#43010), so a move is: stop Codex (SIGINT, then SIGTERM, then SIGKILL, each after
// a grace period), write the new slot's auth.json into the same private CODEX_HOME, and start
// `codex resume SESSION_ID` for the session the stopped Codex was writing there.

/// How `exec --follow` stops Codex for a move.
package struct FollowOptions: Sendable {
    /// The default ``grace``.
    package static let defaultGrace: TimeInterval = 10

    /// Seconds Codex has to end after SIGINT before it gets SIGTERM, and again after SIGTERM
    /// before SIGKILL.
    package var grace: TimeInterval

    package init(grace: TimeInterval = FollowOptions.defaultGrace) { self.grace = grace }
}

/// Why `exec --follow` cannot start.
package enum FollowError: LanyardError, Equatable {
    /// The slot's provider is not an openai one: there is no Codex credential to move.
    case notCodexSlot(Slot)

    package var code: ErrorCode { .integrationUnsupported }

    package var errorDescription: String? {
        switch self {
        case .notCodexSlot(let slot):
            return "--follow moves Codex between openai slots, and \(slot.name) is not one (use exec without --follow)"
        }
    }
}

/// One move of the running Codex from a slot to another.
package struct FollowMove: Sendable, Equatable {
    package let from: Slot
    package let to: Slot
    /// The Codex session resumed as `to` (nil when Codex had recorded none: the command was
    /// started again as given).
    package let session: String?
}

/// A switch `exec --follow` did not follow: Codex stays with the slot it runs as (or, when the
/// new credential could not be written after Codex stopped, is not started again). `exec
/// --follow` ends with this error once Codex has ended.
package struct SwitchNotFollowed: LanyardError, Equatable {
    /// The slot the switch chose.
    package let slot: Slot
    /// The slot Codex ran as.
    package let running: Slot
    /// Whether Codex was stopped (and not started again).
    package let codexStopped: Bool
    /// Why (the error's description).
    package let reason: String
    /// The error's code, so the exit status says what went wrong.
    package let code: ErrorCode

    package var errorDescription: String? {
        let codex = codexStopped ? "Codex was stopped and not started again" : "Codex kept running as \(running.name)"
        return "did not move Codex to \(slot.name) (\(codex)): \(reason)"
    }
}

/// What ``AccountManager/execFollowing(_:slot:environment:options:recovered:report:)`` did.
package struct FollowOutcome: Sendable {
    /// The last command's exit status, or 128 + the signal that ended it.
    package let status: Int32
    /// The moves made, in order.
    package let moves: [FollowMove]
    /// The switch that was not followed, if one was not.
    package let notFollowed: SwitchNotFollowed?
    /// Folders earlier, killed runs left, recovered before Codex started.
    package let recoveries: [ExecFolderRecovery]
    /// The slot that took tokens Codex rotated, when the folder was settled at the end.
    package let rotatedTokensStoredIn: Slot?
    /// Set when the rotated tokens could not be copied back at the end.
    package let copyBackFailure: ExecOutcome.CopyBackFailure?
}

/// What `exec --follow` tells its caller while Codex runs (the CLI prints it at once).
package enum FollowEvent: Sendable, Equatable {
    /// Codex ended for a switch and is being started as the new slot.
    case moving(FollowMove)
    /// A switch is not followed (see ``SwitchNotFollowed``).
    case notFollowing(SwitchNotFollowed)
}

extension AccountManager {
    /// Runs `command` (Codex) as `slot` like ``exec(_:slot:environment:recovered:)`` does — a
    /// private CODEX_HOME holding the slot's auth.json, the command in the foreground of the
    /// terminal, SIGTERM and SIGHUP forwarded — and follows the active slot while it runs: each
    /// time the registry's active slot changes (a `switch`, the agent's auto-switch) to a slot
    /// other than the one Codex runs as, Codex is moved there.
    ///
    /// A move first gets the new slot's credential (refreshed when due) while Codex still runs;
    /// when that fails (the slot must sign in, is not an openai slot), Codex is left alone,
    /// `report` hears why, later switches are no longer followed, and the outcome carries the
    /// failure. Otherwise Codex gets SIGINT, then SIGTERM after `options.grace` seconds, then
    /// SIGKILL after as many again; the terminal's modes are put back; tokens it rotated are
    /// copied back and the new slot's auth.json written in the same folder (``CodexSync/export(slot:to:)``,
    /// as `switch` does); and `command[0] resume SESSION_ID` starts, for the newest session in the
    /// folder's `sessions/` (Codex's `rollout-…-UUID.jsonl` files), or `command` again when Codex
    /// recorded none. A command that ends by itself (or after SIGTERM or SIGHUP sent to this
    /// process) ends the run with its status. Waiting happens on the blocking executor; the
    /// registry is watched by inotify (no polling).
    package func execFollowing(
        _ command: [String],
        slot: Slot,
        environment: [String: String],
        options: FollowOptions = FollowOptions(),
        recovered: @Sendable ([ExecFolderRecovery]) -> Void = { _ in },
        report: @Sendable (FollowEvent) -> Void = { _ in }
    ) async throws -> FollowOutcome {
        let (name, path) = try locateCommand(command, environment: environment)
        guard isCodexSlot(try await BlockingExecutor.shared.run { try self.record(of: slot) }) else {
            throw FollowError.notCodexSlot(slot)
        }
        let recoveries = await recoverAbandonedExecFolders()
        recovered(recoveries)
        // Watching starts before the active slot is read, so no switch falls between the two.
        let watch = registry.watch()
        defer { watch.close() }
        var lastActive = try await BlockingExecutor.shared.run { [registry] in try registry.view().active() }
        let credential = try await freshCredential(slot: slot)
        let folder = try await BlockingExecutor.shared.run { [paths] in try ExecFolder.create(for: slot, paths: paths) }
        let sync = CodexSync(manager: self)
        do { _ = try await sync.export(slot: slot, to: folder.home) } catch {
            folder.remove()
            throw error
        }

        ForegroundChild.beginForwarding()
        defer { ForegroundChild.endForwarding() }
        let modes = TerminalModes.save()
        var current = slot
        var child: WatchedChild
        do {
            child = try startFollowed(
                command,
                path: path,
                slot: slot,
                credential: credential,
                folder: folder,
                environment: environment
            )
        } catch {
            folder.remove()
            throw ExecError.cannotRun(name, reason: error.reason)
        }
        var status: Int32
        var moves: [FollowMove] = []
        var notFollowed: SwitchNotFollowed?
        while true {
            let watching = notFollowed == nil ? watch.fd : -1
            let wake = await BlockingExecutor.shared.run(.ownThread) { [child] in
                child.wait(orChangeOf: watching, timeout: nil)
            }
            if wake == .ended {
                status = child.reap()
                break
            }
            watch.drain()  // a nonblocking read
            guard ForegroundChild.terminationRequested == 0,
                let active = try? await BlockingExecutor.shared.run(
                    .cancellable,
                    { [registry] in try registry.view().active() }
                ),
                active != lastActive
            else { continue }
            lastActive = active
            let target = active
            guard target != current else { continue }
            // All the new slot needs is checked while Codex still runs: one that cannot take over
            // leaves Codex as it is.
            let next: Credential
            do {
                let record = try await BlockingExecutor.shared.run { try self.record(of: target) }
                guard isCodexSlot(record) else { throw FollowError.notCodexSlot(target) }
                next = try await freshCredential(slot: target)
                _ = try CodexAuthFile(credential: next, slot: target)
            } catch {
                let failure = SwitchNotFollowed(slot: target, running: current, codexStopped: false, error: error)
                notFollowed = failure
                report(.notFollowing(failure))
                continue
            }
            let stopped = await stop(child, grace: options.grace)
            await BlockingExecutor.shared.run { modes.restore() }  // waits for output to drain
            if ForegroundChild.terminationRequested != 0 {
                status = stopped
                break
            }
            let session = await BlockingExecutor.shared.run { [home = folder.home.directory] in
                CodexSessions.newest(in: home)
            }
            do { _ = try await sync.export(slot: target, to: folder.home) } catch {
                let failure = SwitchNotFollowed(slot: target, running: current, codexStopped: true, error: error)
                notFollowed = failure
                report(.notFollowing(failure))
                status = stopped
                break
            }
            let move = FollowMove(from: current, to: target, session: session)
            report(.moving(move))
            moves.append(move)
            let argv = session.map { [command[0], "resume", $0] } ?? command
            do {
                child = try startFollowed(
                    argv,
                    path: path,
                    slot: target,
                    credential: next,
                    folder: folder,
                    environment: environment
                )
            } catch {
                let failure = SwitchNotFollowed(
                    slot: target,
                    running: current,
                    codexStopped: true,
                    error: ExecError.cannotRun(name, reason: error.reason)
                )
                notFollowed = failure
                report(.notFollowing(failure))
                status = stopped
                break
            }
            current = target
        }
        await BlockingExecutor.shared.run { modes.restore() }
        var storedIn: Slot?
        var failure: ExecOutcome.CopyBackFailure?
        // As exec: on failure the folder stays, with tokens that may be the only live ones.
        do { storedIn = try await folder.finish(self) } catch {
            failure = ExecOutcome.CopyBackFailure(reason: error.userFacingDescription, folder: folder.home.directory)
        }
        return FollowOutcome(
            status: status,
            moves: moves,
            notFollowed: notFollowed,
            recoveries: recoveries,
            rotatedTokensStoredIn: storedIn,
            copyBackFailure: failure
        )
    }

    private func isCodexSlot(_ record: SlotRecord) -> Bool { config.providers[record.provider]?.kind == .openai }

    /// Starts one command of a follow run as `slot`, in `folder`, and a thread that notes its end.
    private func startFollowed(
        _ command: [String],
        path: String,
        slot: Slot,
        credential: Credential,
        folder: ExecFolder,
        environment: [String: String]
    ) throws(SystemCallError) -> WatchedChild {
        var childEnvironment = environment
        let provider = (try? record(of: slot)).flatMap { config.providers[$0.provider] }
        for (key, value) in SlotEnvironment.variables(slot: slot, credential: credential, provider: provider) {
            childEnvironment[key] = value
        }
        childEnvironment["CODEX_HOME"] = folder.home.directory
        var spawn = Spawn(path, environment: childEnvironment)
        spawn.argv = command
        spawn.stdin = .inherit
        spawn.userCoreLimit = true
        spawn.handOff = [(folder.lockDescriptor, folder.lockDescriptor)]
        let pid = try ForegroundChild.start(spawn)
        let child: WatchedChild
        do { child = try WatchedChild(pid: pid) } catch {
            // No way to watch it: end it rather than leave it running unwatched.
            kill(pid, SIGKILL)
            _ = try? waitForExit(pid)
            ForegroundChild.ended()
            throw error
        }
        BlockingExecutor.shared.submitOnOwnThread { child.waitForEnd() }
        return child
    }

    /// Stops `child`: SIGINT, then SIGTERM after `grace` seconds, then SIGKILL after as many
    /// again (a Codex that ignores both would otherwise hold the move, and the terminal, forever).
    /// - Returns: its exit status.
    private func stop(_ child: WatchedChild, grace: TimeInterval) async -> Int32 {
        for sig in [SIGINT, SIGTERM, SIGKILL] {
            child.signal(sig)
            let wait: TimeInterval? = sig == SIGKILL ? nil : grace
            if await BlockingExecutor.shared.run(.toCompletion, { child.wait(orChangeOf: -1, timeout: wait) }) == .ended
            {
                break
            }
        }
        return child.reap()
    }
}

extension SwitchNotFollowed {
    init(slot: Slot, running: Slot, codexStopped: Bool, error: any Error) {
        self.init(
            slot: slot,
            running: running,
            codexStopped: codexStopped,
            reason: error.userFacingDescription,
            code: (error as? any LanyardError)?.code ?? .unknown
        )
    }
}

/// The sessions Codex records in a Codex home: `sessions/YYYY/MM/DD/rollout-TIMESTAMP-UUID.jsonl`,
/// one file a session, created at its first turn and appended to when it is resumed (Codex's
/// `RolloutRecorder`).
package enum CodexSessions {
    /// The id (a UUID) of the session written last in `home`, by modification time; nil when there
    /// is none.
    package static func newest(in home: String) -> String? {
        let root = home + "/sessions"
        guard let paths = try? FileManager.default.subpathsOfDirectory(atPath: root) else { return nil }
        var best: (id: String, modified: Double)?
        for relative in paths {
            let name = relative.split(separator: "/").last.map(String.init) ?? relative
            guard name.hasPrefix("rollout-"), name.hasSuffix(".jsonl"), let id = sessionID(fromFileName: name) else {
                continue
            }
            var st = stat()
            guard lstat(root + "/" + relative, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            let modified = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
            if best.map({ modified > $0.modified }) ?? true { best = (id, modified) }
        }
        return best?.id
    }

    /// The UUID at the end of a rollout file's name (`rollout-2026-12-04T12-00-00-UUID.jsonl`).
    package static func sessionID(fromFileName name: String) -> String? {
        let stem = name.dropLast(".jsonl".count)
        guard stem.count > 36 else { return nil }
        let candidate = String(stem.suffix(36))
        guard UUID(uuidString: candidate) != nil, stem.dropLast(36).hasSuffix("-") else { return nil }
        return candidate.lowercased()
    }
}
