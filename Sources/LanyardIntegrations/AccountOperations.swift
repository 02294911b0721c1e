import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

// Account operations that involve an integration (Codex's auth.json, the usage endpoint, export
// bundles). The CLI and LanyardKit call these; they decide the order of store and registry writes.

/// What ``AccountManager/switchActive(to:environment:)`` did.
public struct SwitchOutcome: Sendable, Equatable {
    public let change: ActiveSlotChange
    /// What happened to Codex's auth.json, when `[integrations] codex = true`.
    public let codex: CodexFollow?
    /// Without the Codex integration: the account Codex's auth.json still holds when it is not
    /// the new active slot's (its email, else its account id), so the user can be told that
    /// Codex did not follow the switch.
    public var codexStillUses: String? = nil
    /// The `switch` event logged (nil when the slot was already active).
    public var event: JSONValue? = nil
}

/// A switch that Codex could not follow (`[integrations] codex = true`), and so did not happen:
/// the slot that was active before is active again. The code is the cause's (a locked keyring in
/// Codex's keyring mode: `codex_keyring_unavailable`, exit 5).
package struct CodexDidNotFollow: LanyardError {
    /// The slot asked for.
    package let slot: Slot
    /// The slot active again (nil: none was).
    package let stillActive: Slot?
    /// Why Codex's sign-in could not be written.
    package let cause: any Error

    package var code: ErrorCode { (cause as? any LanyardError)?.code ?? .integrationUnsupported }
    package var underlying: (any Error)? { cause }
    package var errorDescription: String? {
        let stays = stillActive.map { "\($0.name) is still the active slot" } ?? "no slot is active, as before"
        return
            "did not switch to \(slot.name), because Codex could not follow (\(stays)): \(cause.userFacingDescription)"
    }
}

/// Why the active slot changed: logged with the `switch` event (`reason`), so `lanyard events`
/// tells a user's switch from auto-switching's.
public enum SwitchReason: Sendable, Equatable {
    /// `lanyard switch SLOT` (or a program's `switchActive(to:)`): `reason: "user"`.
    case user
    /// `lanyard switch --best`: the slot whose busiest window was least used (`reason: "best"`).
    case best(usedPercent: Double?)
    /// Auto-switching: the active slot ran out (`reason: "usage"`, with the window and trigger).
    case usage(UsageShortfall, toUsedPercent: Double)

    var fields: [String: JSONValue] {
        switch self {
        case .user: return ["reason": .string("user")]
        case .best(let used):
            return ["reason": .string("best"), "to_used_percent": used.map(JSONValue.number) ?? .null]
        case .usage(let shortfall, let toUsed):
            var fields = shortfall.fields
            fields["to_used_percent"] = .number(toUsed)
            return fields
        }
    }
}

/// Codex's sign-in following a switch.
public struct CodexFollow: Sendable, Equatable {
    /// Where the sign-in was written: auth.json's path, or (Codex's keyring mode) its keyring item.
    public let authPath: String
    /// Whether tokens Codex had rotated were first copied back into the previously active slot.
    public let copiedBack: Bool
    /// Codex processes running now: they keep their old account until restarted.
    public let runningCodexPIDs: [Int32]
}

/// One slot weighed by ``AccountManager/bestSlot()``.
public struct SlotCandidate: Sendable, Equatable {
    /// Why a slot was or was not a candidate.
    public enum Verdict: Sendable, Equatable {
        /// Usable; its busiest window is this full.
        case headroom(usedPercent: Double)
        /// At its usage limit (until `resetsAt`, when the server said).
        case atLimit(resetsAt: Date?)
        /// The usage endpoint failed with this error code.
        case failed(code: ErrorCode)
        /// Not signed in.
        case notSignedIn(AuthState)
    }

    public let slot: Slot
    public let verdict: Verdict
    /// The busiest window (of any length), when the usage endpoint answered.
    public var window: UsageWindow? = nil

    /// The busiest window's percentage, for usable slots.
    public var usedPercent: Double? {
        if case .headroom(let used) = verdict { return used }
        return nil
    }
}

/// The result of ``AccountManager/bestSlot()``: every slot of the active provider, weighed.
public struct BestSlotChoice: Sendable, Equatable {
    /// The provider whose slots were weighed.
    public let provider: String
    public let candidates: [SlotCandidate]
    /// The slot with the most headroom (ties go to the active slot), if any slot has headroom.
    public let best: SlotCandidate?

    /// The chosen slot.
    /// - Throws: `IntegrationError.unsupported` when no slot has headroom.
    public func chosen() throws -> SlotCandidate {
        guard let best else {
            throw IntegrationError.unsupported("no slot of provider \(provider) has headroom (see the reasons above)")
        }
        return best
    }
}

/// A slot written by ``AccountManager/importSlots(_:)``.
package struct ImportedSlot: Sendable, Equatable {
    package let slot: Slot
    package let backend: BackendKind
    /// Whether an existing slot was overwritten.
    package let replaced: Bool
}

/// A slot written by ``AccountManager/adoptCodexSignIn(from:into:)``.
package struct AdoptedSignIn: Sendable, Equatable {
    package let slot: Slot
    package let backend: BackendKind
    package let account: AccountInfo
    /// Codex's sign-in said `auth_mode: "oauth"` (written by older Lanyard versions), which
    /// current Codex refuses: `codex export` of the slot rewrites it as `chatgpt`.
    package var legacyOAuthMode = false
}

extension AccountManager {
    /// Makes `slot` the active slot. With `[integrations] codex = true`, Codex's auth.json (in the
    /// Codex home `environment` names) follows: tokens Codex rotated are first copied back into
    /// the previously active slot, then the new slot is written there. A switch Codex cannot
    /// follow (its keyring locked or unreachable in keyring mode, the slot's tokens not to be had)
    /// is undone: the slot that was active is active again, so Lanyard and Codex never disagree
    /// about the account without saying so, and ``CodexDidNotFollow`` says why.
    ///
    /// A change of slot logs a `switch` event (`from`, `to`, `provider`, and why: `reason`, see
    /// ``SwitchReason``); the event's slot is the new active slot.
    package func switchActive(
        to slot: Slot,
        environment: [String: String],
        reason: SwitchReason = .user
    ) async throws -> SwitchOutcome {
        // The registry under its flock: on the blocking executor.
        let change = try await BlockingExecutor.shared.run { try self.setActive(slot) }
        var outcome: SwitchOutcome
        if config.codexIntegration {
            let sync = CodexSync(manager: self)
            let home = CodexHome(explicit: nil, environment: environment)
            var copiedBack = false
            let exported: CodexExport
            do {
                if let previous = change.previous { copiedBack = try await sync.copyBack(from: home, into: previous) }
                exported = try await sync.export(slot: slot, to: home)
            } catch {
                guard change.previous != slot else { throw error }
                // Put the slot that was active back, unless another switch came in meanwhile.
                let registry = self.registry
                let previous = change.previous
                try await BlockingExecutor.shared.run {
                    try registry.update { document in if document.active == slot { document.active = previous } }
                }
                throw CodexDidNotFollow(slot: slot, stillActive: previous, cause: error)
            }
            outcome = SwitchOutcome(
                change: change,
                codex: CodexFollow(
                    authPath: exported.place,
                    copiedBack: copiedBack,
                    runningCodexPIDs: CodexHome.runningProcesses()
                )
            )
        } else {
            // Reading Codex's sign-in may ask the keyring (D-Bus): on the blocking executor.
            let record = change.record
            let stillUses = await BlockingExecutor.shared.run {
                Self.codexAccount(notOf: record, environment: environment)
            }
            outcome = SwitchOutcome(change: change, codex: nil, codexStillUses: stillUses)
        }
        guard change.previous != slot else { return outcome }
        var fields = reason.fields
        fields["from"] = .optional(change.previous?.name)
        fields["to"] = .string(slot.name)
        fields["provider"] = .string(change.record.provider)
        if let codex = outcome.codex { fields["codex_auth_json"] = .string(codex.authPath) }
        let event = EventLog.record("switch", slot: slot, fields: fields, now: clock.now())
        let log = eventLog
        await BlockingExecutor.shared.run { log.append(event) }
        outcome.event = event
        return outcome
    }

    /// Where `switch` goes when given no slot: the only slot when there is one; with exactly two,
    /// one of them active, the other one (as `gh auth switch` does); nil otherwise (the caller
    /// lists the slots and asks).
    package func impliedSwitchTarget() throws -> Slot? {
        let document = try registry.load()
        if document.slots.count == 1 { return document.slots.keys.first }
        guard document.slots.count == 2, let active = document.active, document.slots[active] != nil else { return nil }
        return document.slots.keys.first { $0 != active }
    }

    /// The account in Codex's auth.json when it is another than `record`'s (an openai slot's):
    /// its email, else its account id; nil when they match, or there is no readable auth.json.
    static func codexAccount(notOf record: SlotRecord, environment: [String: String]) -> String? {
        guard record.provider == "openai",
            let file = try? CodexHome(explicit: nil, environment: environment).read()
        else { return nil }
        let codex = file.credential(provider: "openai", expiresAt: nil).account
        let sameAccount =
            (codex.accountID != nil && codex.accountID == record.account.accountID)
            && (codex.email == nil || record.account.email == nil
                || codex.email?.lowercased() == record.account.email?.lowercased())
        return sameAccount ? nil : (codex.email ?? codex.accountID)
    }

    /// Weighs every slot of the active slot's provider (`openai` when none is active) by the usage
    /// endpoint and picks the one whose busiest window (of whatever length) is least used; a slot
    /// with a window at 100 % is at its limit and never chosen.
    package func bestSlot() async throws -> BestSlotChoice {
        let registry = self.registry
        let document = try await BlockingExecutor.shared.run { try registry.load() }
        let provider = document.active.flatMap { document.slots[$0]?.provider } ?? "openai"
        var candidates: [SlotCandidate] = []
        var best: SlotCandidate?
        for (slot, record) in document.sortedSlots where record.provider == provider {
            let weighed = await weigh(slot, record)
            let candidate = SlotCandidate(slot: slot, verdict: weighed.verdict, window: weighed.report?.busiest)
            if let used = candidate.usedPercent,
                best.flatMap(\.usedPercent).map({ used < $0 || (used == $0 && slot == document.active) }) ?? true
            {
                best = candidate
            }
            candidates.append(candidate)
        }
        return BestSlotChoice(provider: provider, candidates: candidates, best: best)
    }

    /// Adopts the sign-in in `home`'s auth.json into `requested` (by default a slot named after
    /// its email), without revoking anything. A slot holding another account is refused.
    package func adoptCodexSignIn(from home: CodexHome, into requested: Slot?) throws -> AdoptedSignIn {
        guard let signIn = try home.readSignIn() else {
            throw IntegrationError.noCodexSignIn(authPath: home.signInPlace())
        }
        guard let live = signIn.chatGPT else {
            // Its account is the server's to say (Codex asks it too): `login` does that.
            throw IntegrationError.unsupported(
                "Codex is signed in with a personal access token, whose account only the server "
                    + "can tell: pipe the token into `lanyard login SLOT --with-access-token` (for example "
                    + "`printenv CODEX_ACCESS_TOKEN | lanyard login SLOT --with-access-token`)"
            )
        }
        let credential = live.credential(provider: "openai", expiresAt: nil)
        let document = try registry.load()
        let slot = try requested ?? AccountManager.defaultSlot(for: credential.account, in: document)
        if let existing = document.slots[slot], existing.account.accountID != nil,
            existing.account.accountID != credential.account.accountID
        {
            throw RegistryError.slotExists(slot, holdsAnotherAccount: true)
        }
        let backend = document.slots[slot]?.backend ?? backendForNewSlot()
        let store = try openStore(backend, false)
        let now = clock.now()
        try registry.update { doc in
            try store.put(credential, for: slot)
            var record = doc.slots[slot] ?? SlotRecord(provider: "openai", backend: backend, createdAt: now)
            record.account = credential.account
            record.state = .signedIn(expiresAt: credential.tokens.expiresAt)
            record.rotates = true
            record.lastRefresh = credential.lastRefresh
            record.lastRefreshBoot = credential.lastRefreshBoot
            record.lastErrorCode = nil
            doc.slots[slot] = record
            if doc.active == nil { doc.active = slot }
        }
        var adopted = AdoptedSignIn(slot: slot, backend: backend, account: credential.account)
        adopted.legacyOAuthMode = live.legacyOAuthMode
        return adopted
    }

    /// The stored credentials of `named` slots (every slot with a stored credential when empty),
    /// with their registry metadata, for an export bundle; `skipped` lists the slots that hold no
    /// credential (only when exporting every slot: a named slot without one is an error).
    package func exportEntries(named: [Slot]) throws -> (entries: [Slot: ExportBundle.Entry], skipped: [Slot]) {
        let document = try registry.load()
        for slot in named where document.slots[slot] == nil { throw RegistryError.unknownSlot(slot) }
        var entries: [Slot: ExportBundle.Entry] = [:]
        var skipped: [Slot] = []
        for (slot, record) in document.sortedSlots where named.isEmpty || named.contains(slot) {
            do {
                entries[slot] = ExportBundle.Entry(
                    credential: try openStore(record.backend, true).get(slot),
                    record: record
                )
            } catch StoreError.notFound where named.isEmpty {
                skipped.append(slot)
            }
        }
        guard !entries.isEmpty else {
            throw BundleError(code: .nothingToExport, message: "no slot has a stored credential to export")
        }
        return (entries, skipped)
    }

    /// Writes bundle entries into slots (the keys: already renamed as wanted). Existing slots keep
    /// their backend; new ones go to the backend new sign-ins use. The entries are checked
    /// (``ExportBundle/check(_:knownProviders:source:)``) and every target store is opened and
    /// checked first, so a bad entry or an unusable backend stops the import before any write.
    ///
    /// Linear in the number of slots: each store is written once for all of them and the registry
    /// once. Into the file store the import lands with the registry change in one
    /// ``Registry/transaction(_:)``: all of it or nothing, even when the process is killed. The
    /// keyring writes item by item (it has no transactions): a failure puts back what the import
    /// replaced and removes what it added before the registry is touched, so the registry never
    /// lists a partial import; a process killed during the keyring writes leaves the items written
    /// so far, which the registry does not list (or, for slots it lists, a newer credential than
    /// its record describes) until `lanyard doctor --repair` adds them as slots.
    package func importSlots(
        _ incoming: [Slot: ExportBundle.Entry],
        source: String = "the bundle"
    ) throws -> [ImportedSlot] {
        try ExportBundle.check(incoming, knownProviders: Set(config.providers.keys), source: source)
        let document = try registry.load()
        let newBackend = incoming.keys.contains { document.slots[$0] == nil } ? backendForNewSlot() : nil
        var stores: [BackendKind: any CredentialStore] = [:]
        for kind in Set(incoming.keys.compactMap { document.slots[$0]?.backend ?? newBackend }) {
            let store = try openStore(kind, true)
            let health = store.health()
            if !health.reachable || health.locked {
                throw StoreError.unavailable(
                    backend: kind.displayName,
                    hint: health.problem ?? (health.locked ? "it is locked" : "it is not reachable")
                )
            }
            stores[kind] = store
        }
        return try registry.transaction { doc, transaction in
            var done: [ImportedSlot] = []
            var batches: [BackendKind: [Slot: Credential]] = [:]
            for (slot, entry) in incoming.sorted(by: { $0.key < $1.key }) {
                let kind =
                    doc.slots[slot]?.backend ?? document.slots[slot]?.backend ?? newBackend ?? backendForNewSlot()
                batches[kind, default: [:]][slot] = entry.credential
                var record = entry.record
                record.backend = kind
                done.append(ImportedSlot(slot: slot, backend: kind, replaced: doc.slots[slot] != nil))
                doc.slots[slot] = record
            }
            // Stores that stage first: what they staged lands only with the registry, so a failing
            // item-by-item store after them (there is one: the keyring) leaves nothing of theirs behind.
            var itemByItem: [(any CredentialStore, [Slot: Credential])] = []
            for (kind, batch) in batches.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                let store = try stores[kind] ?? openStore(kind, true)
                if try !store.stage(batch, in: transaction) { itemByItem.append((store, batch)) }
            }
            for (store, batch) in itemByItem { try store.putAll(batch) }
            return done
        }
    }
}
