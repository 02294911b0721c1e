// The usage endpoint as a signed-in slot calls it (the parsing of its answers is in Usage.swift).
import LanyardCore
import LanyardStore
import LanyardSupport

extension AccountManager {
    /// Sends a request with the slot's credential: a fresh bearer token and `ChatGPT-Account-Id`,
    /// one refresh and retry on 401, backoff on 429, and failures mapped to ``ClientError``.
    package func authorizedSend(_ request: HTTPRequest, slot: Slot) async throws -> HTTPResponse {
        let transport = BackoffTransport(base: transport, policy: config.backoff, clock: clock, sleeper: sleeper)
        var credential = try await freshCredential(slot: slot)
        for attempt in 0..<2 {
            var signed = request
            for (name, value) in try credential.authorizationHeaders() { signed.headers[name] = value }
            let response: HTTPResponse
            do { response = try await transport.send(signed) } catch {
                throw ClientError.networkFailure(error.userFacingDescription)
            }
            if response.status == 401 && attempt == 0 {
                credential = try await freshCredential(slot: slot, force: true)
                continue
            }
            if response.status == 401 {
                throw ClientError.reauthenticationRequired(
                    slot: slot.name,
                    reason: "the server refused a freshly refreshed token"
                )
            }
            if let limit = UsageParser.limit(
                status: response.status,
                body: response.body,
                headers: response.headers,
                now: clock.now(),
                redacting: credential.tokens.secrets
            ) {
                await BlockingExecutor.shared.run { self.recordUsageLimit(limit, slot: slot) }
                throw ClientError.usageLimitReached(limit)
            }
            guard response.isSuccess else {
                throw ClientError.httpError(
                    status: response.status,
                    detail: ServerErrorDetail(body: response.body, redacting: credential.tokens.secrets)
                )
            }
            return response
        }
        throw ClientError.invalidResponse("unreachable")
    }

    /// Logs a `usage_limit_reached` a request of `slot` got (an `error` event with the reset time),
    /// so the agent's auto-switch (`[switch] auto = usage`) reacts without waiting for its next poll.
    package func recordUsageLimit(_ limit: UsageLimit, slot: Slot) {
        eventLog.appendError(
            .usageLimitReached,
            slot: slot,
            message: limit.summary,
            fields: ["resets_at": .date(limit.resetsAt)]
        )
    }

    /// The slot's usage from the provider's usage endpoint.
    package func usage(slot: Slot) async throws -> UsageReport {
        guard
            let record = try await BlockingExecutor.shared.run(.toCompletion, { try self.registry.load().slots[slot] })
        else {
            throw RegistryError.unknownSlot(slot)
        }
        guard let base = config.providers[record.provider]?.usageBaseURL else {
            // Not a server failure (exit 6): the slot's provider has no usage endpoint to ask.
            throw UsageErrorText(
                "\(slot.name)'s provider \(record.provider) has no usage endpoint "
                    + "(set usage-base-url in [provider.\(record.provider)] if it has one)"
            )
        }
        let response = try await authorizedSend(
            HTTPRequest(
                url: ProviderSupport.endpoint(base, "/backend-api/wham/usage"),
                headers: ["Accept": "application/json"]
            ),
            slot: slot
        )
        let now = clock.now()
        let report = try UsageParser.report(response.body, now: now)
        // Shared with every other Lanyard program (the tray follows the file): a cache, so a
        // failed write costs nothing but the sharing.
        let paths = self.paths
        await BlockingExecutor.shared.run { try? UsageState.record(report, slot: slot, at: now, paths: paths) }
        return report
    }
}
