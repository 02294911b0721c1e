import LanyardCore

/// What happened (or, in a dry run, would happen) to one slot in a ``Migration``.
public struct MigrationStep: Sendable, Equatable {
    public let slot: Slot
    public let from: BackendKind
    public let to: BackendKind
    public let outcome: Outcome

    /// What became of the slot; the raw values are what `--json` prints.
    public enum Outcome: String, Sendable, Equatable {
        /// Copied, verified, recorded, and deleted from the source.
        case moved
        /// Already in the target backend.
        case alreadyThere = "already-there"
        /// Recorded in the target backend; there was no stored credential to copy.
        case registryOnly = "registry-only"
        /// A dry run: it would move.
        case wouldMove = "would-move"
    }
}

/// Moves slots between backends: copy, read back and compare, record the new backend, then delete
/// from the source. A `kill -9` at any point leaves every slot readable from at least one backend
/// (the registry switches only after the copy is verified, and the source copy goes last).
package struct Migration: Sendable {
    package let registry: Registry
    package let open: @Sendable (BackendKind) throws -> any CredentialStore
    /// Run under the slot's lock with its source store before it moves: puts refreshed tokens a
    /// killed refresh left into the source first (a recovery file is encrypted for the store it
    /// was written for, so they must land there, and they, not the spent ones, are what moves).
    package let settle: @Sendable (Slot, any CredentialStore) throws -> Void

    package init(
        registry: Registry,
        open: @escaping @Sendable (BackendKind) throws -> any CredentialStore,
        settle: @escaping @Sendable (Slot, any CredentialStore) throws -> Void = { _, _ in }
    ) {
        self.registry = registry
        self.open = open
        self.settle = settle
    }

    package typealias Step = MigrationStep

    /// Migrates `slots` (every slot when empty) to `target`.
    package func run(
        to target: BackendKind,
        slots requested: [Slot],
        dryRun: Bool,
        progress: (Step) -> Void = { _ in }
    ) throws -> [Step] {
        let document = try registry.load()
        for slot in requested where document.slots[slot] == nil { throw RegistryError.unknownSlot(slot) }
        let slots = requested.isEmpty ? document.sortedSlots.map(\.slot) : requested
        var steps: [Step] = []
        for slot in slots {
            guard document.slots[slot] != nil else { continue }
            // The slot's refresh lock, then its record as it is now: a refresh under way finishes
            // first (its new tokens are what moves), and none writes the old backend meanwhile.
            let lock = dryRun ? nil : try FileLock.slot(slot, paths: registry.paths)
            defer { withExtendedLifetime(lock) {} }
            guard let record = dryRun ? document.slots[slot] : try registry.load().slots[slot] else { continue }
            if record.backend == target {
                steps.append(Step(slot: slot, from: record.backend, to: target, outcome: .alreadyThere))
                continue
            }
            if dryRun {
                steps.append(Step(slot: slot, from: record.backend, to: target, outcome: .wouldMove))
                continue
            }
            let source = try open(record.backend)
            try settle(slot, source)
            let destination = try open(target)
            var credential: Credential?
            do { credential = try source.get(slot) } catch StoreError.notFound { credential = nil }
            if let credential {
                try destination.put(credential, for: slot)
                guard try destination.get(slot) == credential else {
                    throw StoreError.corrupt(
                        source: "\(target.displayName) copy of \(slot.name)",
                        detail: "read-back did not match; the slot stays in \(record.backend.displayName)"
                    )
                }
            }
            try registry.update { doc in doc.slots[slot]?.backend = target }
            if credential != nil {
                do { try source.delete(slot) } catch StoreError.notFound {}
            }
            steps.append(
                Step(slot: slot, from: record.backend, to: target, outcome: credential == nil ? .registryOnly : .moved)
            )
            progress(steps[steps.count - 1])
        }
        return steps
    }
}
