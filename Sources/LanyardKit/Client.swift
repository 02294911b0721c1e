import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LanyardAuth
import LanyardCore
import LanyardStore

/// Makes requests as one slot's account: a fresh bearer token (refreshed before expiry, one
/// refresh per slot across processes), the `ChatGPT-Account-Id` header, one refresh and retry on
/// 401, backoff on 429, and failures as ``ClientError`` (`usageLimitReached`,
/// `reauthenticationRequired`, `httpError(status, detail)`, `invalidResponse`, …).
public final class Client: Sendable {
    let manager: AccountManager
    /// The slot this client acts as.
    public let slot: Slot

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
    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        guard let url = request.url else { throw ClientError.invalidResponse("the request has no URL") }
        var headers: [String: String] = [:]
        for (k, v) in request.allHTTPHeaderFields ?? [:] { headers[k] = v }
        let response = try await manager.authorizedSend(
            HTTPRequest(method: request.httpMethod ?? "GET", url: url, headers: headers, body: request.httpBody), slot: slot)
        guard let http = HTTPURLResponse(url: url, statusCode: response.status, httpVersion: "HTTP/1.1", headerFields: response.headers) else {
            throw ClientError.invalidResponse("could not build the HTTP response")
        }
        return (response.body, http)
    }
}
