import FoundationEssentials
import Glibc
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport

/// When a credential needs refreshing: its access token has less than the lead left, or, when
/// the expiry is unreadable, its last refresh is older than `maxAge`. A token with neither an
/// expiry nor a refresh token (a GitHub CLI token, say) is never due: there is nothing to refresh
/// it with, and it lives until the server refuses it.
///
/// The lead is `lead`, or `leadShare` (half) of the token's lifetime when that is shorter: a
/// provider that issues 300-second tokens under the default 300-second lead would otherwise be
/// refreshed on every call.
/// The time left is measured on the boot clock when the tokens were obtained during this boot, so
/// a wall clock set forward does not make fresh tokens look expired (a refresh on every call) and
/// one set back does not make expired tokens look fresh.
package struct RefreshRule: Sendable {
    package var lead: TimeInterval
    package var leadShare: Double
    package var maxAge: TimeInterval

    package init(lead: TimeInterval, leadShare: Double = 0.5, maxAge: TimeInterval) {
        self.lead = lead
        self.leadShare = leadShare
        self.maxAge = maxAge
    }

    package func needsRefresh(_ credential: Credential, now: Date, boot: BootInstant? = nil) -> Bool {
        guard let due = dueDate(credential, now: now, boot: boot) else { return false }
        return due <= now
    }

    /// When the credential will need a refresh, on the wall clock as it reads `now` (nil when it
    /// never will: no expiry and no refresh token).
    package func dueDate(_ credential: Credential, now: Date, boot: BootInstant? = nil) -> Date? {
        let expiry = credential.tokens.expiry
        if expiry == nil && credential.tokens.refreshToken?.isEmpty ?? true { return nil }
        return dueDate(
            expiry: expiry,
            lastRefresh: credential.lastRefresh,
            lastRefreshBoot: credential.lastRefreshBoot,
            now: now,
            boot: boot
        )
    }

    /// The same from a registry record's fields (the agent plans without reading credentials).
    package func dueDate(
        expiry: Date?,
        lastRefresh: Date?,
        lastRefreshBoot: BootInstant?,
        now: Date,
        boot: BootInstant?
    ) -> Date {
        // Time since the last refresh, on the boot clock when both readings are of this boot.
        let elapsedOnBoot = boot.flatMap { b in lastRefreshBoot.flatMap { b.seconds(since: $0) } }
        guard let expiry else {
            guard let lastRefresh else { return now }
            if let elapsedOnBoot { return now + (maxAge - elapsedOnBoot) }
            return lastRefresh + maxAge
        }
        guard let lastRefresh, expiry > lastRefresh else { return expiry - lead }
        let lifetime = expiry.timeIntervalSince(lastRefresh)
        let lead = lead(forLifetime: lifetime)
        if let elapsedOnBoot { return now + (lifetime - elapsedOnBoot - lead) }
        return expiry - lead
    }

    /// The lead for a token that lives `lifetime` seconds.
    package func lead(forLifetime lifetime: TimeInterval?) -> TimeInterval {
        guard let lifetime, lifetime > 0 else { return lead }
        return min(lead, lifetime * leadShare)
    }

    /// The lead for a token obtained at `lastRefresh` that expires at `expiry`.
    package func lead(expiry: Date?, lastRefresh: Date?) -> TimeInterval {
        lead(forLifetime: expiry.flatMap { e in lastRefresh.map { e.timeIntervalSince($0) } })
    }
}

extension AccountManager {
    package var refreshRule: RefreshRule {
        RefreshRule(lead: config.refreshLead, leadShare: config.refreshLeadShare, maxAge: config.refreshMaxAge)
    }

    /// The slot's credential, refreshed first when it is due (or when `force`).
    ///
    /// One refresh per slot at a time across processes: the slot's lock is taken, the stored
    /// credential re-read, and a rotation another process already did is adopted instead of
    /// refreshing again. New tokens are written to a 0600 recovery file before the store, so a
    /// crash or a failed write never loses the only live refresh token.
    package func freshCredential(slot: Slot, force: Bool = false) async throws -> Credential {
        // One hop: the whole operation is blocking work (a store, a lock, etcd, the provider over
        // libcurl), and once it has started it runs to its end even when the caller is cancelled,
        // since the server may have rotated the token by then.
        try await BlockingExecutor.shared.run(.toCompletion) {
            try self.freshCredentialBlocking(slot: slot, force: force, stored: nil)
        }
    }

    /// ``freshCredential(slot:force:)`` from a read the caller already made (``storedCredential(slot:force:)``,
    /// which found a refresh due): the store is not read again before the lock.
    package func freshCredential(after stored: StoredCredential, force: Bool = false) async throws -> Credential {
        try await BlockingExecutor.shared.run(.toCompletion) {
            try self.freshCredentialBlocking(slot: stored.slot, force: force, stored: stored)
        }
    }

    /// The one synchronous core of ``freshCredential(slot:force:)``: the registry and the store read
    /// once before the slot's lock and once under it, the due refresh made (here, or by the
    /// refresh runner's worker process), every step blocking on this thread.
    @available(*, noasync, message: "blocking: await freshCredential(slot:force:) instead")
    package func freshCredentialBlocking(slot: Slot, force: Bool, stored known: StoredCredential?) throws -> Credential
    {
        let stored = try known ?? storedCredential(slot: slot, force: force)
        if !stored.due { return stored.credential }
        let (lock, inherited) = try lockSlotBlocking(slot)
        defer { withExtendedLifetime(lock) {} }
        if let refreshRunner {
            // Wait here, not in a new process, while another refreshes; then hand the held lock
            // to the worker, so callers that arrive meanwhile wait for its result instead of
            // starting workers of their own.
            let current = try read(slot, stored.store)
            let done =
                stored.record.state != .reauthenticationRequired
                && !stillDue(current, before: stored.credential, force: force)
                && !RecoveryFile(paths: paths, slot: slot, store: stored.store).settlesFirst
            if done { return current }
            try refreshRunner(slot, force, lock)
            return try read(slot, stored.store)
        }
        // A lock handed down by the caller was held when `stored` was read: nothing changed since.
        return try refreshLocked(stored, force: force, current: inherited && known == nil ? stored.credential : nil)
    }

    /// The slot's refresh lock: the one this process was handed (a refresh worker holds its
    /// caller's lock; opening the lock file again would wait for itself), else acquired.
    package func lockSlot(_ slot: Slot) async throws -> FileLock {
        if let inherited = inheritedLock, inherited.slot == slot { return inherited.lock }
        return try await SlotLock.acquire(slot: slot, paths: paths)
    }

    /// ``lockSlot(_:)`` on this thread. - Returns: the lock, and whether it was handed down.
    @available(*, noasync, message: "blocking: await lockSlot(_:) instead")
    func lockSlotBlocking(_ slot: Slot) throws -> (FileLock, inherited: Bool) {
        if let inherited = inheritedLock, inherited.slot == slot { return (inherited.lock, true) }
        return (try FileLock.slot(slot, paths: paths), false)
    }

    /// The slot's record, store and stored credential, and whether a refresh is due: one read of
    /// the registry and one of the store.
    @available(*, noasync, message: "blocking: await freshCredential(slot:force:) instead")
    package func storedCredential(slot: Slot, force: Bool) throws -> StoredCredential {
        let (record, store) = try storeOf(slot)
        if record.state == .reauthenticationRequired {
            // A shared slot may have been signed in again on another machine: the refresh path
            // looks in the fleet (and serves nothing from here).
            guard SharedSlotState.loadIfReadable(slot, paths: paths) != nil else {
                throw ClientError.reauthenticationRequired(
                    slot: slot.name,
                    reason: record.lastErrorCode ?? "the session ended"
                )
            }
            return StoredCredential(
                slot: slot,
                record: record,
                store: store,
                credential: try read(slot, store),
                due: true
            )
        }
        let credential = try read(slot, store)
        // A personal access token has nothing to refresh with: never due, even when forced.
        if credential.isPersonalAccessToken {
            return StoredCredential(slot: slot, record: record, store: store, credential: credential, due: false)
        }
        let due =
            force || refreshRule.needsRefresh(credential, now: clock.now(), boot: clock.bootInstant())
            || RecoveryFile(paths: paths, slot: slot, store: store).settlesFirst
        return StoredCredential(slot: slot, record: record, store: store, credential: credential, due: due)
    }

    /// Under the slot's lock, with the store re-read as `current`: whether the refresh asked for
    /// when it held `before` is still to be made. A rotation another process made while we waited
    /// for the lock is adopted (even when forced) unless it is itself due.
    func stillDue(_ current: Credential, before: Credential, force: Bool) -> Bool {
        let rotated =
            current.tokens.refreshToken != before.tokens.refreshToken
            || current.tokens.accessToken != before.tokens.accessToken
        return refreshRule.needsRefresh(current, now: clock.now(), boot: clock.bootInstant()) || (force && !rotated)
    }

    /// A due refresh under the slot's lock: tokens a killed refresh left put back, the store read
    /// again (unless `current` was read under this lock already), then the shared slot's fleet
    /// protocol or the provider's refresh.
    @available(*, noasync, message: "blocking: await freshCredential(slot:force:) instead")
    func refreshLocked(_ stored: StoredCredential, force: Bool, current readUnderLock: Credential?) throws -> Credential
    {
        let (slot, record, store, before) = (stored.slot, stored.record, stored.store, stored.credential)
        // A refresh that died after the server rotated the token left the new tokens here.
        let recovery = RecoveryFile(paths: paths, slot: slot, store: store)
        var current = readUnderLock
        if recovery.waiting, let recovered = try? recovery.read() {
            try store.put(recovered, for: slot)
            recovery.remove()
            current = nil
        }
        let fresh = try current ?? read(slot, store)
        if let shared = try SharedSlotState.load(slot, paths: paths) {
            if record.state == .reauthenticationRequired { return try reviveShared(slot, store: store, state: shared) }
            return try refreshShared(stored, force: force, current: fresh, state: shared)
        }
        if !stillDue(fresh, before: before, force: force) { return fresh }
        let refreshed = try exchangeRefreshToken(slot: slot, current: fresh, record: record, store: store)
        try keepRefreshed(slot: slot, refreshed, previous: fresh, store: store)
        return refreshed
    }

    /// Spends `current`'s refresh token at the provider and returns the credential it gave. A
    /// refusal marks the slot for sign-in (and drops the dead token); a network failure changes
    /// nothing. The request runs on the cooperative pool and its transfer on another executor
    /// thread while this one waits for the answer.
    @available(*, noasync, message: "blocking: await freshCredential(slot:force:) instead")
    func exchangeRefreshToken(
        slot: Slot,
        current: Credential,
        record: SlotRecord,
        store: any CredentialStore
    ) throws -> Credential {
        guard let refreshToken = current.tokens.refreshToken, !refreshToken.isEmpty else {
            try markReauthentication(slot, reason: ErrorCode.missingRefreshToken.rawValue)
            throw ClientError.missingRefreshToken(slot: slot.name)
        }
        let provider = try provider(record.provider)
        let answer = SyncBridge.value { () async -> Result<TokenResponse, RefreshFailure> in
            do throws(RefreshFailure) { return .success(try await provider.refresh(refreshToken: refreshToken)) } catch
            {
                return .failure(error)
            }
        }
        let tokens: TokenResponse
        switch answer {
        case .success(let answered):
            tokens = answered
        case .failure(.permanent(let code, let status)):
            var dead = current
            dead.tokens.refreshToken = nil
            try? store.put(dead, for: slot)  // drop the dead token; the slot and its metadata stay
            let message = "the server refused the refresh token (HTTP \(status), \(code)): sign in again"
            logRefreshError(slot, code: .reauthenticationRequired, message: message)
            try markReauthentication(slot, reason: code)
            throw ClientError.reauthenticationRequired(slot: slot.name, reason: code)
        case .failure(.transient(let message)):
            logRefreshError(slot, code: .networkFailure, message: message)
            throw ClientError.networkFailure(message)
        }
        let now = clock.now()
        var account = current.account
        // The server has already rotated the refresh token: claims that fail the text rules are
        // ignored (the stored account stays) rather than burning the slot over a display name.
        if let fresh = try? provider.accountInfo(for: tokens), fresh.email != nil || fresh.accountID != nil {
            account = fresh
        }
        var refreshed = Credential(
            provider: current.provider,
            tokens: TokenSet(
                accessToken: tokens.accessToken,
                refreshToken: tokens.refreshToken ?? refreshToken,
                idToken: tokens.idToken ?? current.tokens.idToken,
                expiresAt: tokens.expiresAt(now: now)
            ),
            lastRefresh: now,
            lastRefreshBoot: clock.bootInstant(),
            account: account
        )
        refreshed.recordRotation(from: current)
        return refreshed
    }

    /// Keeps tokens the server just issued: first in the recovery file, then (`share`, for a
    /// shared slot: in the fleet), then in the store; then the registry and the event log. The
    /// server has rotated the refresh token by now, so losing `refreshed` loses the session: when
    /// the recovery file cannot be written (a full or failing disk) the store may still take it.
    func keepRefreshed(
        slot: Slot,
        _ refreshed: Credential,
        previous current: Credential,
        store: any CredentialStore,
        share: (() -> Void)? = nil
    ) throws {
        let recovery = RecoveryFile(paths: paths, slot: slot, store: store)
        let kept: Result<RecoveryFile.Place, any Error>
        do { kept = .success(try recovery.write(refreshed)) } catch { kept = .failure(error) }
        share?()
        do {
            try store.put(refreshed, for: slot)
        } catch {
            // Three outcomes, three codes: scripts and the agent tell tokens that wait (the store
            // failed: exit 5, `doctor --repair` stores them) from a sign-in that is gone (exit 4).
            let failure: StoreError
            let storeFailure = error.userFacingDescription
            switch kept {
            case .success(.file):
                failure = .refreshedTokensInRecoveryFile(path: recovery.path, storeFailure: storeFailure)
            case .success(.kernelKeyring(let fileError)):
                failure = .refreshedTokensInKernelKeyring(
                    path: recovery.path,
                    storeFailure: storeFailure,
                    fileFailure: fileError
                )
            case .failure(let recoveryError):
                failure = .refreshedSignInLost(
                    slot: slot,
                    path: recovery.path,
                    storeFailure: storeFailure,
                    fileFailure: recoveryError.userFacingDescription
                )
            }
            logRefreshError(slot, code: failure.code, message: failure.userFacingDescription)
            throw failure
        }
        recovery.remove()
        try recordStored(slot: slot, refreshed)
        func seconds(_ d: Date?) -> JSONValue {
            d.map { .number(($0.timeIntervalSince1970 * 1000).rounded() / 1000) } ?? .null
        }
        eventLog.append(
            "refresh",
            slot: slot,
            fields: [
                "expires_at": .date(refreshed.tokens.expiresAt), "expires_ts": seconds(refreshed.tokens.expiresAt),
                "previous_expires_ts": seconds(current.tokens.expiresAt),
            ]
        )
    }

    /// The registry's view of a slot whose store now holds `credential`.
    func recordStored(slot: Slot, _ credential: Credential) throws {
        try registry.update { doc in
            doc.slots[slot]?.state = .signedIn(expiresAt: credential.tokens.expiresAt)
            doc.slots[slot]?.rotates = !credential.isPersonalAccessToken
            doc.slots[slot]?.lastRefresh = credential.lastRefresh
            doc.slots[slot]?.lastRefreshBoot = credential.lastRefreshBoot
            doc.slots[slot]?.lastErrorCode = nil
            doc.slots[slot]?.account = credential.account
        }
    }

    func storeOf(_ slot: Slot) throws -> (SlotRecord, any CredentialStore) {
        let record = try record(of: slot)
        return (record, try openStore(record.backend, false))
    }

    func read(_ slot: Slot, _ store: any CredentialStore) throws -> Credential {
        do { return try store.get(slot) } catch StoreError.notFound {
            throw ClientError.missingCredential(slot: slot.name)
        }
    }

    /// An `error` event for a refresh that failed. The agent logs its own, with its retry schedule.
    func logRefreshError(_ slot: Slot, code: ErrorCode, message: String) {
        guard EventLog.source != "agent" else { return }
        eventLog.appendError(code, slot: slot, message: message)
    }

    /// Marks the slot for a new sign-in. `reason` is kept as the registry's `last_error` and the
    /// transition's `reason`: the server's own code when it refused the refresh token
    /// (`invalid_grant`, `refresh_token_reused`, which tell a person more than
    /// `reauthentication_required`), else an ``ErrorCode``'s raw value.
    func markReauthentication(_ slot: Slot, reason code: String) throws {
        let previous = try registry.update { doc in
            let previous = doc.slots[slot]?.state
            doc.slots[slot]?.state = .reauthenticationRequired
            doc.slots[slot]?.lastErrorCode = code
            return previous
        }
        if previous != .reauthenticationRequired {
            eventLog.append(
                "transition",
                slot: slot,
                fields: [
                    "from": .optional(previous?.name), "to": .string(AuthState.reauthenticationRequired.name),
                    "reason": .string(code), "fix": .string("lanyard login \(slot.name)"),
                ]
            )
        }
    }

    /// The event log, capped as configured.
    package var eventLog: EventLog { EventLog(paths: paths, maxBytes: config.eventsMaxBytes) }

    /// Puts credentials left in recovery files (or, when the disk refused those, in the kernel
    /// keyring) back into their stores and removes them.
    /// - Returns: the slots restored.
    package func restoreRecoveryFiles() throws -> [Slot] {
        var restored: [Slot] = []
        let listed = (try? registry.load().sortedSlots.map(\.0)) ?? []
        for (slot, _) in RecoveryFile.all(paths: paths, slots: listed) {
            guard let record = try registry.load().slots[slot] else { continue }
            let store = try openStore(record.backend, false)
            let file = RecoveryFile(paths: paths, slot: slot, store: store)
            let credential = try file.read()
            try store.put(credential, for: slot)
            try registry.update { doc in
                doc.slots[slot]?.state = .signedIn(expiresAt: credential.tokens.expiresAt)
                doc.slots[slot]?.lastRefresh = credential.lastRefresh
                doc.slots[slot]?.lastRefreshBoot = credential.lastRefreshBoot
                doc.slots[slot]?.lastErrorCode = nil
            }
            file.remove()
            restored.append(slot)
        }
        return restored
    }
}

/// The per-slot refresh lock (`$XDG_DATA_HOME/lanyard/locks/SLOT.lock`), shared by the CLI, the
/// library and the agent. Waiting happens on the blocking executor, off the cooperative pool.
package enum SlotLock {
    package static func path(slot: Slot, paths: Paths) -> String { FileLock.slotPath(slot, paths: paths) }

    package static func acquire(slot: Slot, paths: Paths) async throws -> FileLock {
        try await BlockingExecutor.shared.run { try FileLock.slot(slot, paths: paths) }
    }
}

/// A refreshed credential kept at 0600 in `$XDG_STATE_HOME/lanyard/recovery/` until it is safely
/// in the store, encrypted for that store (an age file to the file store's recipients, which are
/// public: writing needs no unlock, reading does). A store with no recipient (the keyring) keeps
/// the tokens in the kernel keyring instead (``RefreshEscrow``), as does any store when the file
/// cannot be encrypted or written: a refresh token is never on disk in clear. A clear JSON file an
/// older Lanyard wrote is still read (told apart by the age header).
struct RecoveryFile {
    let path: String
    let slot: Slot
    let paths: Paths
    /// The slot's store: it encrypts the file and opens it. nil for listings, which only look.
    let store: (any CredentialStore)?

    init(paths: Paths, slot: Slot, store: (any CredentialStore)? = nil) {
        path = paths.stateDirectory + "/recovery/" + slot.name + ".json"
        self.slot = slot
        self.paths = paths
        self.store = store
    }

    /// Where refreshed tokens were kept.
    enum Place: Equatable {
        case file
        /// No file was written (the error says why: no recipient to encrypt to, or the disk
        /// refused): the kernel keyring holds them.
        case kernelKeyring(fileError: String)
    }

    /// Keeps `credential` in the file, encrypted for the store; when the store has no recipient,
    /// its recipients cannot be read, or the disk refuses the file, in the kernel keyring
    /// (``RefreshEscrow``). Throws the file's error when neither takes it.
    func write(_ credential: Credential) throws -> Place {
        var document = credential.jsonData()
        defer { document.resetBytes(in: 0..<document.count) }
        /// The kernel keyring's turn, the file not written for `reason`.
        func escrow(_ reason: String, _ error: @autoclosure () -> any Error) throws -> Place {
            guard RefreshEscrow.put(document, slot: slot, paths: paths) else { throw error() }
            return .kernelKeyring(fileError: reason)
        }
        let sealed: Data?
        do { sealed = try store?.sealRecovery(document) } catch {
            return try escrow("cannot encrypt it: " + error.userFacingDescription, error)
        }
        guard let sealed else {
            let reason = "the \(store?.kind.displayName ?? "slot's") store has no key to encrypt it to"
            return try escrow(
                reason,
                StoreError.io(path: path, detail: reason + ", and the kernel keyring refused the tokens")
            )
        }
        do {
            let dir = PathText.parent(of: path)
            try SecureFiles.ensureDirectory(PathText.parent(of: dir))
            try SecureFiles.ensureDirectory(dir)
            try SecureFiles.atomicWrite(sealed, to: path)
            return .file
        } catch {
            return try escrow(error.userFacingDescription, error)
        }
    }

    /// The refreshed credential waiting here: the file (opened by the store when it is encrypted,
    /// taken as it is when an older Lanyard wrote it in clear), else the kernel keyring's copy.
    func read() throws -> Credential {
        if access(path, F_OK) != 0 { adoptTemp() }  // a write killed mid-rename left only its temporary
        let data: Data
        if let raw = try SecureFiles.read(path) {
            data = try open(raw, source: path)
        } else if let escrowed = RefreshEscrow.get(slot: slot, paths: paths) {
            data = escrowed
        } else {
            throw StoreError.io(path: path, detail: "recovery file vanished")
        }
        do { return try Credential.decode(data, source: path) } catch {
            throw StoreError.corrupt(source: path, detail: error.detail)
        }
    }

    /// The credential document in `raw`, a recovery file's bytes.
    private func open(_ raw: Data, source: String) throws -> Data {
        // Clear JSON, from before recovery files were encrypted.
        guard RecoveryDocument.isSealed(raw) else { return raw }
        guard let store else {
            throw StoreError.corrupt(source: source, detail: "encrypted: only the slot's store opens it")
        }
        return try store.openRecovery(raw, source: source)
    }

    func remove() {
        unlink(path)
        for temp in temps() { unlink(temp) }
        RefreshEscrow.remove(slot: slot, paths: paths)
    }

    /// True when refreshed tokens wait in the file. A write killed as it renamed its temporary
    /// file into place leaves only the complete temporary (written and synced before the rename),
    /// which then holds the newest tokens: it is moved into place first (an encrypted one only
    /// when the store is known, to check it is whole; without, it counts as waiting).
    var exists: Bool {
        if access(path, F_OK) == 0 { return true }
        adoptTemp()
        if access(path, F_OK) == 0 { return true }
        return store == nil
            && temps().contains { temp in
                (try? SecureFiles.read(temp)).flatMap { $0 }.map(RecoveryDocument.isSealed) ?? false
            }
    }

    /// True when refreshed tokens wait that must reach the store before its credential is used
    /// (read on every token read): a file, or for a store with no recipient (the keyring), whose
    /// refreshed tokens always wait in the kernel keyring, a copy there. Otherwise the stored
    /// refresh token, which the server has spent, would reach a copy that refreshes on its own
    /// (`exec`'s auth.json). A file store's kernel-keyring copy (a disk that refused the file) is
    /// left to the next refresh, as ``waiting`` is: the hot path loads no keyutils for it.
    var settlesFirst: Bool {
        if exists { return true }
        guard let store, store.kind != .file else { return false }
        return RefreshEscrow.get(slot: slot, paths: paths) != nil
    }

    /// True when refreshed tokens wait in the file or in the kernel keyring (no recipient, or the
    /// disk refused the file). Asked under the slot's lock before a refresh (and by doctor), not
    /// on every token read: a token whose stored copy is still fresh is good either way, and the
    /// next refresh takes the waiting tokens first.
    var waiting: Bool { exists || RefreshEscrow.get(slot: slot, paths: paths) != nil }

    /// `SLOT.json.XXXXXX` files of interrupted writes.
    func temps() -> [String] {
        let dir = PathText.parent(of: path)
        let prefix = PathText.lastComponent(of: path) + "."
        // `token` asks on every call; the folder exists only after a refresh, and a listing of a
        // missing folder costs Foundation a thrown error.
        guard access(dir, F_OK) == 0 else { return [] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.count == prefix.count + 6 }.sorted().map { dir + "/" + $0 }
    }

    /// Moves the newest temporary that holds a whole credential into place (others are removed).
    /// An encrypted one is whole when it decrypts (age authenticates every chunk and the end).
    private func adoptTemp() {
        let complete = temps().compactMap { temp -> (String, Credential)? in
            guard let raw = try? SecureFiles.read(temp), RecoveryDocument.isSealed(raw) ? store != nil : true,
                let data = try? open(raw, source: temp), let credential = try? Credential.decode(data, source: temp)
            else { return nil }
            return (temp, credential)
        }
        guard let newest = complete.max(by: { ($0.1.lastRefresh ?? .distantPast) < ($1.1.lastRefresh ?? .distantPast) })
        else { return }
        if rename(newest.0, path) == 0 {
            for (temp, _) in complete where temp != newest.0 { unlink(temp) }
        }
    }

    /// The slots whose refreshed tokens wait: those with a file in the recovery folder, and those
    /// of `slots` with some in the kernel keyring.
    static func all(paths: Paths, slots known: [Slot] = []) -> [(Slot, RecoveryFile)] {
        let dir = paths.stateDirectory + "/recovery"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        // SLOT.json, or only SLOT.json.XXXXXX left by a write killed mid-rename.
        let slots = Set(
            names.compactMap { name -> Slot? in
                guard let range = name.firstRange(of: ".json") else { return nil }
                let rest = name[range.upperBound...]
                guard rest.isEmpty || (rest.hasPrefix(".") && rest.count == 7) else { return nil }
                return try? Slot(String(name[..<range.lowerBound]))
            }
        ).union(known)
        return slots.sorted { $0.name < $1.name }.map { ($0, RecoveryFile(paths: paths, slot: $0)) }.filter {
            $0.1.waiting
        }
    }

    /// Puts the refreshed tokens waiting here into `store` and removes the file: what a refresh
    /// killed after the server rotated the token left behind. True when there were some.
    func settle(into store: any CredentialStore, slot: Slot) throws -> Bool {
        let file = RecoveryFile(paths: paths, slot: slot, store: store)
        guard file.waiting else { return false }
        try store.put(try file.read(), for: slot)
        file.remove()
        return true
    }
}

/// What `doctor` needs to know about recovery files.
package enum RecoveryFiles {
    /// Slots whose refreshed tokens wait in a recovery file.
    package static func pending(paths: Paths, slots: [Slot] = []) -> [Slot] {
        RecoveryFile.all(paths: paths, slots: slots).map(\.0)
    }
}
