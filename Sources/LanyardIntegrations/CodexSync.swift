import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport

/// What ``CodexSync/export(slot:to:)`` wrote.
package struct CodexExport: Sendable {
    package let signIn: CodexSignIn
    /// Where: auth.json's path, or Codex's keyring item.
    package let place: String
    /// The slot's account.
    package let account: AccountInfo
    /// The sign-in replaced said `auth_mode: "oauth"`, which current Codex refuses (older
    /// Lanyard versions wrote it); it says `chatgpt` now.
    package let fixedLegacyOAuthMode: Bool
}

/// Keeps slots and Codex homes in step without ever presenting a refresh token twice.
package struct CodexSync: Sendable {
    package let manager: AccountManager

    package init(manager: AccountManager) { self.manager = manager }

    /// Copies tokens Codex rotated in `home` back into `slot` when they belong to its account
    /// (matched by account id) and are newer than the slot's. Runs under the slot's refresh lock.
    /// - Returns: true when the slot took the newer tokens.
    @discardableResult
    package func copyBack(from home: CodexHome, into slot: Slot) async throws -> Bool {
        let manager = self.manager
        // Codex's sign-in (a file, or the keyring over D-Bus) and the registry: one hop.
        let found = try await BlockingExecutor.shared.run { () throws -> (CodexAuthFile, SlotRecord)? in
            guard let live = try home.read(), let record = try manager.registry.load().slots[slot],
                record.provider == "openai" || manager.config.providers[record.provider]?.kind == .openai
            else { return nil }
            return (live, record)
        }
        guard let (live, record) = found else { return false }
        let lock = try await manager.lockSlot(slot)
        defer { withExtendedLifetime(lock) {} }
        return try await BlockingExecutor.shared.run { try self.copyBack(live, record: record, into: slot) }
    }

    /// ``copyBack(from:into:)``'s blocking part, under the slot's refresh lock: the store and the
    /// registry.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func copyBack(_ live: CodexAuthFile, record: SlotRecord, into slot: Slot) throws -> Bool {
        let store = try manager.openStore(record.backend, false)
        let stored = try store.get(slot)
        guard let account = stored.account.accountID, live.accountID == account else { return false }
        // A refresh token this slot has itself rotated away from is a stale copy (Lanyard wrote
        // this auth.json, then refreshed): adopting it would present a spent token.
        guard live.refreshToken != stored.tokens.refreshToken, !stored.hasSpent(refreshToken: live.refreshToken) else {
            return false
        }
        // auth.json keeps whole seconds, so compare at that precision: tokens Codex rotated are at
        // least as recent as the slot's; an older auth.json (Lanyard refreshed since) is ignored.
        let storedSecond = ((stored.lastRefresh ?? .distantPast).timeIntervalSince1970).rounded(.down)
        guard live.lastRefresh.timeIntervalSince1970 >= storedSecond else { return false }
        var updated = live.credential(provider: stored.provider, expiresAt: nil)
        updated.account = stored.account.merging(updated.account)
        updated.recordRotation(from: stored)
        try store.put(updated, for: slot)
        try manager.registry.update { doc in
            doc.slots[slot]?.state = .signedIn(expiresAt: updated.tokens.expiresAt)
            doc.slots[slot]?.lastRefresh = updated.lastRefresh
            doc.slots[slot]?.lastRefreshBoot = updated.lastRefreshBoot
            doc.slots[slot]?.lastErrorCode = nil
        }
        return true
    }

    /// Writes `slot`'s credential (refreshed first when due) where `home`'s Codex reads its
    /// sign-in (auth.json, or its keyring item in keyring mode). Tokens Codex rotated in the
    /// sign-in being replaced are first copied back into the slot that holds that account, so
    /// overwriting it never loses the only live refresh token. A sign-in Lanyard does not hold
    /// (an API key, an agent identity) is refused, not overwritten; fields Lanyard does not know
    /// are kept.
    package func export(slot: Slot, to home: CodexHome) async throws -> CodexExport {
        let (live, owner) = try await BlockingExecutor.shared.run { () throws -> (CodexSignIn?, Slot?) in
            let live = try home.readSignIn()
            return (live, try live?.chatGPT.flatMap { try self.ownerSlot(of: $0) })
        }
        if let owner { try await copyBack(from: home, into: owner) }
        let credential = try await manager.freshCredential(slot: slot)
        var signIn = try CodexSignIn(credential: credential, slot: slot)
        signIn.keep(from: live)
        let written = signIn
        let place = try await BlockingExecutor.shared.run {
            try home.write(written)
            return home.signInPlace()
        }
        return CodexExport(
            signIn: signIn,
            place: place,
            account: credential.account,
            fixedLegacyOAuthMode: live?.chatGPT?.legacyOAuthMode ?? false
        )
    }

    /// After Lanyard refreshed `slot`: when `home`'s auth.json holds the same account with the
    /// tokens this refresh replaced (now used up), writes the new ones there, so Codex does not
    /// present a spent refresh token. An auth.json of another account is left alone.
    /// - Returns: true when auth.json was rewritten.
    @discardableResult
    package func mirror(_ credential: Credential, of slot: Slot, to home: CodexHome) throws -> Bool {
        // A personal access token is never refreshed, so there is nothing to hand on.
        if credential.isPersonalAccessToken { return false }
        guard let whole = try home.readSignIn(), let live = whole.chatGPT, let account = credential.account.accountID,
            live.accountID == account, live.refreshToken != credential.tokens.refreshToken
        else { return false }
        // Only ever move auth.json forward: over a token this credential has spent, or one no
        // newer than ours (whole seconds, as auth.json keeps them).
        let ours = ((credential.lastRefresh ?? .distantPast).timeIntervalSince1970).rounded(.down)
        guard
            credential.hasSpent(refreshToken: live.refreshToken)
                || ours >= live.lastRefresh.timeIntervalSince1970.rounded(.down)
        else { return false }
        var signIn = try CodexSignIn(credential: credential, slot: slot)
        signIn.keep(from: whole)
        try home.write(signIn)
        return true
    }

    /// The slot holding the account of `file`, if any.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func ownerSlot(of file: CodexAuthFile) throws -> Slot? {
        guard let account = file.accountID else { return nil }
        return try manager.registry.load().sortedSlots.first { $0.record.account.accountID == account }?.slot
    }
}
