import Foundation
import LanyardAuth
import LanyardNetwork

/// Makes requests as one slot's account: a fresh bearer token (refreshed before expiry, one
/// refresh per slot across processes), the `ChatGPT-Account-Id` header, one refresh and retry on
/// 401, backoff on 429, and failures as ``ClientError`` (`usageLimitReached`,
/// `reauthenticationRequired`, `httpError(status, detail)`, `invalidResponse`, …).
public final class Client: Sendable {
    let manager: AccountManager
    /// The slot this client acts as.
    public let slot: Slot

    /// A client for the slot `configuration` names (or resolves).
    /// - Throws: `RegistryError.noActiveSlot` when no slot is named and none is active.
    public init(configuration: Configuration = Configuration()) throws {
        let (manager, slot) = try configuration.resolve()
        guard let slot else { throw RegistryError.noActiveSlot }
        self.manager = manager
        self.slot = slot
    }

    /// A valid access token, refreshed first when due.
    public func accessToken() async throws -> String {
        try await manager.freshCredential(slot: slot).tokens.accessToken
    }

    /// The slot's usage windows.
    public func usage() async throws -> UsageReport { try await manager.usage(slot: slot) }

    /// Sends `request` as the slot's account.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await manager.authorizedSend(request, slot: slot)
    }

    /// Sends a Foundation `request` as the slot's account.
    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let converted = try HTTPRequest(request)
        let response = try await send(converted)
        return (response.body, try response.urlResponse(for: converted.url))
    }
}
