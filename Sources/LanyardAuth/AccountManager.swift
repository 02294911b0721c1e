import FoundationEssentials
import Glibc
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport

/// Opens a backend's store; `interactive` selects the longer timeout.
package typealias StoreOpener = @Sendable (_ kind: BackendKind, _ interactive: Bool) throws -> any CredentialStore

/// Runs a due refresh somewhere else (the CLI: a detached worker process that survives its caller),
/// blocking until it is done; called on the blocking executor, inside the refresh's one hop.
/// `lock` is the slot's refresh lock, held by the caller: the runner hands it to the worker.
package typealias RefreshRunner = @Sendable (_ slot: Slot, _ force: Bool, _ lock: FileLock) throws -> Void

/// A slot's stored credential as read before its refresh lock, and whether a refresh is due.
package struct StoredCredential: Sendable {
    package let slot: Slot
    package let record: SlotRecord
    package let store: any CredentialStore
    package let credential: Credential
    package let due: Bool
}

/// The operations on slots that involve providers and stores: sign-in, sign-out and (with the
/// token lifecycle) refresh. The CLI and LanyardKit both go through it, so they behave the same.
package struct AccountManager: Sendable {
    package let paths: Paths
    package let config: LanyardConfig
    package let openStore: StoreOpener
    package let transport: any HTTPTransport
    package let clock: any WallClock
    package let sleeper: any Sleeper
    /// Where due refreshes run; nil runs them in this process (in a task the caller cannot cancel).
    package var refreshRunner: RefreshRunner?
    /// A slot's refresh lock this process was handed already held (the refresh worker).
    package var inheritedLock: (slot: Slot, lock: FileLock)?
    /// How the fleet's etcd is reached; nil: the v3 JSON gateway client.
    package var etcdConnector: EtcdConnector?

    package init(
        paths: Paths,
        config: LanyardConfig,
        openStore: @escaping StoreOpener,
        transport: any HTTPTransport,
        clock: any WallClock = SystemClock(),
        sleeper: any Sleeper = TaskSleeper()
    ) {
        self.paths = paths
        self.config = config
        self.openStore = openStore
        self.transport = transport
        self.clock = clock
        self.sleeper = sleeper
    }

    package var registry: Registry { Registry(paths: paths) }

    /// The configured provider `id`, talking through the backoff policy.
    package func provider(_ id: String) throws -> any DeviceCodeProvider {
        guard let providerConfig = config.providers[id] else {
            let known = config.providers.keys.sorted().joined(separator: ", ")
            throw ConfigError.invalidValue(
                path: paths.configFile,
                group: "provider.\(id)",
                key: "",
                detail: "no provider named \(id) (configured: \(known))"
            )
        }
        guard !providerConfig.clientID.isEmpty else {
            throw ConfigError.invalidValue(
                path: paths.configFile,
                group: "provider.\(id)",
                key: "client-id",
                detail: "missing: signing in to \(id) needs an OAuth app's client id with device flow enabled "
                    + "(tokens the GitHub CLI holds can be adopted without one: `lanyard gh import`)"
            )
        }
        let retrying = BackoffTransport(base: transport, policy: config.backoff, clock: clock, sleeper: sleeper)
        return makeProvider(providerConfig, transport: retrying, clock: clock)
    }

    /// The backend a new slot uses: the configured one, or for `auto` the Secret Service when it
    /// answers and has its collection, else the encrypted file.
    package func backendForNewSlot() -> BackendKind { newSlotChoice().kind }

    /// Where a new slot goes and, when `auto` passed the Secret Service over for the file store,
    /// the keyring's health (to say why when the file store cannot take it either).
    private func newSlotChoice() -> (kind: BackendKind, passedOver: StoreHealth?) {
        switch config.backend {
        case .secretService: return (.secretService, nil)
        case .file: return (.file, nil)
        case .auto:
            let keyring: StoreHealth
            do { keyring = try openStore(.secretService, false).health() } catch {
                keyring = StoreHealth(
                    backend: .secretService,
                    reachable: false,
                    locked: false,
                    persistent: false,
                    problem: error.userFacingDescription
                )
            }
            return Self.newSlotChoice(.auto, keyring: keyring)
        }
    }

    /// `auto`'s choice from the keyring's health: the Secret Service when it answers with its
    /// collection there (locked or not: a locked collection is the user's to unlock, not a
    /// reason to put credentials elsewhere), else the file store.
    static func newSlotChoice(
        _ setting: LanyardConfig.BackendChoice,
        keyring: StoreHealth?
    ) -> (kind: BackendKind, passedOver: StoreHealth?) {
        switch setting {
        case .secretService: return (.secretService, nil)
        case .file: return (.file, nil)
        case .auto:
            if let keyring, keyring.reachable && keyring.problem == nil { return (.secretService, nil) }
            return (.file, keyring)
        }
    }

    /// Why a store of `kind` with `health` could not take a credential now, or nil when it could:
    /// it does not answer, its keyring collection is missing, or it is locked. `passedOver`: the
    /// keyring's health when `auto` chose the file store instead (then both are named).
    package static func storeProblem(
        _ kind: BackendKind,
        _ health: StoreHealth,
        passedOver keyring: StoreHealth? = nil
    ) -> StoreError? {
        if !health.reachable || health.problem != nil {
            if kind == .file, let keyring, !health.reachable {
                return .unavailable(
                    backend: kind.displayName,
                    hint: "there is no file store yet, and the Secret Service cannot keep credentials "
                        + "either. Create the file store with `lanyard store init` "
                        + "(new sign-ins then go there), or make the keyring usable: "
                        + (keyring.problem ?? "it did not answer")
                )
            }
            return .unavailable(backend: kind.displayName, hint: health.problem ?? "it did not answer")
        }
        if health.locked {
            return .locked(
                backend: kind.displayName,
                hint: kind == .file
                    ? "run `lanyard store unlock` first"
                    : "unlock the keyring collection first (log in to the desktop session, or unlock it in Seahorse)"
            )
        }
        return nil
    }

    /// The store a sign-in into `slot` writes (the slot's backend, else where new slots go),
    /// checked before anyone approves a code in a browser: it must answer, its keyring collection
    /// must exist and be unlocked (Lanyard never raises the keyring's unlock prompt), or the file
    /// store must be set up and unlocked. A locked file store is handed to `unlockFileStore` when
    /// given (the CLI asks for the passphrase on a terminal) and checked again.
    package func storeForSignIn(
        into slot: Slot?,
        unlockFileStore: (@Sendable () throws -> Void)? = nil
    ) throws -> (BackendKind, any CredentialStore) {
        let existing = try slot.flatMap { try registry.load().slots[$0]?.backend }
        let (kind, passedOver) = existing.map { ($0, nil) } ?? newSlotChoice()
        let store = try openStore(kind, true)
        var health = store.health()
        if kind == .file, health.reachable, health.locked, let unlockFileStore {
            try unlockFileStore()
            health = store.health()
        }
        if let problem = Self.storeProblem(kind, health, passedOver: passedOver) { throw problem }
        return (kind, store)
    }

    /// Signs an account in with the device-code flow and stores it in `slot` (by default the
    /// email's local part). The slot's old credential is replaced only once the new one is in hand;
    /// cancellation or failure leaves everything as it was. Approved as another account than the
    /// one `slot` holds (and not `replacingAnotherAccount`), the sign-in is not thrown away: it is
    /// stored in a new slot named after its email (``defaultSlot(for:in:)``), announced with
    /// ``SignInEvent/storedInNewSlot(requested:holds:slot:)`` and a `new_slot` event.
    /// `unlockFileStore` may open a locked file store before the code is requested (see
    /// ``storeForSignIn(into:unlockFileStore:)``).
    /// `method` chooses the device code or the browser (``BrowserSignInFlow``); both go through
    /// the same checks, slot rules, events and storing.
    package func signIn(
        slot requested: Slot?,
        providerID: String,
        replacingAnotherAccount: Bool = false,
        unlockFileStore: (@Sendable () throws -> Void)? = nil,
        method: SignInMethod = .deviceCode,
        flow configure: (inout SignInFlow) -> Void = { _ in },
        events: @Sendable (SignInEvent) -> Void
    ) async throws -> (Slot, Credential) {
        let provider = try provider(providerID)
        var flow = SignInFlow(provider: provider, clock: clock, sleeper: sleeper)
        configure(&flow)
        var browserFlow: BrowserSignInFlow?
        if case .browser(let options) = method {
            guard let browser = provider as? any BrowserSignInProvider, browser.offersBrowserSignIn else {
                throw ConfigError.invalidValue(
                    path: paths.configFile,
                    group: "provider.\(providerID)",
                    key: "authorization-endpoint",
                    detail: "missing: a browser sign-in with \(providerID) needs the provider's authorization "
                        + "endpoint (or sign in with a device code: `lanyard login --device`)"
                )
            }
            var browserSignIn = BrowserSignInFlow(provider: browser, options: options, clock: clock, sleeper: sleeper)
            browserSignIn.maximumDuration = config.loginTimeout ?? browserSignIn.maximumDuration
            browserFlow = browserSignIn
        }
        let (signInLock, plannedBackend, plannedStore) = try await prepareSignIn(
            requested,
            replacingAnotherAccount: replacingAnotherAccount,
            unlockFileStore: unlockFileStore
        )
        defer { withExtendedLifetime(signInLock) {} }
        let outcome = Locked<StoredSignIn?>(nil)
        let store: (TokenResponse, AccountInfo) async throws -> Void = { tokens, account in
            try await BlockingExecutor.shared.run(.toCompletion) {
                let now = clock.now()
                let credential = Credential(
                    provider: providerID,
                    tokens: TokenSet(
                        accessToken: tokens.accessToken,
                        refreshToken: tokens.refreshToken,
                        idToken: tokens.idToken,
                        expiresAt: tokens.expiresAt(now: now)
                    ),
                    lastRefresh: now,
                    lastRefreshBoot: clock.bootInstant(),
                    account: account
                )
                let stored = try storeSignIn(
                    credential,
                    requested: requested,
                    replacingAnotherAccount: replacingAnotherAccount,
                    rotates: true,
                    planned: (plannedBackend, plannedStore)
                )
                outcome.withLock { $0 = stored }
            }
        }
        if let browserFlow {
            _ = try await browserFlow.run(events: events, onApproved: store)
        } else {
            _ = try await flow.run(events: events, onApproved: store)
        }
        guard let stored = outcome.withLock({ $0 }) else {
            throw AuthError.unknown("sign-in finished without a credential")
        }
        await announce(stored, events: events)
        return (stored.slot, stored.credential)
    }

    /// What every sign-in does before it shows anything: takes the slot's sign-in lock (one
    /// sign-in per named slot at a time: a second would show a code whose approval could only race
    /// the first one's), refuses another account in a slot shared with a fleet (every machine
    /// would refuse its tokens), and opens the store the credential will go to, so nobody
    /// approves a sign-in that could not be stored. Reads files, the keyring and maybe the fleet:
    /// on the blocking executor. Keep the lock alive until the sign-in is stored.
    func prepareSignIn(
        _ requested: Slot?,
        replacingAnotherAccount: Bool,
        unlockFileStore: (@Sendable () throws -> Void)?
    )
        async throws -> (lock: FileLock?, backend: BackendKind, store: any CredentialStore)
    {
        try await BlockingExecutor.shared.run(.toCompletion) {
            let signInLock = try requested.map { try FileLock.signIn($0, paths: self.paths) }
            if replacingAnotherAccount, let requested {
                try self.refuseIfShared(requested, "sign another account into it")
            }
            let (plannedBackend, plannedStore) = try self.storeForSignIn(
                into: requested,
                unlockFileStore: unlockFileStore
            )
            return (signInLock, plannedBackend, plannedStore)
        }
    }

    /// Where an approved sign-in went: its slot, and when the slot asked for holds another
    /// account, that slot and whom it holds.
    struct StoredSignIn: Sendable {
        let slot: Slot
        let credential: Credential
        let keptInsteadOf: (requested: Slot, holds: String)?
    }

    /// Stores an approved sign-in (device code, browser, personal access token): the one place
    /// that applies the slot rules. The slot is `requested`, else named after the email. Every pin
    /// and script that names a slot would silently get another person's tokens, so a slot keeps
    /// its account unless `replacingAnotherAccount`; the approved sign-in is kept all the same, in
    /// a slot of its own (one holding this very account, or a new one), and refused only when no
    /// such name can be made. A recovery file the slot's old credential left is removed: its
    /// tokens are not this slot's any more, and settling them later would undo this sign-in.
    /// Blocks (registry, store): call it on the blocking executor.
    func storeSignIn(
        _ credential: Credential,
        requested: Slot?,
        replacingAnotherAccount: Bool,
        rotates: Bool,
        planned: (backend: BackendKind, store: any CredentialStore)
    ) throws -> StoredSignIn {
        let account = credential.account
        let current = try registry.load()
        var slot = try requested ?? Self.defaultSlot(for: account, in: current)
        var keptInsteadOf: (requested: Slot, holds: String)?
        if let held = current.slots[slot], !replacingAnotherAccount,
            let other = Self.otherAccount(held.account, account)
        {
            guard let elsewhere = try? Self.defaultSlot(for: account, in: current), elsewhere != slot,
                current.slots[elsewhere].map({ Self.otherAccount($0.account, account) == nil }) ?? true
            else {
                throw RegistryError.slotHoldsAnotherAccount(slot, holds: other.holds, signedIn: other.signedIn)
            }
            keptInsteadOf = (slot, other.holds)
            slot = elsewhere
        }
        let backend = current.slots[slot]?.backend ?? planned.backend
        let store = backend == planned.backend ? planned.store : try openStore(backend, true)
        let now = credential.lastRefresh ?? clock.now()
        try registry.update { doc in
            try store.put(credential, for: slot)
            var record = doc.slots[slot] ?? SlotRecord(provider: credential.provider, backend: backend, createdAt: now)
            record.provider = credential.provider
            record.account = account
            record.state = .signedIn(expiresAt: credential.tokens.expiresAt)
            record.rotates = rotates
            record.lastRefresh = now
            record.lastRefreshBoot = credential.lastRefreshBoot
            record.lastErrorCode = nil
            doc.slots[slot] = record
            if doc.active == nil { doc.active = slot }
        }
        RecoveryFile(paths: paths, slot: slot).remove()
        return StoredSignIn(slot: slot, credential: credential, keptInsteadOf: keptInsteadOf)
    }

    /// Tells of a stored sign-in: the `new_slot` event when it went to another slot than the one
    /// asked for, and the fleet's copy when the slot is shared.
    func announce(_ stored: StoredSignIn, events: @Sendable (SignInEvent) -> Void) async {
        let slot = stored.slot
        if let (requested, holds) = stored.keptInsteadOf {
            await BlockingExecutor.shared.run {
                _ = self.eventLog.append(
                    "new_slot",
                    slot: slot,
                    fields: [
                        "requested": .string(requested.name),
                        "reason": .string(ErrorCode.slotHoldsAnotherAccount.rawValue),
                    ]
                )
            }
            events(.storedInNewSlot(requested: requested, holds: holds, slot: slot))
        }
        if let shared = await BlockingExecutor.shared.run(
            .toCompletion,
            { SharedSlotState.loadIfReadable(slot, paths: self.paths) }
        ) {
            events(.shared(await shareSignIn(slot, stored.credential, state: shared)))
        }
    }

    /// Whether `providerID` is configured and can sign in through the browser (ChatGPT always; a
    /// generic provider when its config names an `authorization-endpoint`): the provider's own
    /// ``BrowserSignInProvider/offersBrowserSignIn``.
    package func offersBrowserSignIn(providerID: String) -> Bool {
        ((try? provider(providerID)) as? any BrowserSignInProvider)?.offersBrowserSignIn ?? false
    }

    /// A slot name from the account's email local part, made unique when another account holds
    /// it: then the local part and the domain's first label (`sam-two` for sam@two.example), then
    /// numbered (`sam-2`). A slot holding this same account is reused.
    package static func defaultSlot(for account: AccountInfo, in document: RegistryDocument) throws -> Slot {
        let parts = account.email.map { $0.split(separator: "@", maxSplits: 1).map(String.init) } ?? []
        guard let base = Slot.suggested(from: parts.first ?? "") ?? Slot.suggested(from: account.accountID ?? "") else {
            throw UsageErrorText(
                "the account has no email to name the slot after; give a slot name: `lanyard login NAME`"
            )
        }
        func sameAccount(_ record: SlotRecord) -> Bool {
            record.account.email == account.email && record.account.accountID == account.accountID
        }
        if document.slots[base].map(sameAccount) ?? true { return base }
        let label = parts.count == 2 ? parts[1].split(separator: ".").first.map(String.init) : nil
        if let label, let withDomain = Slot.suggested(from: String(base.name.prefix(40)) + "-" + label),
            document.slots[withDomain].map(sameAccount) ?? true
        {
            return withDomain
        }
        for n in 2...999 {
            if let candidate = try? Slot(String(base.name.prefix(60)) + "-\(n)"),
                document.slots[candidate].map(sameAccount) ?? true
            {
                return candidate
            }
        }
        return base
    }

    /// Removes a slot's credential and marks it signed out; with `revoke`, first revokes the
    /// refresh token at the provider (which ends that session in every tool).
    /// When `held` (a slot's account) and `signedIn` (a new sign-in's) are different accounts: the
    /// names to show for each. Accounts differ when both name an email, a user id or an account id
    /// (a workspace) and those differ; a slot that knows nothing of its account takes any.
    static func otherAccount(_ held: AccountInfo, _ signedIn: AccountInfo) -> (holds: String, signedIn: String)? {
        func differ(_ a: String?, _ b: String?) -> Bool {
            guard let a, let b else { return false }
            return a.lowercased() != b.lowercased()
        }
        guard
            differ(held.email, signedIn.email) || differ(held.userID, signedIn.userID)
                || differ(held.accountID, signedIn.accountID)
        else {
            return nil
        }
        func name(_ a: AccountInfo) -> String {
            let parts = [a.email, a.accountID.map { "account \($0)" }].compactMap { $0 }
            return parts.isEmpty ? (a.userID ?? "an unnamed account") : parts.joined(separator: ", ")
        }
        return (name(held), name(signedIn))
    }

    /// When the token cannot be revoked (the provider has no revocation endpoint, the token is a
    /// fleet's) or the revocation fails, `ifNotRevoked` decides: throw ``NotRevokedError`` with
    /// nothing changed, or sign out anyway and say why in the outcome. A slot already signed out
    /// has nothing to revoke and is not a refusal.
    /// - Returns: whether a revocation happened, and whether the slot was signed out already.
    @discardableResult
    package func signOut(
        slot: Slot,
        revoke: Bool,
        ifNotRevoked: WhenNotRevoked = .refuse
    ) async throws -> SignOutOutcome {
        try await BlockingExecutor.shared.run(.toCompletion) { try self.refuseIfShared(slot, "sign it out here") }
        // A refresh under way finishes first; otherwise it would store the credential again.
        let lock = try await lockSlot(slot)
        defer { withExtendedLifetime(lock) {} }
        let (record, store, formerlyShared, liveRefreshToken) = try await BlockingExecutor.shared.run(.toCompletion) {
            let document = try self.registry.load()
            guard let record = document.slots[slot] else { throw RegistryError.unknownSlot(slot) }
            let store = try self.openStore(record.backend, false)
            // The tokens a killed refresh left are the live ones: revoke those, and leave no file
            // that a later repair would sign the slot back in from.
            _ = try? RecoveryFile(paths: self.paths, slot: slot).settle(into: store, slot: slot)
            // A copy this machine no longer shares (handed over, or this machine was removed from
            // its fleet) is forgotten here only: its refresh token is the fleet's, never revoked.
            let formerlyShared = SharedSlotState.loadIfReadable(slot, paths: self.paths) != nil
            return (record, store, formerlyShared, (try? store.get(slot))?.tokens.refreshToken)
        }
        let wasSignedOut = record.state == .signedOut
        var revoked = false
        var notRevoked: NotRevokedError.Reason?
        if revoke, let refresh = liveRefreshToken {
            if formerlyShared {
                notRevoked = .fleetToken
            } else {
                do {
                    revoked = try await provider(record.provider).revoke(refreshToken: refresh)
                    if !revoked { notRevoked = .noRevocationEndpoint(provider: record.provider) }
                } catch let error as AuthError {
                    notRevoked = .failed(error)
                }
            }
            if let notRevoked, ifNotRevoked == .refuse { throw NotRevokedError(slot: slot, reason: notRevoked) }
        }
        try await BlockingExecutor.shared.run(.toCompletion) {
            try self.registry.update { doc in
                do { try store.delete(slot) } catch StoreError.notFound {}
                RecoveryFile(paths: self.paths, slot: slot).remove()
                doc.slots[slot]?.state = .signedOut
                doc.slots[slot]?.lastErrorCode = nil
            }
            if formerlyShared { try SharedSlotState.remove(slot, paths: self.paths) }
        }
        return SignOutOutcome(revoked: revoked, wasSignedOut: wasSignedOut, notRevoked: notRevoked)
    }
}

/// A plain message error for conditions with no better type (exit 2).
public struct UsageErrorText: LanyardError {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var code: ErrorCode { .usage }
    public var errorDescription: String? { message }
}
