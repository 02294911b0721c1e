import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore

/// Keeps slots and Codex homes in step without ever presenting a refresh token twice.
public struct CodexSync: Sendable {
    public let manager: AccountManager

    public init(manager: AccountManager) { self.manager = manager }

    /// Copies tokens Codex rotated in `home` back into `slot` when they belong to its account
    /// (matched by account id) and are newer than the slot's. Runs under the slot's refresh lock.
    /// - Returns: true when the slot took the newer tokens.
    @discardableResult
    public func copyBack(from home: CodexHome, into slot: Slot) async throws -> Bool {
        guard let live = try home.read() else { return false }
        guard let record = try manager.registry.load().slots[slot], record.provider == "openai" || manager.config.providers[record.provider]?.kind == .openai else {
            return false
        }
        let lock = try await SlotLock.acquire(slot: slot, paths: manager.paths)
        defer { withExtendedLifetime(lock) {} }
        let store = try manager.openStore(record.backend, false)
        let stored = try store.get(slot)
        guard let account = stored.account.accountID, live.accountID == account else { return false }
        // auth.json keeps whole seconds, so compare at that precision: tokens Codex rotated are at
        // least as recent as the slot's; an older auth.json (Lanyard refreshed since) is ignored.
        let storedSecond = ((stored.lastRefresh ?? .distantPast).timeIntervalSince1970).rounded(.down)
        guard live.refreshToken != stored.tokens.refreshToken, live.lastRefresh.timeIntervalSince1970 >= storedSecond else { return false }
        var updated = live.credential(provider: stored.provider, expiresAt: nil)
        updated.account = stored.account.merging(updated.account)
        try store.put(updated, for: slot)
        try manager.registry.update { doc in
            doc.slots[slot]?.state = .signedIn(expiresAt: updated.tokens.expiresAt)
            doc.slots[slot]?.lastRefresh = updated.lastRefresh
            doc.slots[slot]?.lastErrorCode = nil
        }
        return true
    }

    /// Writes `slot`'s credential (refreshed first when due) as `home`'s auth.json.
    public func export(slot: Slot, to home: CodexHome) async throws -> CodexAuthFile {
        let credential = try await manager.freshCredential(slot: slot)
        let file = try CodexAuthFile(credential: credential, slot: slot)
        try home.write(file)
        return file
    }
}

extension AccountInfo {
    /// These fields, with gaps filled from `other`.
    func merging(_ other: AccountInfo) -> AccountInfo {
        AccountInfo(email: email ?? other.email, userID: userID ?? other.userID, accountID: accountID ?? other.accountID,
                    plan: other.plan ?? plan, isFedRAMPAccount: isFedRAMPAccount || other.isFedRAMPAccount)
    }
}
