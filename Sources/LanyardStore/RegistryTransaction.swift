import Glibc
import LanyardSupport

// A registry change that lands together with a write of the file store: both or neither, even
// when the process is killed at any point (a bundle import of many slots).
//
// Two files cannot be replaced in one step, so the commit is ordered around one rename:
//
//   1. under the registry lock (and, from here to 3, the store lock), the next store is written
//      beside the store, in place, then fsynced with its folder: `store.age.incoming`
//      (EncryptedFileStore.stage);
//   2. the next registry likewise: `registry.json.incoming`;
//   3. `store.age.incoming` is renamed over `store.age` (the old one kept as `store.age.prev`) —
//      the commit point;
//   4. `registry.json.incoming` is renamed over `registry.json` (the old one kept as `.prev`).
//
// What a kill leaves is read from which of the two `.incoming` files exist (Registry.settle, run
// under the registry lock by every registry change, and by readers when the lock is free):
//
//   | registry.json.incoming | store.age.incoming | killed             | settled by
//   | yes                    | no                 | between 3 and 4    | doing 4 (roll forward)
//   | yes                    | yes                | between 1 and 3    | removing both, the registry's first
//   | no                     | yes                | during or after 1  | removing it
//
// Neither is written through a temporary file: a partly written `store.age.incoming` is only ever
// seen alone or with `registry.json.incoming` (both removed), and `registry.json.incoming` is
// complete before step 3 removes the other. Settling also removes the `….prev.tmp` link a kill
// while keeping a previous generation leaves (LeftoverTemporaries would report it), so after a
// killed transaction `lanyard doctor` finds nothing to repair.
//
// Rolling forward renames a registry document staged earlier; that is right because every
// registry change settles first, under the lock, so the registry cannot have changed since.

/// A registry change in progress under the registry lock (``Registry/transaction(_:)``). A store
/// that can stage its write (``CredentialStore/stage(_:in:)``: the file store) hands it over here,
/// and it lands together with the registry change.
package final class RegistryTransaction {
    let paths: Paths
    var staged: StagedStoreWrite?

    init(paths: Paths) { self.paths = paths }

    /// Takes over a staged store write; one per transaction.
    func adopt(_ write: StagedStoreWrite) throws {
        guard staged == nil, write.stagedPath == paths.incomingStoreFile else {
            write.discard()
            throw StoreError.io(
                path: write.stagedPath,
                detail: "a registry transaction lands one file-store write, staged at \(paths.incomingStoreFile)"
            )
        }
        staged = write
    }
}

/// The next file store, written durably beside the store (`store.age.incoming`) while the store's
/// lock is held, waiting to replace it. Holds that lock until ``commit()`` or ``discard()``.
package final class StagedStoreWrite {
    let stagedPath: String
    let targetPath: String
    private var lock: FileLock?

    init(stagedPath: String, targetPath: String, lock: FileLock) {
        self.stagedPath = stagedPath
        self.targetPath = targetPath
        self.lock = lock
    }

    /// Renames the staged file over the store (keeping the replaced one as `store.age.prev`) and
    /// releases the lock. Throws only when the rename failed, which changed nothing.
    func commit() throws {
        defer { lock = nil }
        try SecureFiles.replace(targetPath, withFile: stagedPath, keepPrevious: true)
    }

    /// Removes the staged file and releases the lock.
    func discard() {
        unlink(stagedPath)
        lock = nil
    }

    deinit { if lock != nil { discard() } }
}

extension Registry {
    /// Runs `body` on the current document under the registry lock, like ``update(_:)``, with a
    /// transaction that stores can stage a write in (``CredentialStore/stage(_:in:)``). A staged
    /// write and the registry change land together: both or neither, whenever the process dies
    /// (the order is described at the top of this file). When `body` throws, nothing staged lands.
    /// Writes made in `body` through stores that do not stage (the keyring) are not undone here.
    @discardableResult
    package func transaction<T>(_ body: (inout RegistryDocument, RegistryTransaction) throws -> T) throws -> T {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        let lock = try FileLock(path: path + ".lock")
        defer { withExtendedLifetime(lock) {} }
        try settle()
        var document = try read()
        let original = document
        let transaction = RegistryTransaction(paths: paths)
        let result: T
        do { result = try body(&document, transaction) } catch {
            transaction.staged?.discard()
            throw error
        }
        guard let staged = transaction.staged else {
            if document != original {
                try SecureFiles.atomicWrite(document.jsonData(pretty: true), to: path, keepPrevious: true)
            }
            return result
        }
        let incoming = paths.incomingRegistryFile
        do { try SecureFiles.writeNew(document.jsonData(pretty: true), to: incoming) } catch {
            staged.discard()
            throw error
        }
        do { try staged.commit() } catch {
            // Not committed: the registry's staged file goes first, as settle() removes them.
            try? SecureFiles.removeDurably(incoming)
            staged.discard()
            throw error
        }
        do { try SecureFiles.replace(path, withFile: incoming, keepPrevious: true) } catch {
            throw StoreError.io(
                path: path,
                detail: "the store holds the change but the registry could not be replaced "
                    + "(\(error.userFacingDescription)); the next lanyard command that reads the registry finishes it"
            )
        }
        return result
    }

    /// Finishes or undoes a transaction a killed process left (see the top of this file). Call
    /// with the registry lock held.
    func settle() throws {
        let incoming = paths.incomingRegistryFile
        let staged = paths.incomingStoreFile
        let hasIncoming = try SecureFiles.checkFile(incoming)
        var st = stat()
        let hasStaged = lstat(staged, &st) == 0
        guard hasIncoming || hasStaged else { return }
        if hasIncoming && !hasStaged {
            // The store was replaced: the registry follows it.
            try SecureFiles.replace(path, withFile: incoming, keepPrevious: true)
        } else if hasIncoming {
            // The store was not replaced: nothing of the change happened. The registry's file goes
            // first, durably (the other order, killed in between, would read as "roll forward").
            try SecureFiles.removeDurably(incoming)
            unlink(staged)
        } else {
            unlink(staged)
        }
        // The links a kill while keeping a previous generation leaves: the registry's (its lock is
        // held here) and the store's when nobody holds the store's lock (a write in progress).
        unlink(path + ".prev.tmp")
        let storeLock = paths.encryptedStoreFile + ".lock"
        if access(storeLock, F_OK) == 0, let held = (try? FileLock.tryLock(path: storeLock)) ?? nil {
            unlink(paths.encryptedStoreFile + ".prev.tmp")
            withExtendedLifetime(held) {}
        }
    }

    /// Settles a transaction a killed process left, for readers (which take no lock): only when
    /// one was left and nobody holds the registry lock (a transaction in progress is not the
    /// reader's to settle: the registry as it is stays right until it ends). Failures leave it
    /// for the next registry change, which reports them.
    /// - Parameter staged: look for a staged store alone too (one more `access(2)`); the hot
    ///   path (``view()``) looks only for the staged registry, which is what changes what it reads.
    func settleForReaders(staged: Bool) {
        guard access(paths.incomingRegistryFile, F_OK) == 0 || (staged && access(paths.incomingStoreFile, F_OK) == 0)
        else { return }
        guard let lock = (try? FileLock.tryLock(path: path + ".lock")) ?? nil else { return }
        try? settle()
        withExtendedLifetime(lock) {}
    }
}
