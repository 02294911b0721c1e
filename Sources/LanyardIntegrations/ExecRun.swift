import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardSystem

/// Why ``AccountManager/exec(_:slot:environment:)`` could not run its command.
public enum ExecError: LanyardError, Equatable {
    /// Not on PATH, or not executable there (a shell's exit 127).
    case commandNotFound(String)
    /// Found but could not be started (the system's reason; a shell's exit 126).
    case cannotRun(String, reason: String)
    /// Not on PATH, and the name is one of the slots: `lanyard exec work ls` meant `work` as the
    /// slot (the arguments are the rest of the command, for the form that works).
    case commandIsASlot(String, arguments: [String])

    public var code: ErrorCode {
        switch self {
        case .commandNotFound, .commandIsASlot: return .commandNotFound
        case .cannotRun: return .commandNotRunnable
        }
    }

    public var errorDescription: String? {
        switch self {
        case .commandNotFound(let name): return "command not found: \(TerminalText.escaped(name))"
        case .cannotRun(let name, let reason): return "cannot run \(TerminalText.escaped(name)): \(reason)"
        case .commandIsASlot(let name, let arguments):
            // Plain words as typed; anything a shell would read differently, quoted.
            let words = ([name, "--"] + (arguments.isEmpty ? ["CMD"] : arguments)).map { word in
                word.unicodeScalars.allSatisfy {
                    $0.properties.isAlphabetic || "0123456789_-./:=@%+,".unicodeScalars.contains($0)
                } && !word.isEmpty
                    ? word : ShellQuoting.quote(word, for: .sh)
            }
            return "command not found: \(TerminalText.escaped(name)) (\(TerminalText.escaped(name)) is a slot: "
                + "`lanyard exec \(TerminalText.escaped(words.joined(separator: " ")))`)"
        }
    }
}

/// What ``AccountManager/exec(_:slot:environment:)`` did.
public struct ExecOutcome: Sendable, Equatable {
    /// The copy-back of rotated tokens that failed after the command exited.
    public struct CopyBackFailure: Sendable, Equatable {
        /// Why (a ``LanyardError``'s description).
        public let reason: String
        /// The private Codex home where the tokens stay until `doctor` or the next exec recovers them.
        public let folder: String
    }

    /// The command's exit status, or 128 + the signal that ended it.
    public let status: Int32
    /// Folders earlier, killed runs left, recovered before the command started.
    public let recoveries: [ExecFolderRecovery]
    /// The slot that took tokens the command rotated (nil when it rotated none).
    public let rotatedTokensStoredIn: Slot?
    /// Set when the rotated tokens could not be copied back.
    public let copyBackFailure: CopyBackFailure?
}

/// The environment variables a slot gives a program: `LANYARD_ACCOUNT` and those the provider's
/// `env.NAME` keys name (`access_token`, `id_token` or `account_id`).
package enum SlotEnvironment {
    package static func variables(slot: Slot, credential: Credential, provider: ProviderConfig?) -> [String: String] {
        var result = ["LANYARD_ACCOUNT": slot.name]
        for (name, field) in provider?.environment ?? [:] {
            switch field {
            case "access_token": result[name] = credential.tokens.accessToken
            case "id_token": credential.tokens.idToken.map { result[name] = $0 }
            case "account_id": credential.account.accountID.map { result[name] = $0 }
            default: break
            }
        }
        return result
    }
}

extension AccountManager {
    /// Runs `command` with `slot`'s credentials, as `lanyard exec` does. First the folders killed
    /// runs left are recovered (the slot's stored refresh token may be one their command rotated
    /// away); then the credential is refreshed when due and the command gets `environment` plus
    /// the slot's variables (``SlotEnvironment``) and, for an openai slot, `CODEX_HOME` pointing at
    /// a private 0700 folder holding the slot's auth.json. The command runs in the foreground
    /// (``ForegroundChild``: it keeps the terminal; SIGTERM and SIGHUP are forwarded) and inherits
    /// the folder's lock, so a folder whose exec was killed is recovered only once the command is
    /// gone too. When it exits, tokens it rotated are copied back and the folder removed; a failed
    /// copy-back leaves the folder (reported in the outcome, never thrown: the command ran).
    /// The wait runs on the blocking executor. `recovered` hears of the recovered folders before
    /// the command starts (they are in the outcome too).
    package func exec(
        _ command: [String],
        slot: Slot,
        environment: [String: String],
        recovered: @Sendable ([ExecFolderRecovery]) -> Void = { _ in }
    ) async throws -> ExecOutcome {
        let (name, path) = try locateCommand(command, environment: environment)
        let record = try record(of: slot)
        let recoveries = await recoverAbandonedExecFolders()
        recovered(recoveries)
        let credential = try await freshCredential(slot: slot)
        let provider = config.providers[record.provider]
        var childEnvironment = environment
        for (key, value) in SlotEnvironment.variables(slot: slot, credential: credential, provider: provider) {
            childEnvironment[key] = value
        }
        var folder: ExecFolder?
        if provider?.kind == .openai {
            let made = try ExecFolder.create(for: slot, paths: paths)
            do { try made.home.write(try CodexSignIn(credential: credential, slot: slot)) } catch {
                made.remove()
                throw error
            }
            childEnvironment["CODEX_HOME"] = made.home.directory
            folder = made
        }
        var spawn = Spawn(path, environment: childEnvironment)
        spawn.argv = command
        spawn.stdin = .inherit
        spawn.userCoreLimit = true
        spawn.handOff = folder.map { [($0.lockDescriptor, $0.lockDescriptor)] } ?? []
        // The wait for the child blocks its thread for as long as the command runs: a thread of its own.
        let spawned = spawn
        let run = await BlockingExecutor.shared.run(.ownThread) { () -> Result<Int32, SystemCallError> in
            do throws(SystemCallError) { return .success(try ForegroundChild.run(spawned)) } catch {
                return .failure(error)
            }
        }
        let status: Int32
        switch run {
        case .success(let code): status = code
        case .failure(let error):
            folder?.remove()
            throw ExecError.cannotRun(name, reason: error.reason)
        }
        var storedIn: Slot?
        var failure: ExecOutcome.CopyBackFailure?
        if let folder {
            // On failure the folder stays (its lock is released when this process ends): the
            // tokens in it may be the only live ones.
            do { storedIn = try await folder.finish(self) } catch {
                failure = ExecOutcome.CopyBackFailure(
                    reason: error.userFacingDescription,
                    folder: folder.home.directory
                )
            }
        }
        return ExecOutcome(
            status: status,
            recoveries: recoveries,
            rotatedTokensStoredIn: storedIn,
            copyBackFailure: failure
        )
    }

    /// The program `exec` would run for `command` (its first word looked up in `environment`'s
    /// PATH, as a shell does), checked before anything is refreshed or written.
    /// - Throws: ``ExecError``; ``ExecError/commandIsASlot(_:arguments:)`` when the name that is
    ///   not on PATH is a slot's.
    func locateCommand(_ command: [String], environment: [String: String]) throws -> (name: String, path: String) {
        guard let name = command.first else { throw ExecError.commandNotFound("") }
        let path =
            name.contains("/")
            ? (access(name, F_OK) == 0 ? name : nil)
            : Spawn.searchPath(name, environment["PATH"] ?? "/usr/bin:/bin")
        guard let path else {
            if let slot = try? Slot(name), (try? record(of: slot)) != nil {
                throw ExecError.commandIsASlot(name, arguments: Array(command.dropFirst()))
            }
            throw ExecError.commandNotFound(name)
        }
        guard access(path, X_OK) == 0 else { throw ExecError.cannotRun(name, reason: SystemCallError("access").reason) }
        return (name, path)
    }
}
