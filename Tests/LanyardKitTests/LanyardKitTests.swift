import Foundation
import LanyardAuth
import LanyardCore
import LanyardKit
import LanyardStore
import LanyardTestSupport
import Observation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A home pointing the openai provider at the emulator, with a file store.
struct KitHome {
    let server: OAuthTestServer
    let home = TestHome()

    init(extraConfig: String = "") throws {
        server = try OAuthTestServer(.chatgptEmulator)
        try home.useEmulator(server, extraConfig: extraConfig)
    }

    func configuration(slot: String? = nil) -> Configuration {
        Configuration(slot: slot, environment: home.environment, workingDirectory: home.root)
    }
}

@Suite struct AuthSessionTests {
    @Test func publishesTheDocumentedStateSequence() async throws {
        try await server0Sequence()
    }

    func server0Sequence() async throws {
        let env = try KitHome()
        try await env.server.hook("/_test/config", ["interval": 0])
        let session = try AuthSession(configuration: env.configuration(slot: "work"))
        #expect(session.state == .signedOut)
        let server = env.server
        let states = session.states  // subscribed before the sign-in starts
        let collector = Task {
            var seen: [AuthState] = []
            for await state in states {
                seen.append(state)
                if case .awaitingDeviceCode(let code, _) = state {
                    _ = try? await server.hook(
                        "/_test/approve",
                        ["user_code": code, "email": "kit@example.com", "plan": "team"]
                    )
                }
                if case .signedIn = state { break }
            }
            return seen
        }
        try await session.startDeviceCodeSignIn()
        let seen = await collector.value
        #expect(seen.map(\.name) == ["signed-out", "signing-in", "awaiting-device-code", "signed-in"])
        #expect(session.accountInfo?.email == "kit@example.com" && session.accountInfo?.plan?.kind == .team)
        if case .completed = session.deviceLinkState {
        } else {
            Issue.record("deviceLinkState \(session.deviceLinkState)")
        }
        #expect(session.slot?.name == "work")
        #expect(session.fleetSignIn == nil)  // a slot of this machine alone

        // A revoked session: refreshAuth moves it to reauthenticationRequired.
        try await env.server.hook("/_test/invalidate_refresh", ["all": true])
        await #expect(throws: ClientError.self) { try await session.refreshAuth() }
        #expect(session.state == .reauthenticationRequired)
        try await session.signOut()
        #expect(session.state == .signedOut)
    }

    @Test func observationSeesStateChanges() async throws {
        let env = try KitHome()
        try await env.server.hook("/_test/config", ["interval": 0])
        let session = try AuthSession(configuration: env.configuration(slot: "obs"))
        final class Flag: @unchecked Sendable { var changed = false }
        let flag = Flag()
        withObservationTracking {
            _ = session.state
        } onChange: {
            flag.changed = true
        }
        let server = env.server
        let approve = Task {
            for await state in session.states {
                if case .awaitingDeviceCode(let code, _) = state {
                    _ = try? await server.hook("/_test/approve", ["user_code": code])
                    break
                }
            }
        }
        try await session.startDeviceCodeSignIn()
        await approve.value
        #expect(flag.changed)
    }

    @Test func aFailedSignInEndsInFailedAndThrows() async throws {
        let env = try KitHome()
        try await env.server.hook("/_test/config", ["interval": 0])
        let session = try AuthSession(configuration: env.configuration(slot: "nope"))
        let server = env.server
        let deny = Task {
            for await state in session.states {
                if case .awaitingDeviceCode(let code, _) = state {
                    _ = try? await server.hook("/_test/deny", ["user_code": code])
                    break
                }
            }
        }
        await #expect(throws: AuthError.self) { try await session.startDeviceCodeSignIn() }
        await deny.value
        if case .failed = session.state {} else { Issue.record("state \(session.state)") }
        if case .authorizationDenied? = session.lastError {
        } else {
            Issue.record("lastError \(String(describing: session.lastError))")
        }
    }
}

@Suite struct ClientTests {
    func signedIn(_ env: KitHome, slot: String) async throws {
        try await env.server.hook("/_test/config", ["interval": 0])
        let session = try AuthSession(configuration: env.configuration(slot: slot))
        let server = env.server
        let approve = Task {
            for await state in session.states {
                if case .awaitingDeviceCode(let code, _) = state {
                    _ = try? await server.hook("/_test/approve", ["user_code": code, "email": "c@example.com"])
                    break
                }
            }
        }
        try await session.startDeviceCodeSignIn()
        await approve.value
    }

    @Test func sendAddsBearerAndAccountHeadersAndRetriesA401Once() async throws {
        let env = try KitHome()
        try await signedIn(env, slot: "api")
        let client = try Client(configuration: env.configuration(slot: "api"))
        try await env.server.hook("/_test/expire_access", ["all": true])
        let (data, response) = try await client.send(
            URLRequest(url: env.server.baseURL.appendingPathComponent("/backend-api/wham/usage"))
        )
        #expect(response.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("rate_limit"))
        #expect(try await env.server.stat("refreshes_succeeded") == 1)
    }

    @Test func eightTasksAndTheCLIRefreshOnce() async throws {
        let env = try KitHome(extraConfig: "[refresh]\nlead = 600\nlead-share = 1")
        try await env.server.hook("/_test/config", ["access_token_lifetime": 300])
        try await signedIn(env, slot: "race")
        try await env.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let client = try Client(configuration: env.configuration(slot: "race"))
        let processes = try (0..<4).map { _ in try env.home.start(["token", "race"]) }
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try await client.accessToken() } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        for (p, out, _) in processes {
            let cli = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                .trimmingCharacters(in: .newlines)
            p.waitUntilExit()
            #expect(tokens == [cli])
        }
        #expect(try await env.server.stat("refreshes_succeeded") == 1)
        #expect(try await env.server.stat("refresh_reused") == 0)
    }

    @Test func usageLimitAndHTTPErrorsAreTyped() async throws {
        let env = try KitHome(extraConfig: "[backoff]\nmax-retries = 0")
        try await signedIn(env, slot: "lim")
        let client = try Client(configuration: env.configuration(slot: "lim"))
        try await env.server.hook("/_test/usage_limit", ["resets_in_seconds": 60, "count": 1])
        await #expect(throws: ClientError.self) { _ = try await client.usage() }
        try await env.server.hook(
            "/_test/fault",
            [
                "endpoint": "usage", "type": "status", "status": 500,
                "body": ["code": "INTERNAL_SERVER_ERROR", "message": "boom"], "count": 1,
            ]
        )
        do {
            _ = try await client.usage()
            Issue.record("expected httpError")
        } catch ClientError.httpError(let status, let detail) {
            #expect(status == 500 && detail.code == "INTERNAL_SERVER_ERROR" && detail.message == "boom")
        }
        try await env.server.hook("/_test/fault", ["endpoint": "usage", "type": "non_json", "count": 1])
        await #expect(throws: ClientError.invalidResponse("usage: the body is not a JSON object")) {
            _ = try await client.usage()
        }
    }
}

@Suite struct AccountsExecTests {
    /// A program does what `lanyard exec` does: the command sees the slot's variables and a private
    /// CODEX_HOME holding the slot's auth.json; tokens it rotates there come back into the slot.
    @Test func runsACommandWithTheSlotsCredentialsAndCopiesRotatedTokensBack() async throws {
        let env = try KitHome()
        try await ClientTests().signedIn(env, slot: "kit")
        let accounts = try Accounts(configuration: env.configuration())
        let seen = env.home.root + "/seen"
        // The command reports what it got, then plays Codex rotating the refresh token.
        let script = """
            printf '%s\\n' "$LANYARD_ACCOUNT" "$CODEX_HOME" > \(seen)
            test -s "$CODEX_HOME/auth.json" || exit 9
            sed -i 's/"refresh_token" *: *"[^"]*"/"refresh_token": "rotated-by-the-command"/' "$CODEX_HOME/auth.json"
            sed -i 's/"last_refresh" *: *"[^"]*"/"last_refresh": "2099-01-01T00:00:00Z"/' "$CODEX_HOME/auth.json"
            exit 3
            """
        let outcome = try await accounts.exec(["/bin/sh", "-c", script], slot: try Slot("kit"))
        #expect(outcome.status == 3)
        #expect(outcome.rotatedTokensStoredIn?.name == "kit")
        #expect(outcome.copyBackFailure == nil)
        let lines = try String(contentsOfFile: seen, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.first == "kit")
        #expect(lines.count == 2 && !FileManager.default.fileExists(atPath: lines[1]), "the private folder is removed")

        await #expect(throws: ExecError.commandNotFound("lanyard-no-such-command")) {
            try await accounts.exec(["lanyard-no-such-command"], slot: try Slot("kit"))
        }
    }
}
