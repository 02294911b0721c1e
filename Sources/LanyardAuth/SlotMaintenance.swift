import FoundationEssentials
import LanyardCore
import LanyardStore
import LanyardSupport

// Account operations on slots that change the registry or a store: rename, remove, switch, pin,
// migrate. Each decides here, once, the order in which the store and the registry are written, so
// the CLI and programs embedding LanyardKit behave the same.

/// The result of ``AccountManager/rename(_:to:)``.
public struct RenameOutcome: Sendable, Equatable {
    public let from: Slot
    public let to: Slot
    /// Whether a stored credential moved (false for a slot that held none).
    public let movedCredential: Bool
    /// Non-fatal problems (the old credential could not be deleted), for the caller to show.
    public let warnings: [String]
    /// `.lanyard` pins that still name the old slot (a rename does not rewrite files in other
    /// people's trees), when the caller asked for a search.
    public var stalePins: [String] = []
}

/// Where to look for `.lanyard` pins: the pin in effect at a working directory (found walking
/// up), and the folders below it and below the home folder (a bounded walk; see
/// `PinFile.scan`).
package struct PinSearch: Sendable {
    package let workingDirectory: String
    package let home: String?

    /// The search for a process working in `workingDirectory` whose `HOME` is `environment`'s.
    package init(workingDirectory: String, environment: [String: String]) {
        self.workingDirectory = workingDirectory
        home = environment["HOME"]
    }

    /// Every trustworthy pin found, in path order, each once.
    package func pins() -> [(path: String, name: String)] {
        var pins = PinFile.scan(under: [workingDirectory] + (home.map { [$0] } ?? [])).pins
        if let inEffect = PinFile.find(from: workingDirectory).pin, !pins.contains(where: { $0.path == inEffect.path })
        {
            pins.append(inEffect)
        }
        return pins.sorted { $0.path < $1.path }
    }
}

/// The result of ``AccountManager/setActive(_:)``.
public struct ActiveSlotChange: Sendable, Equatable {
    /// The slot that was active before (nil when none was).
    public let previous: Slot?
    /// The slot now active.
    public let active: Slot
    /// The new active slot's record.
    public let record: SlotRecord
}

/// The result of ``AccountManager/unpin(in:)``.
public struct UnpinOutcome: Sendable, Equatable {
    /// Whether a `.lanyard` file was removed from the directory.
    public let removed: Bool
    /// A pin in a parent directory that still applies: its path and the slot name it holds.
    public let stillPinnedByPath: String?
    public let stillPinnedToName: String?
}

/// The result of ``AccountManager/signOut(slot:revoke:ifNotRevoked:)``.
public struct SignOutOutcome: Sendable, Equatable {
    /// Whether the provider revoked the refresh token.
    public let revoked: Bool
    /// Whether the slot was already signed out before (so there was nothing to revoke).
    public let wasSignedOut: Bool
    /// Why a revocation that was asked for did not happen, when the slot was signed out anyway
    /// (``WhenNotRevoked/signOutAnyway``).
    public var notRevoked: NotRevokedError.Reason? = nil
}

/// What ``AccountManager/signOut(slot:revoke:ifNotRevoked:)`` does when a revocation was asked
/// for but cannot happen (no revocation endpoint, a fleet's token) or fails.
package enum WhenNotRevoked: Sendable {
    /// Throw ``NotRevokedError`` and change nothing: the caller asks its user first.
    case refuse
    /// Sign out anyway and say why in ``SignOutOutcome/notRevoked``.
    case signOutAnyway
}

/// A sign-out with revocation that did not happen because the refresh token could not be
/// revoked; nothing was signed out.
public struct NotRevokedError: LanyardError, Equatable {
    public enum Reason: Sendable, Equatable {
        /// The provider has no revocation endpoint (ChatGPT sign-in has none).
        case noRevocationEndpoint(provider: String)
        /// The slot's refresh token is a fleet's (this machine no longer shares the slot): never
        /// revoked from one machine.
        case fleetToken
        /// The revocation request failed.
        case failed(AuthError)

        /// The reason in words, for messages and `--json`.
        public var description: String {
            switch self {
            case .noRevocationEndpoint(let provider):
                return "the provider \(provider) has no revocation endpoint"
            case .fleetToken:
                return "its refresh token is its fleet's, which no single machine revokes"
            case .failed(let error):
                return "the revocation failed (\(error.userFacingDescription))"
            }
        }
    }

    public let slot: Slot
    public let reason: Reason

    /// A failed request keeps its own code (a network failure exits 6, and may be retried);
    /// a revocation that cannot happen is `revocation_unavailable`.
    public var code: ErrorCode {
        if case .failed(let error) = reason { return error.code }
        return .revocationUnavailable
    }

    public var errorDescription: String? {
        "could not revoke \(slot.name)'s refresh token: \(reason.description); nothing was signed out "
            + "(`lanyard logout \(slot.name) --revoke --yes` signs out here without revoking)"
    }
}

extension AccountManager {
    /// The slot's registry record (only that record is decoded: ``RegistryView``).
    /// - Throws: `RegistryError.unknownSlot` when the registry has no such slot.
    package func record(of slot: Slot) throws -> SlotRecord {
        guard let record = try registry.view().record(of: slot) else { throw RegistryError.unknownSlot(slot) }
        return record
    }

    /// Renames a slot. The credential is copied to the new name and read back before the old
    /// copy is deleted, all under the registry's lock; a failed delete only leaves a stray copy
    /// (reported in `warnings`), never a slot without its credential.
    /// With `pins`, the outcome lists the pins found there that still name `old`.
    package func rename(_ old: Slot, to new: Slot, pins: PinSearch? = nil) throws -> RenameOutcome {
        try refuseIfShared(old, "rename it")
        var warnings: [String] = []
        var moved = false
        // Both slots' refresh locks, in name order, before the registry's: a refresh of OLD that is
        // under way finishes (and its new tokens are what moves), and none starts meanwhile.
        let locks = try Set([old, new]).sorted { $0.name < $1.name }.map { try FileLock.slot($0, paths: paths) }
        defer { withExtendedLifetime(locks) {} }
        var oldStore: (any CredentialStore)?
        try registry.update { doc in
            guard let record = doc.slots[old] else { throw RegistryError.unknownSlot(old) }
            guard doc.slots[new] == nil else { throw RegistryError.slotExists(new) }
            if old == new { return }
            let store = try openStore(record.backend, false)
            // Tokens a killed refresh left in a recovery file are the current ones: they move.
            _ = try RecoveryFile(paths: paths, slot: old).settle(into: store, slot: old)
            var credential: Credential?
            do { credential = try store.get(old) } catch StoreError.notFound { credential = nil }
            if let credential {
                try store.put(credential, for: new)
                guard try store.get(new) == credential else {
                    throw StoreError.corrupt(
                        source: "slot \(new.name)",
                        detail: "read-back after copy did not match; \(old.name) kept"
                    )
                }
            }
            doc.slots[new] = record
            doc.slots[old] = nil
            if doc.active == old { doc.active = new }
            if credential != nil {
                moved = true
                oldStore = store
            }
        }
        // Only once the registry names the new slot: a crash before leaves a stray copy under the
        // new name, after it one under the old name, each the same session as the listed slot,
        // which `doctor --repair` removes; never two listed slots sharing one refresh token.
        if let oldStore {
            do { try oldStore.delete(old) } catch {
                warnings.append("could not delete the old credential of \(old.name): \(error.userFacingDescription)")
            }
        }
        var outcome = RenameOutcome(from: old, to: new, movedCredential: moved, warnings: warnings)
        if let pins, old != new { outcome.stalePins = pins.pins().filter { $0.name == old.name }.map(\.path) }
        return outcome
    }

    /// Deletes a slot and its stored credential (never revokes it). The secret goes first: a
    /// registry entry without a secret is repairable, a secret without an entry is invisible.
    package func remove(_ slot: Slot) throws {
        try refuseIfShared(slot, "remove it")
        let lock = try FileLock.slot(slot, paths: paths)  // a refresh under way finishes first
        defer { withExtendedLifetime(lock) {} }
        try registry.update { doc in
            guard let record = doc.slots[slot] else { throw RegistryError.unknownSlot(slot) }
            do { try openStore(record.backend, false).delete(slot) } catch StoreError.notFound {}
            RecoveryFile(paths: paths, slot: slot).remove()
            doc.slots[slot] = nil
            if doc.active == slot { doc.active = nil }
        }
    }

    /// Makes `slot` the active slot (the one used when no flag, variable or pin file names one).
    /// Only the registry changes; integrations that follow the active slot (Codex) are
    /// LanyardIntegrations' `switchActive`.
    package func setActive(_ slot: Slot) throws -> ActiveSlotChange {
        let (previous, record) = try registry.setActive(slot)
        return ActiveSlotChange(previous: previous, active: slot, record: record)
    }

    /// Pins `slot` to `directory` and the tree below it (writes `directory/.lanyard`).
    /// - Returns: the pin file's path.
    package func pin(_ slot: Slot, in directory: String) throws -> String {
        _ = try record(of: slot)
        return try PinFile.write(slot, in: directory)
    }

    /// Removes `directory/.lanyard`, and reports a pin above it that still applies.
    package func unpin(in directory: String) throws -> UnpinOutcome {
        let removed = try PinFile.remove(in: directory)
        let inherited = PinFile.nearest(from: directory)
        return UnpinOutcome(removed: removed, stillPinnedByPath: inherited?.path, stillPinnedToName: inherited?.name)
    }

    /// The slot commands act on in `directory`, by the documented precedence (`flag` >
    /// `LANYARD_ACCOUNT` in `environment` > the nearest `.lanyard` > the active slot); nil when
    /// no rule names one.
    package func resolveSlot(
        flag: String?,
        environment: [String: String],
        directory: String
    ) throws -> AccountResolution? {
        try AccountResolution.resolve(
            flag: flag,
            environment: environment["LANYARD_ACCOUNT"],
            pinFile: { PinFile.nearest(from: directory) },
            active: { try registry.view().active() }
        )
    }

    /// Moves `slots` (every slot when empty) to the `target` backend: copy, read back and compare,
    /// record the new backend, then delete the source copy. `progress` sees each slot as it lands.
    package func migrate(
        to target: BackendKind,
        slots: [Slot],
        dryRun: Bool,
        progress: (MigrationStep) -> Void = { _ in }
    ) throws -> [MigrationStep] {
        let open = openStore
        let paths = paths
        return try Migration(
            registry: registry,
            open: { kind in try open(kind, true) },
            settle: { slot, source in _ = try RecoveryFile(paths: paths, slot: slot).settle(into: source, slot: slot) }
        )
        .run(to: target, slots: slots, dryRun: dryRun, progress: progress)
    }

    /// The signed-in slots, in name order (what `refresh --all` refreshes).
    package func signedInSlots() throws -> [Slot] {
        try registry.load().sortedSlots.filter {
            if case .signedIn = $0.record.state { return true }
            return false
        }.map(\.slot)
    }
}
