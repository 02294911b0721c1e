import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardSystem

// The private Codex homes of `lanyard exec`: `$XDG_RUNTIME_DIR/lanyard/exec/SLOT.XXXXXX`, each
// holding the slot's auth.json — a live refresh token, which the command may rotate there.
//
// The invariant: a folder is in use exactly as long as its lock (`.lanyard-exec.lock`, flock) is
// held. `exec` takes it before the lock file gets its name (so the name never exists unlocked
// while the folder is being made) and hands the descriptor to the command it runs, so the lock
// stays held while either of them lives, whatever killed the other. Removing a folder under a
// running Codex would lose the tokens it rotates there later, and Lanyard would then present
// their spent predecessor; a folder whose lock is free has nobody left to rotate anything, and
// is recovered like a normal exit recovers it: tokens copied back into the slot, folder removed,
// both while holding its lock.

/// One private Codex home made by `lanyard exec` for a slot, held (locked) by this process.
package final class ExecFolder: Sendable {
    /// The name of the lock file in each folder.
    package static let lockName = ".lanyard-exec.lock"

    /// The slot whose auth.json the folder holds.
    package let slot: Slot
    /// The folder, as a Codex home (`CODEX_HOME`).
    package let home: CodexHome
    private let lock: FileLock

    private init(slot: Slot, home: CodexHome, lock: FileLock) {
        self.slot = slot
        self.home = home
        self.lock = lock
    }

    /// The descriptor of the held lock (close-on-exec here): the command `exec` runs must inherit
    /// it, so the folder counts as in use while the command lives.
    package var lockDescriptor: Int32 { lock.descriptor }

    /// Where the folders are: `$XDG_RUNTIME_DIR/lanyard/exec`.
    package static func parent(_ paths: Paths) -> String { paths.runtimeDirectory + "/exec" }

    /// Makes a new 0700 folder `SLOT.XXXXXX` and takes its lock.
    package static func create(for slot: Slot, paths: Paths) throws -> ExecFolder {
        try SecureFiles.ensureDirectory(paths.runtimeDirectory)
        try SecureFiles.ensureDirectory(parent(paths))
        var template = Array((parent(paths) + "/\(slot.name).XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ $0.baseAddress.flatMap { mkdtemp($0) } }) else {
            throw StoreError.io(path: parent(paths), detail: SystemCallError.reason())
        }
        let directory = String(cString: made)
        // Locked under a name scanners ignore, then renamed: the lock file is never seen unlocked.
        let lock: FileLock
        do {
            lock = try FileLock(path: directory + "/" + lockName + ".new")
            guard rename(directory + "/" + lockName + ".new", directory + "/" + lockName) == 0 else {
                throw StoreError.io(path: directory + "/" + lockName, detail: SystemCallError.reason())
            }
        } catch {
            ExecFolders.removeContents(of: directory)
            throw error
        }
        return ExecFolder(slot: slot, home: CodexHome(directory: directory), lock: lock)
    }

    /// Removes the folder (auth.json first, the lock file last), still holding the lock.
    package func remove() { ExecFolders.removeContents(of: home.directory) }

    /// What `exec` does when its command exits: copies back the tokens the command rotated and
    /// removes the folder, as ``LanyardAuth/AccountManager/recoverAbandonedExecFolders()`` does
    /// for a killed one.
    /// - Returns: the slot that took newer tokens, if any.
    /// - Throws: when copying back failed; the folder then stays, with its tokens.
    package func finish(_ manager: AccountManager) async throws -> Slot? {
        try await manager.settleExecFolder(home.directory, slot: slot)
    }
}

/// What happened to a folder a killed `lanyard exec` left (see
/// ``LanyardAuth/AccountManager/recoverAbandonedExecFolders()``).
public struct ExecFolderRecovery: Sendable, Equatable {
    /// What became of the folder and its tokens.
    public enum Outcome: Sendable, Equatable {
        /// Tokens the command had rotated went back into this slot; the folder was removed.
        case copiedBack(into: Slot)
        /// Nothing in it was newer than the slot's tokens (or it held no auth.json, or its slot
        /// was signed out, or no slot holds its account any more); the folder was removed.
        case removed
        /// Copying back failed (the message says why); the folder and its tokens stay, for the
        /// next `doctor` or `exec` to try again.
        case kept(problem: String)
    }

    /// The folder.
    public let path: String
    /// The slot it was made for (from its name).
    public let slot: Slot
    /// What became of it.
    public let outcome: Outcome
}

extension ExecFolderRecovery: CustomStringConvertible {
    /// What happened, in `doctor`'s words.
    public var description: String {
        switch outcome {
        case .copiedBack(let slot):
            return DoctorReport.Repair.recoveredExecFolder(path, copiedBackInto: slot).description
        case .removed: return DoctorReport.Repair.recoveredExecFolder(path, copiedBackInto: nil).description
        case .kept(let problem): return DoctorReport.UnrecoveredExecFolder(path: path, problem: problem).description
        }
    }
}

extension DoctorReport {
    /// Adds what ``LanyardAuth/AccountManager/recoverAbandonedExecFolders()`` did: the folders
    /// recovered as repairs, those kept (copying back failed) as problems.
    package mutating func include(_ recoveries: [ExecFolderRecovery]) {
        for recovery in recoveries {
            switch recovery.outcome {
            case .copiedBack(let slot): repairs.append(.recoveredExecFolder(recovery.path, copiedBackInto: slot))
            case .removed: repairs.append(.recoveredExecFolder(recovery.path, copiedBackInto: nil))
            case .kept(let problem):
                unrecoveredExecFolders.append(UnrecoveredExecFolder(path: recovery.path, problem: problem))
            }
        }
    }
}

extension AccountManager {
    /// Recovers the folders under `$XDG_RUNTIME_DIR/lanyard/exec/` that a killed `lanyard exec`
    /// left: those whose lock nobody holds (neither `exec` nor the command it ran is alive). For
    /// each, the tokens its command rotated are copied back into the slot the folder is named
    /// after — or, when that slot holds another account or is gone, into the slot holding the
    /// account — exactly as `exec` does when its command exits (``ExecFolder/finish(_:)``), and
    /// the folder is removed. A folder whose copy-back fails stays, with its tokens, and is
    /// reported.
    ///
    /// A folder without a lock file (made before `exec` took one) counts as abandoned once it is
    /// more than ``ExecFolders/unlockedGrace`` seconds old and no process of this user has it as
    /// its `CODEX_HOME` (`/proc/PID/environ`). Folders in use are left alone.
    ///
    /// Call it before handing out a slot's tokens: a killed command may have rotated the slot's
    /// stored refresh token away, and only its folder holds the live one.
    package func recoverAbandonedExecFolders() async -> [ExecFolderRecovery] {
        var results: [ExecFolderRecovery] = []
        let parent = ExecFolder.parent(paths)
        var inUse: Set<ExecFolders.FileID>?
        for (name, slot) in ExecFolders.candidates(in: parent) {
            let path = parent + "/" + name
            switch ExecFolders.lockIfFree(path + "/" + ExecFolder.lockName) {
            case .inUse:
                continue
            case .free(let lock):
                results.append(await recover(path, slot: slot))
                withExtendedLifetime(lock) {}  // released once the folder is gone
            case .missing:
                guard let found = ExecFolders.identity(path),
                    clock.now().timeIntervalSince1970 - found.modified >= ExecFolders.unlockedGrace
                else {
                    continue
                }
                let homes = inUse ?? ExecFolders.codexHomesInUse()
                inUse = homes
                guard !homes.contains(found.id) else { continue }
                results.append(await recover(path, slot: slot))
            }
        }
        return results
    }

    /// Copies back and removes one abandoned folder (its lock, if it has one, held by the caller).
    private func recover(_ path: String, slot: Slot) async -> ExecFolderRecovery {
        do {
            let copiedInto = try await settleExecFolder(path, slot: slot)
            return ExecFolderRecovery(
                path: path,
                slot: slot,
                outcome: copiedInto.map { .copiedBack(into: $0) } ?? .removed
            )
        } catch {
            return ExecFolderRecovery(path: path, slot: slot, outcome: .kept(problem: error.userFacingDescription))
        }
    }

    /// Copies the tokens rotated in the exec folder at `path` back into `slot` — or, when that
    /// slot holds another account or is gone (renamed meanwhile), into the slot holding the
    /// account — then removes the folder. A slot without a stored credential (signed out
    /// meanwhile) takes nothing. Throws, leaving the folder, when copying back fails.
    /// - Returns: the slot that took newer tokens, if any.
    func settleExecFolder(_ path: String, slot: Slot) async throws -> Slot? {
        let home = CodexHome(directory: path)
        let sync = CodexSync(manager: self)
        func copyBack(into target: Slot) async throws -> Bool {
            do { return try await sync.copyBack(from: home, into: target) } catch StoreError.notFound { return false }
        }
        var copiedInto: Slot?
        // The folder's sign-in and the slot holding its account: one hop.
        let found = try await BlockingExecutor.shared.run { () throws -> (CodexAuthFile, Slot?)? in
            guard let live = try home.read() else { return nil }
            return (live, try sync.ownerSlot(of: live))
        }
        if let (_, owner) = found {
            if try await copyBack(into: slot) {
                copiedInto = slot
            } else if let owner, owner != slot, try await copyBack(into: owner) {
                copiedInto = owner
            }
        }
        await BlockingExecutor.shared.run { ExecFolders.removeContents(of: path) }
        return copiedInto
    }
}

/// Finding `exec`'s folders and telling those in use from those abandoned.
package enum ExecFolders {
    /// How old a folder without a lock file must be before it can count as abandoned: the time
    /// between making a folder and starting its command, with room to spare.
    package static let unlockedGrace: TimeInterval = 60

    /// The folders named `SLOT.XXXXXX` (a valid slot name, six characters after the last dot)
    /// that are real folders of this user; anything else there is not Lanyard's and is left alone.
    static func candidates(in parent: String) -> [(name: String, slot: Slot)] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: parent) else { return [] }
        return names.sorted().compactMap { name in
            guard let dot = name.lastIndex(of: "."), name[name.index(after: dot)...].utf8.count == 6,
                let slot = try? Slot(String(name[..<dot]))
            else { return nil }
            var st = stat()
            guard lstat(parent + "/" + name, &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid == geteuid() else {
                return nil
            }
            return (name, slot)
        }
    }

    /// A folder's lock, as a scanner finds it.
    enum LockState {
        /// Taken here: nobody else holds it (closing the descriptor releases it).
        case free(FileDescriptor)
        /// Held by a live `exec` or its command.
        case inUse
        /// No lock file: a folder made before `exec` took locks, or one being made or removed.
        case missing
    }

    /// An open descriptor, closed when released.
    final class FileDescriptor {
        let fd: Int32
        init(_ fd: Int32) { self.fd = fd }
        deinit { close(fd) }
    }

    /// Tries the lock at `path` without waiting and without creating the file. Taken, it is
    /// checked to still be the file at `path`: one a recovery removed while this waited to lock
    /// it belongs to a folder already dealt with.
    static func lockIfFree(_ path: String) -> LockState {
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return errno == ENOENT ? .missing : .inUse }  // unreadable: not ours to judge
        let descriptor = FileDescriptor(fd)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            return .inUse
        }
        var opened = stat()
        guard fstat(fd, &opened) == 0, let named = identity(path)?.id,
            named == FileID(device: UInt64(opened.st_dev), inode: UInt64(opened.st_ino))
        else { return .inUse }
        return .free(descriptor)
    }

    /// A file's identity: its device and inode, whatever path names it.
    struct FileID: Hashable {
        let device: UInt64
        let inode: UInt64
    }

    /// The identity of `path` and when it last changed (seconds since 1970).
    static func identity(_ path: String, followingLinks: Bool = false) -> (id: FileID, modified: TimeInterval)? {
        var st = stat()
        guard (followingLinks ? stat(path, &st) : lstat(path, &st)) == 0 else { return nil }
        return (
            FileID(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)),
            TimeInterval(st.st_mtim.tv_sec) + TimeInterval(st.st_mtim.tv_nsec) / 1e9
        )
    }

    /// The folders this user's processes have as `CODEX_HOME`, by identity (however the path was
    /// spelt). Another user's environment cannot be read, and would not name our folders.
    static func codexHomesInUse() -> Set<FileID> {
        let prefix = Array("CODEX_HOME=".utf8)
        var homes = Set<FileID>()
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where Int32(entry) != nil {
            guard let environment = FileManager.default.contents(atPath: "/proc/\(entry)/environ") else { continue }
            for variable in environment.split(separator: 0) where variable.starts(with: prefix) {
                if let id = identity(
                    String(decoding: variable.dropFirst(prefix.count), as: UTF8.self),
                    followingLinks: true
                )?.id {
                    homes.insert(id)
                }
            }
        }
        return homes
    }

    /// Removes a folder: auth.json first (the secret), then the rest, the lock file last, so a
    /// scanner never finds a lock-less folder that still holds tokens.
    static func removeContents(of directory: String) {
        unlink(directory + "/auth.json")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name != ExecFolder.lockName {
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
        }
        unlink(directory + "/" + ExecFolder.lockName)
        rmdir(directory)
    }
}
