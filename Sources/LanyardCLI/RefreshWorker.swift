import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport
import LanyardSystem

/// Refreshes run in a detached worker process (its own session, so neither Ctrl-C nor a
/// `kill -9` of the command that asked can stop it between the server rotating the refresh token
/// and Lanyard storing the new one). The caller waits for it and reads the result from the store.
enum RefreshWorker {
    static let command = CommandSpec(
        name: "refresh-worker",
        summary: "internal: run one slot's refresh to completion",
        arguments: "SLOT",
        minArguments: 1,
        maxArguments: 1,
        flags: [
            FlagSpec("force", "refresh even when not due"),
            FlagSpec("lock-fd", value: "FD", "the slot's refresh lock, held and handed down by the caller"),
        ],
        prints: true,
        takesAccount: false,
        details: "",
        hidden: true,
        network: true
    ) { inv in
        let slot = try SlotCommands.parseSlot(inv.args.positionals[0], inv)
        var worker = try inv.accounts()
        worker.refreshRunner = nil
        if let raw = inv.args.value("lock-fd") {
            guard let fd = Int32(raw), fd > 2 else {
                throw UsageError(message: "--lock-fd needs a descriptor number", command: "refresh-worker")
            }
            worker.inheritedLock = (slot, try FileLock(inheritedLockedFD: fd))
        }
        let manager = worker
        let force = inv.args.has("force")
        // With `[integrations] codex = true`, Codex's auth.json is a second holder of the account's
        // token family: adopt what Codex rotated before refreshing, and hand it what this refresh
        // made after, so neither side ever presents a refresh token the other has used.
        let codex =
            manager.config.codexIntegration ? CodexHome(explicit: nil, environment: inv.context.environment) : nil
        let credential = try inv.runAsync { () -> Credential in
            if let codex { _ = try? await CodexSync(manager: manager).copyBack(from: codex, into: slot) }
            return try await manager.freshCredential(slot: slot, force: force)
        }
        if let codex {
            do { try CodexSync(manager: manager).mirror(credential, of: slot, to: codex) } catch {
                inv.stderr.line(
                    "lanyard: warning: could not update \(codex.signInPlace()): \(error.userFacingDescription)"
                )
            }
        }
        inv.emit(.object(["slot": .string(slot.name), "ok": .bool(true)])) {}
        return .ok
    }

    /// A runner that spawns `lanyard refresh-worker SLOT --json` in a new session and waits.
    /// - Parameter executable: the binary to run (`lanyard-net`); nil means this one.
    static func runner(environment: [String: String], executable: String?) -> RefreshRunner {
        { slot, force, lock in
            // Waiting for the child blocks this thread: the refresh's, on the blocking executor.
            let result = try spawnAndWait(
                slot: slot,
                force: force,
                lockFD: lock.descriptor,
                environment: environment,
                executable: executable
            )
            guard result.0 != 0 else { return }
            throw WorkerError(status: result.0, body: result.1)
        }
    }

    /// The descriptor the worker finds the caller's held slot lock on.
    static let inheritedLockFD: Int32 = 3

    static func spawnAndWait(
        slot: Slot,
        force: Bool,
        lockFD: Int32,
        environment: [String: String],
        executable: String?
    ) throws -> (Int32, Data) {
        // A copy above 9: dup2 onto the descriptor it already is would keep close-on-exec.
        let handoff = fcntl(lockFD, F_DUPFD_CLOEXEC, 10)
        guard handoff >= 0 else {
            throw StoreError.systemCall("fcntl", path: "lock", doing: "cannot hand the lock over")
        }
        defer { close(handoff) }
        let pipe: (read: Int32, write: Int32)
        do { pipe = try closeOnExecPipe() } catch {
            throw StoreError.io(path: "pipe", detail: error.reason, cause: ErrorCause(error))
        }
        let executable = executable ?? NetworkHandoff.currentExecutable()
        var spawn = Spawn(
            executable,
            arguments: ["refresh-worker", slot.name, "--json", "--lock-fd", String(inheritedLockFD)]
                + (force ? ["--force"] : []),
            environment: environment
        )
        spawn.stdout = .descriptor(pipe.write)
        // stderr stays the caller's: the worker's result and errors come as JSON on the pipe, so
        // what it prints there is warnings only (Codex's auth.json, an event log that fails).
        // The worker holds the very lock this process holds (and keeps it if this one is killed).
        spawn.handOff = [(handoff, inheritedLockFD)]
        // A session of its own: out of reach of the terminal's Ctrl-C.
        spawn.newSession = true
        let pid: pid_t
        do { pid = try spawn.start() } catch {
            close(pipe.write)
            close(pipe.read)
            throw StoreError.io(
                path: executable,
                detail: "cannot start the refresh worker: \(error.reason)",
                cause: ErrorCause(error)
            )
        }
        close(pipe.write)
        // A pipe that cannot be read (never seen) reads as nothing: the worker's exit status says the rest.
        let output = Data((try? readToEnd(pipe.read)) ?? [])
        close(pipe.read)
        let exit = exitCode(ofWaitStatus: (try? waitForExit(pid)) ?? 0)
        return (exit, output)
    }
}

/// A refresh that failed in the worker, rebuilt from the error it wrote as `--json` writes any
/// error (``ErrorView``): its code, message, slot and chain of causes, and its exit status. So
/// the caller reports what the worker's error was, as if the refresh had failed in-process.
struct WorkerError: SlotNamingError {
    let status: Int32
    let code: ErrorCode
    let message: String
    let slotName: String?
    /// The first of the worker error's causes, which holds the next (``ReportedCause``).
    let cause: ReportedCause?

    /// The worker is this same program, so the code it wrote is one of ours; one that is not
    /// (another version's, or no readable answer at all) reads as `refresh_failed`, and the
    /// worker's exit status is passed on either way.
    init(status: Int32, body: Data) {
        self.status = status
        let error = (try? JSONValue.parse(body))?["error"]
        code = error?["code"]?.string.flatMap(ErrorCode.init(rawValue:)) ?? .refreshFailed
        message = error?["message"]?.string ?? "the refresh worker exited with status \(status)"
        slotName = error?["slot"]?.string
        var listed: [JSONValue] = []
        if case .array(let items)? = error?["cause"] { listed = Array(items.prefix(ErrorView.causeLimit)) }
        let codes = listed.map { $0.string.flatMap(ErrorCode.init(rawValue:)) ?? .error }
        cause = codes.reversed().reduce(nil) { next, code in ReportedCause(code: code, next: next) }
    }

    var underlying: (any Error)? { cause }
    var errorDescription: String? { message }
}

/// A cause another process reported: known by its code (its text is part of the outer error's
/// message), and the cause behind it.
struct ReportedCause: LanyardError {
    let code: ErrorCode
    let next: (any LanyardError)?

    init(code: ErrorCode, next: (any LanyardError)?) {
        self.code = code
        self.next = next
    }

    var underlying: (any Error)? { next }
    var errorDescription: String? { "caused by \(code.rawValue)" }
}
