import LanyardCore
import LanyardStore
import LanyardSupport

/// What ``AccountManager/diagnose()`` found: each backend's health, each slot checked against
/// the backend that should hold it, stored items the registry does not list, and refreshed tokens
/// waiting in recovery files. ``AccountManager/repair(_:)`` fixes what can be fixed and returns
/// the report with its ``repairs`` filled in. Renderers (text, JSON) live with the caller.
public struct DoctorReport: Sendable, Equatable {
    /// One backend's health; `health.problem` also carries a failure to open it.
    public struct Backend: Sendable, Equatable {
        public let kind: BackendKind
        public let health: StoreHealth
    }

    /// How a registered slot compares with its backend.
    public enum SlotStatus: String, Sendable, Equatable {
        case ok = "ok"
        case signedOut = "signed out"
        case missingItem = "missing item"
        case unchecked = "unchecked (backend unavailable)"
    }

    /// A private folder of a killed `lanyard exec` whose tokens could not be copied back: it
    /// stays, with them, until a later `doctor` or `exec` succeeds.
    public struct UnrecoveredExecFolder: Sendable, Equatable, CustomStringConvertible {
        /// The folder.
        public let path: String
        /// Why the copy-back failed.
        public let problem: String

        /// A folder and why its tokens could not be copied back.
        public init(path: String, problem: String) {
            self.path = path
            self.problem = problem
        }

        /// The problem, as `doctor` reports it.
        public var description: String {
            "a killed `lanyard exec` left tokens in \(TerminalText.escaped(path)) that could not be copied back "
                + "(\(TerminalText.escaped(problem))); the folder stays until this succeeds"
        }
    }

    /// One registered slot's check.
    public struct SlotCheck: Sendable, Equatable {
        public let slot: Slot
        public let backend: BackendKind
        public let status: SlotStatus
    }

    /// A stored credential that the registry does not list (under that backend).
    public struct UnregisteredItem: Sendable, Equatable {
        public let slot: Slot
        public let backend: BackendKind
    }

    /// What a repair did.
    public enum Repair: Sendable, Equatable, CustomStringConvertible {
        /// Refreshed tokens went back from the slot's recovery file into its store.
        case restoredRecoveryFile(Slot)
        /// An unregistered item became a slot (`mustSignIn`: it had no refresh token).
        case addedSlot(Slot, from: BackendKind, mustSignIn: Bool)
        /// A slot without a stored credential was marked signed out.
        case markedSignedOut(Slot)
        /// An unregistered item held the same session (refresh token) as a listed slot — the copy
        /// an interrupted rename or migration leaves — and was removed: two slots must never
        /// share a rotating refresh token.
        case removedStrayCopy(Slot, from: BackendKind, of: Slot)
        /// A temporary file an interrupted write left in the data folder was removed.
        case removedLeftoverTemporary(String)
        /// The active slot, lost with the registry, was taken from what was left of it.
        case restoredActive(Slot)
        /// A private folder of a killed `lanyard exec` (nobody holds its lock any more) was
        /// removed, after the tokens its command rotated there went back into a slot (nil: it
        /// held nothing newer than the slot's).
        case recoveredExecFolder(String, copiedBackInto: Slot?)

        public var description: String {
            switch self {
            case .restoredRecoveryFile(let slot):
                return "restored refreshed tokens of \(slot.name) from its recovery file"
            case .addedSlot(let slot, let kind, let mustSignIn):
                return "added \(slot.name) from \(kind.displayName)" + (mustSignIn ? " (it must sign in again)" : "")
            case .markedSignedOut(let slot): return "marked \(slot.name) signed out (no stored credential)"
            case .restoredActive(let slot): return "made \(slot.name) active again, as the lost registry had it"
            case .removedStrayCopy(let slot, let kind, let listed):
                return "removed \(slot.name) from \(kind.displayName): a stray copy of \(listed.name)'s session"
            case .removedLeftoverTemporary(let path):
                return "removed \(TerminalText.escaped(PathText.lastComponent(of: path))), left by an interrupted write"
            case .recoveredExecFolder(let path, let slot?):
                return "copied the tokens a killed `lanyard exec` left in "
                    + "\(TerminalText.escaped(PathText.lastComponent(of: path))) back into \(slot.name), "
                    + "and removed the folder"
            case .recoveredExecFolder(let path, nil):
                return "removed \(TerminalText.escaped(PathText.lastComponent(of: path))), "
                    + "left by a killed `lanyard exec` (nothing newer to copy back)"
            }
        }
    }

    /// The registry file.
    public let registryPath: String
    /// How many slots the registry lists (after a repair, the repaired registry's count).
    public internal(set) var slotCount: Int
    public let backends: [Backend]
    /// The registered slots, in name order, as diagnosed (a repair does not re-check them).
    public let slots: [SlotCheck]
    public let unregisteredItems: [UnregisteredItem]
    /// Slots whose refreshed tokens wait in a recovery file (empty once repaired).
    public internal(set) var pendingRecoveries: [Slot]
    /// Registered slots whose backend holds no credential (empty once repaired).
    public internal(set) var missingItems: [Slot]
    /// Temporary files that killed writes left in the data folder (empty once repaired).
    public internal(set) var leftoverTemporaries: [String] = []
    /// Folders of killed `lanyard exec` runs whose tokens could not be copied back (recovering
    /// them is not a repair: it happens whenever they are found, see LanyardIntegrations'
    /// `recoverAbandonedExecFolders`).
    public package(set) var unrecoveredExecFolders: [UnrecoveredExecFolder] = []
    /// A `.lanyard` pin that names no slot: commands run below it fail.
    public struct StrayPin: Sendable, Equatable {
        public let path: String
        /// The name it holds, as written.
        public let name: String
    }

    /// Pins found near the working directory and under the home folder that name no slot
    /// (empty when the diagnosis was not asked to look).
    public package(set) var strayPins: [StrayPin] = []
    /// What keeps the backends from taking credentials although no slot uses them yet: no store
    /// can keep a new sign-in (none answers, the file store is not set up), or the keyring has no
    /// collection where Lanyard would write (`[store] collection`, the default alias by default).
    public internal(set) var storeSetupProblems: [String] = []
    /// Why the event log cannot be written, when it cannot (events are then lost).
    public internal(set) var eventLogProblem: String?
    /// Whether the registry ↔ backend mismatches were repaired.
    public internal(set) var mismatchesRepaired = false
    /// What ``AccountManager/repair(_:)`` did (empty before a repair), and the folders of killed
    /// `lanyard exec` runs that were recovered.
    public package(set) var repairs: [Repair] = []

    /// Backends that some slot uses but that are not reachable or are locked.
    public var backendProblems: [String] {
        backends.compactMap { backend in
            let health = backend.health
            guard !health.reachable || health.locked || health.problem != nil, usedBackends.contains(backend.kind)
            else { return nil }
            if health.reachable, let problem = health.problem { return "\(backend.kind.displayName): \(problem)" }
            return "\(backend.kind.displayName) is \(health.reachable ? "locked" : "not reachable")"
        }
    }

    /// Registry ↔ backend mismatches that a repair rebuilds (empty once repaired).
    public var mismatches: [String] {
        if mismatchesRepaired { return [] }
        return missingItems.map { "\($0.name) has no stored credential" }
            + unregisteredItems.map {
                "\($0.backend.displayName) holds \($0.slot.name), which the registry does not list"
            }
    }

    /// Every problem left, in the order doctor reports them.
    public var problems: [String] {
        var problems = backendProblems + storeSetupProblems
        if !pendingRecoveries.isEmpty {
            problems.append(
                "refreshed tokens wait in recovery files for: \(pendingRecoveries.map(\.name).joined(separator: ", "))"
            )
        }
        if let eventLogProblem { problems.append("events are not being logged: \(eventLogProblem)") }
        if !leftoverTemporaries.isEmpty {
            let names = leftoverTemporaries.map { TerminalText.escaped(PathText.lastComponent(of: $0)) }
            problems.append("interrupted writes left temporary files: \(names.joined(separator: ", "))")
        }
        for folder in unrecoveredExecFolders { problems.append(folder.description) }
        for pin in strayPins {
            let named = pin.name.isEmpty ? "no slot at all" : "\(TerminalText.escaped(pin.name)), which is no slot"
            problems.append(
                "\(TerminalText.escaped(pin.path)) names \(named): "
                    + "run `lanyard pin SLOT` or `lanyard unpin` in that folder"
            )
        }
        return problems + mismatches
    }

    /// Whether ``AccountManager/repair(_:)`` has something to do.
    public var needsRepair: Bool { !pendingRecoveries.isEmpty || !mismatches.isEmpty || !leftoverTemporaries.isEmpty }

    private var usedBackends: Set<BackendKind> { Set(slots.map(\.backend)) }
}

extension AccountManager {
    /// Checks every backend and the registry against what the backends hold. Reads only; a
    /// backend that cannot be opened or listed is reported, not thrown.
    /// With `pins`, the report lists the pins found there that name no slot.
    package func diagnose(pins: PinSearch? = nil) throws -> DoctorReport {
        let document = try registry.load()
        let (backends, itemsByBackend) = checkBackends()
        var missing: [Slot] = []
        let checks = document.sortedSlots.map { slot, record -> DoctorReport.SlotCheck in
            let status: DoctorReport.SlotStatus
            if let items = itemsByBackend[record.backend] {
                if items.contains(slot) {
                    status = .ok
                } else if case .signedOut = record.state {
                    status = .signedOut
                } else {
                    status = .missingItem
                    missing.append(slot)
                }
            } else {
                status = .unchecked
            }
            return DoctorReport.SlotCheck(slot: slot, backend: record.backend, status: status)
        }
        var unregistered: [DoctorReport.UnregisteredItem] = []
        for kind in BackendKind.allCases {
            // The fleet identity is kept in a store under a reserved entry the registry never lists.
            for slot in (itemsByBackend[kind] ?? []).sorted()
            where document.slots[slot]?.backend != kind && !slot.isReserved {
                unregistered.append(DoctorReport.UnregisteredItem(slot: slot, backend: kind))
            }
        }
        var report = DoctorReport(
            registryPath: registry.path,
            slotCount: document.slots.count,
            backends: backends,
            slots: checks,
            unregisteredItems: unregistered,
            pendingRecoveries: RecoveryFiles.pending(paths: paths, slots: Array(document.slots.keys)),
            missingItems: missing
        )
        report.leftoverTemporaries = LeftoverTemporaries.find(paths)
        report.eventLogProblem = eventLog.problem()
        if let pins {
            report.strayPins = pins.pins().filter { (try? Slot($0.name)).flatMap { document.slots[$0] } == nil }
                .map { DoctorReport.StrayPin(path: $0.path, name: $0.name) }
        }
        report.storeSetupProblems = storeSetupProblems(backends, usedBackends: Set(checks.map(\.backend)))
        return report
    }

    /// Whether a new sign-in could be stored (a locked store is fine: it is unlocked when
    /// needed), and whether the keyring has the collection Lanyard writes to; backends some slot
    /// uses are reported with the slots.
    private func storeSetupProblems(_ backends: [DoctorReport.Backend], usedBackends: Set<BackendKind>) -> [String] {
        func health(_ kind: BackendKind) -> StoreHealth? { backends.first { $0.kind == kind }?.health }
        var problems: [String] = []
        var (kind, passedOver) = Self.newSlotChoice(config.backend, keyring: health(.secretService))
        // The keyring's long explanation is in its backend entry already: said once, not again here.
        if passedOver?.problem != nil { passedOver?.problem = Self.seeTheKeyringEntry }
        if let target = health(kind), !usedBackends.contains(kind),
            let problem = Self.storeProblem(kind, target, passedOver: passedOver), case .unavailable = problem
        {
            problems.append("new sign-ins cannot be stored: \(problem.userFacingDescription)")
        }
        // A keyring that answers without the collection Lanyard would write to: `auto` passes it
        // over for the file store, which is rarely what its owner expects.
        if config.backend != .file, kind != .secretService, !usedBackends.contains(.secretService), problems.isEmpty,
            let keyring = health(.secretService), keyring.reachable, keyring.problem != nil
        {
            problems.append(
                "Secret Service answers but cannot keep credentials: \(Self.seeTheKeyringEntry) "
                    + "(new sign-ins go to the encrypted file meanwhile)"
            )
        }
        return problems
    }

    /// Where a problem that comes from the keyring sends its reader: the keyring's backend entry,
    /// which holds the one copy of its (long) explanation.
    static let seeTheKeyringEntry = "see the Secret Service backend entry for why and what to do"

    /// Each backend's health, and the slots it holds when it can be listed.
    private func checkBackends() -> ([DoctorReport.Backend], [BackendKind: Set<Slot>]) {
        var backends: [DoctorReport.Backend] = []
        var items: [BackendKind: Set<Slot>] = [:]
        for kind in BackendKind.allCases {
            var health = StoreHealth(backend: kind, reachable: false, locked: false, persistent: false)
            do {
                let store = try openStore(kind, false)
                health = store.health()
                // A keyring without its collection answers but has nothing to list.
                if health.reachable && !health.locked && health.problem == nil { items[kind] = Set(try store.list()) }
            } catch {
                health.problem = error.userFacingDescription
            }
            backends.append(DoctorReport.Backend(kind: kind, health: health))
        }
        // The keyring's failure advises `lanyard store init`: not once the file store exists.
        if backends.contains(where: { $0.kind == .file && $0.health.reachable }),
            let index = backends.firstIndex(where: { $0.kind == .secretService }),
            let problem = backends[index].health.problem
        {
            var health = backends[index].health
            health.problem = SecretServiceStore.adviceForExistingFileStore(problem)
            backends[index] = DoctorReport.Backend(kind: .secretService, health: health)
        }
        return (backends, items)
    }

    /// Fixes what `report` found: restores recovery files first (their tokens are the newest),
    /// then rebuilds the registry from the backends: unregistered items become slots (signed in,
    /// or marked for sign-in when they hold no refresh token), slots without a credential are
    /// marked signed out. The only credential it deletes is an unregistered copy of a listed
    /// slot's session (same refresh token), which an interrupted rename or migration leaves.
    package func repair(_ report: DoctorReport) throws -> DoctorReport {
        var result = report
        if !report.pendingRecoveries.isEmpty {
            for slot in try restoreRecoveryFiles() {
                result.repairs.append(.restoredRecoveryFile(slot))
                result.missingItems.removeAll { $0 == slot }
            }
            result.pendingRecoveries = []
        }
        if !report.leftoverTemporaries.isEmpty {
            // Whatever is a leftover now (a write may have finished, or been killed, since).
            result.repairs += LeftoverTemporaries.remove(paths).map(DoctorReport.Repair.removedLeftoverTemporary)
            result.leftoverTemporaries = LeftoverTemporaries.find(paths)
        }
        guard !result.mismatches.isEmpty else { return result }
        let now = clock.now()
        // What the registry said before its last write: details of slots rebuilt from the backends
        // (when it was created, the account), and which was active, survive a lost registry.
        let previous = report.unregisteredItems.isEmpty ? nil : registry.previousGeneration()
        try registry.update { doc in
            // The refresh tokens of the listed slots, to tell a stray copy from a lost slot.
            var sessions: [String: Slot] = [:]
            if !report.unregisteredItems.isEmpty {
                for (slot, record) in doc.sortedSlots {
                    if let token = (try? openStore(record.backend, false).get(slot))?.tokens.refreshToken {
                        sessions[token] = slot
                    }
                }
            }
            for item in report.unregisteredItems {
                let store = try openStore(item.backend, false)
                let credential = try store.get(item.slot)
                if let token = credential.tokens.refreshToken, let listed = sessions[token] {
                    try store.delete(item.slot)
                    result.repairs.append(.removedStrayCopy(item.slot, from: item.backend, of: listed))
                    continue
                }
                // Listed in another backend with another session: which is current cannot be
                // told here, so both stay and doctor keeps reporting it.
                guard doc.slots[item.slot] == nil else { continue }
                // A credential whose refresh token was dropped (refused for good) must sign in again;
                // a personal access token never had one.
                let mustSignIn = credential.tokens.refreshToken == nil && !credential.isPersonalAccessToken
                let before = previous?.slots[item.slot]
                doc.slots[item.slot] = SlotRecord(
                    provider: credential.provider,
                    backend: item.backend,
                    account: (before?.account).map { credential.account.merging($0) } ?? credential.account,
                    state: mustSignIn ? .reauthenticationRequired : .signedIn(expiresAt: credential.tokens.expiresAt),
                    lastRefresh: credential.lastRefresh,
                    lastRefreshBoot: credential.lastRefreshBoot,
                    createdAt: before?.createdAt ?? now,
                    rotates: !credential.isPersonalAccessToken
                )
                result.repairs.append(.addedSlot(item.slot, from: item.backend, mustSignIn: mustSignIn))
            }
            if doc.active == nil, let active = registry.lastKnownActive(), doc.slots[active] != nil {
                doc.active = active
                result.repairs.append(.restoredActive(active))
            }
            for slot in result.missingItems where doc.slots[slot] != nil {
                doc.slots[slot]?.state = .signedOut
                result.repairs.append(.markedSignedOut(slot))
            }
        }
        result.mismatchesRepaired = true
        result.slotCount = try registry.load().slots.count
        return result
    }
}
