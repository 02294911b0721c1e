import FoundationEssentials
import Dispatch
import Glibc
import LanyardAuth
import LanyardCore
import LanyardSystem
import LanyardIntegrations
import LanyardStore

/// Refreshes run in a detached worker process (its own session, so neither Ctrl-C nor a
/// `kill -9` of the command that asked can stop it between the server rotating the refresh token
/// and Lanyard storing the new one). The caller waits for it and reads the result from the store.
enum RefreshWorker {
    static let command = CommandSpec(
        name: "refresh-worker", summary: "internal: run one slot's refresh to completion", arguments: "SLOT",
        minArguments: 1, maxArguments: 1,
        flags: [FlagSpec("force", "refresh even when not due"), FlagSpec("lock-fd", value: "FD", "the slot's refresh lock, held and handed down by the caller")],
        prints: true, takesAccount: false, details: "", hidden: true, network: true) { inv in
        let slot = try SlotCommands.parseSlot(inv.args.positionals[0], inv)
        var worker = try inv.accounts()
        worker.refreshRunner = nil
        if let raw = inv.args.value("lock-fd") {
            guard let fd = Int32(raw), fd > 2 else { throw UsageError(message: "--lock-fd needs a descriptor number", command: "refresh-worker") }
            worker.inheritedLock = (slot, try FileLock(inheritedLockedFD: fd))
        }
        let manager = worker
        let force = inv.args.has("force")
        // With `[integrations] codex = true`, Codex's auth.json is a second holder of the account's
        // token family: adopt what Codex rotated before refreshing, and hand it what this refresh
        // made after, so neither side ever presents a refresh token the other has used.
        let codex = manager.config.codexIntegration ? CodexHome(explicit: nil, environment: inv.context.environment) : nil
        let credential = try inv.runAsync { () -> Credential in
            if let codex { _ = try? await CodexSync(manager: manager).copyBack(from: codex, into: slot) }
            return try await manager.freshCredential(slot: slot, force: force)
        }
        if let codex {
            do { try CodexSync(manager: manager).mirror(credential, of: slot, to: codex) } catch {
                inv.stderr.line("lanyard: warning: could not update \(codex.authPath): \(error.userFacingDescription)")
            }
        }
        inv.emit(.object(["slot": .string(slot.name), "ok": .bool(true)])) {}
        return .ok
    }

    /// A runner that spawns `lanyard refresh-worker SLOT --json` in a new session and waits.
    /// - Parameter executable: the binary to run (`lanyard-net`); nil means this one.
    static func runner(environment: [String: String], executable: String?) -> RefreshRunner {
        { slot, force, lock in
            let result = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Int32, Data), Error>) in
                DispatchQueue.global().async {
                    do {
                        continuation.resume(returning: try spawnAndWait(slot: slot, force: force, lockFD: lock.descriptor,
                                                                        environment: environment, executable: executable))
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
            guard result.0 != 0 else { return }
            throw WorkerError(status: result.0, body: result.1)
        }
    }

    /// The descriptor the worker finds the caller's held slot lock on.
    static let inheritedLockFD: Int32 = 3

    static func spawnAndWait(slot: Slot, force: Bool, lockFD: Int32, environment: [String: String], executable: String?) throws -> (Int32, Data) {
        // A copy above 9: dup2 onto the descriptor it already is would keep close-on-exec.
        let handoff = fcntl(lockFD, F_DUPFD_CLOEXEC, 10)
        guard handoff >= 0 else { throw StoreError.io(path: "lock", detail: "cannot hand the lock over: \(String(cString: strerror(errno)))") }
        defer { close(handoff) }
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { throw StoreError.io(path: "pipe", detail: String(cString: strerror(errno))) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        // stderr stays the caller's: the worker's result and errors come as JSON on the pipe, so
        // what it prints there is warnings only (Codex's auth.json, an event log that fails).
        posix_spawn_file_actions_addclose(&actions, pipe[0])
        // dup2 makes a descriptor without close-on-exec for the same open file description, so
        // the worker holds the very lock this process holds (and keeps it if this one is killed).
        posix_spawn_file_actions_adddup2(&actions, handoff, inheritedLockFD)
        var attributes = ChildSignals.attributes()
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc): a session of its own, out of reach of the terminal's Ctrl-C.
        posix_spawnattr_setflags(&attributes, Int16(0x80 | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let executable = executable ?? NetworkHandoff.currentExecutable()
        let args = [executable, "refresh-worker", slot.name, "--json", "--lock-fd", String(inheritedLockFD)] + (force ? ["--force"] : [])
        let env = environment.map { "\($0.key)=\($0.value)" }
        var pid: pid_t = 0
        let spawned = withCStrings(args) { argv in
            withCStrings(env) { envp in posix_spawn(&pid, executable, &actions, &attributes, argv, envp) }
        }
        close(pipe[1])
        guard spawned == 0 else {
            close(pipe[0])
            throw StoreError.io(path: executable, detail: "cannot start the refresh worker: \(String(cString: strerror(spawned)))")
        }
        // A pipe that cannot be read (never seen) reads as nothing: the worker's exit status says the rest.
        let output = Data((try? readToEnd(pipe[0])) ?? [])
        close(pipe[0])
        let exit = exitCode(ofWaitStatus: (try? waitForExit(pid)) ?? 0)
        return (exit, output)
    }

    static func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        return body(pointers)
    }
}

/// A refresh that failed in the worker: its code, message and exit status, as the worker reported.
struct WorkerError: LanyardError {
    let status: Int32
    let reportedCode: String
    let message: String

    init(status: Int32, body: Data) {
        self.status = status
        let error = (try? JSONValue.parse(body))?["error"]
        reportedCode = error?["code"]?.string ?? "refresh_failed"
        message = error?["message"]?.string ?? "the refresh worker exited with status \(status)"
    }

    var code: String { reportedCode }
    var errorDescription: String? { message }
}
