import Foundation
import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@Suite struct RefreshRaceTests {
    /// 32 processes ask for the token the moment it falls due: one refresh, no reuse, one token.
    @Test func thirtyTwoProcessesRefreshOnce() async throws {
        let env = try await EmulatorHome(extraConfig: "[refresh]\nlead = 600\nlead-share = 1")
        try await env.server.hook("/_test/config", ["access_token_lifetime": 300])  // due at once (lead 600)
        try await env.signIn("work", email: "w@example.com")
        try await env.server.hook("/_test/config", ["access_token_lifetime": 3600])  // the refreshed one is not
        let before = try env.stored("work")
        let processes = try (0..<32).map { _ in try env.home.start(["token", "work"]) }
        var outputs: [String] = []
        for (p, out, _) in processes {
            outputs.append(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
            p.waitUntilExit()
            #expect(p.terminationStatus == 0)
        }
        #expect(Set(outputs).count == 1)
        let after = try env.stored("work")
        #expect(outputs[0] == after.tokens.accessToken + "\n")
        #expect(after.tokens.accessToken != before.tokens.accessToken)
        #expect(try await env.server.stat("refreshes_succeeded") == 1)
        #expect(try await env.server.stat("refresh_reused") == 0)
    }

    @Test func twoSlotsInterleavedRefreshOnceEach() async throws {
        let env = try await EmulatorHome(extraConfig: "[refresh]\nlead = 600\nlead-share = 1")
        try await env.server.hook("/_test/config", ["access_token_lifetime": 300])
        try await env.signIn("a", email: "a@example.com")
        try await env.signIn("b", email: "b@example.com")
        try await env.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let processes = try (0..<32).map { i in try env.home.start(["token", i % 2 == 0 ? "a" : "b"]) }
        var outputs: [String: Set<String>] = [:]
        for (i, (p, out, _)) in processes.enumerated() {
            outputs[i % 2 == 0 ? "a" : "b", default: []].insert(
                String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            )
            p.waitUntilExit()
            #expect(p.terminationStatus == 0)
        }
        #expect(outputs["a"]?.count == 1 && outputs["b"]?.count == 1)
        #expect(outputs["a"] != outputs["b"])
        #expect(try await env.server.stat("refreshes_succeeded") == 2)
        #expect(try await env.server.stat("refresh_reused") == 0)
    }

    /// Tasks of one process and CLI processes at once share the per-slot lock too.
    @Test func libraryTasksAndCLITogetherRefreshOnce() async throws {
        let env = try await EmulatorHome(extraConfig: "[refresh]\nlead = 600\nlead-share = 1")
        try await env.server.hook("/_test/config", ["access_token_lifetime": 300])
        try await env.signIn("work", email: "w@example.com")
        try await env.server.hook("/_test/config", ["access_token_lifetime": 3600])
        let manager = try env.manager()
        let slot = try Slot("work")
        let processes = try (0..<8).map { _ in try env.home.start(["token", "work"]) }
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try await manager.freshCredential(slot: slot).tokens.accessToken } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        var cli: Set<String> = []
        for (p, out, _) in processes {
            cli.insert(
                String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(
                    in: .newlines
                )
            )
            p.waitUntilExit()
        }
        #expect(tokens.count == 1 && tokens == cli)
        #expect(try await env.server.stat("refreshes_succeeded") == 1)
        #expect(try await env.server.stat("refresh_reused") == 0)
    }

    /// kill -9 at varying points during 200 refreshes: afterwards the slot (after `doctor --repair`
    /// when a recovery file was left) holds a refresh token the server accepts.
    @Test func killedRefreshesNeverKillTheSlot() async throws {
        let env = try await EmulatorHome()
        env.home.withoutSessionBus = true  // its doctor must see only this home (file store)
        try await env.signIn("work", email: "w@example.com")
        var killed = 0
        for i in 0..<200 {
            let (p, _, _) = try env.home.start(["refresh", "work"])
            usleep(UInt32((i * 7919) % 40_000))  // a different moment in each run: fault injection, not synchronisation
            if p.isRunning {
                kill(p.processIdentifier, SIGKILL)
                killed += 1
            }
            p.waitUntilExit()
        }
        #expect(killed > 0)
        let repair = try env.home.run("doctor", "--repair")
        #expect(repair.status == 0 || repair.status == 1)
        let final = try env.home.run("refresh", "work")
        #expect(final.status == 0, "\(final.stderr)")
        #expect(try env.record("work")?.state.name == "signed-in")
        #expect(try await env.server.stat("refresh_reused") == 0)
    }
}

@Suite struct RefreshTransitionTests {
    /// Each permanent answer turns the slot to reauthentication-required: exit 4, the dead refresh
    /// token dropped, the slot and its metadata kept.
    @Test(arguments: ["expire_refresh", "invalidate_refresh", "reuse", "status401", "status400", "status403"])
    func permanentFailures(_ kind: String) async throws {
        let env = try await EmulatorHome()
        let credential = try await env.signIn("work", email: "w@example.com", plan: "pro")
        let refresh = try #require(credential.tokens.refreshToken)
        switch kind {
        case "expire_refresh", "invalidate_refresh":
            try await env.server.hook("/_test/" + kind, ["refresh_token": refresh])
        case "reuse":
            // Another client rotates the token behind Lanyard's back, so Lanyard presents a used one.
            var config = ProviderConfig.openAI
            config.issuer = env.server.baseURL
            _ = try await OpenAIProvider(config: config, transport: URLSessionTransport()).refresh(
                refreshToken: refresh
            )
        default:
            try await env.server.hook(
                "/_test/fault",
                [
                    "endpoint": "oauth_token", "type": "status",
                    "status": Int(kind.dropFirst(6))!, "body": ["error": "nope"], "count": 1,
                ]
            )
        }
        let result = try env.home.run("refresh", "work")
        #expect(result.status == 4, "\(kind): \(result.stderr)")
        #expect(!result.stderr.contains(refresh))
        let record = try #require(try env.record("work"))
        #expect(record.state == .reauthenticationRequired)
        #expect(record.account.plan?.kind == .pro && record.account.email == "w@example.com")
        #expect(record.lastErrorCode != nil)
        #expect(try env.stored("work").tokens.refreshToken == nil)
        let token = try env.home.run("token", "work")
        #expect(token.status == 4)
        let status = try env.home.run("status", "work")
        #expect(status.status == 4)
    }

    @Test func invalidGrantFromAnRFC8628Provider() async throws {
        let server = try OAuthTestServer(.deviceServer)
        let home = TestHome()
        try home.writeConfig(
            """
            [store]
            backend = file
            [provider.test]
            type = device-code
            issuer = \(server.baseURL.absoluteString)
            client-id = lanyard-test-client
            scopes = openid email offline_access
            """
        )
        #expect(try home.run("store", "init", "--no-passphrase").status == 0)
        let paths = Paths(environment: home.environment)
        let manager = AccountManager(
            paths: paths,
            config: try ConfigFile.load(path: paths.configFile).config,
            openStore: { _, _ in EncryptedFileStore(paths: paths) },
            transport: URLSessionTransport(),
            sleeper: RecordingSleeper()
        )
        let (_, credential) = try await manager.signIn(slot: try Slot("gh"), providerID: "test") { event in
            if case .deviceCode(let auth) = event {
                Task { _ = try await server.hook("/_test/approve", ["user_code": auth.userCode]) }
            }
        }
        try await server.hook("/_test/revoke", ["refresh_token": credential.tokens.refreshToken!])
        let result = try home.run("refresh", "gh", "--json")
        #expect(result.status == 4)
        #expect(result.stdout.contains("reauthentication_required"))
        #expect(try Registry(paths: paths).loadInTest().slots[try Slot("gh")]?.lastErrorCode == "invalid_grant")
    }

    /// Transient faults leave the credential and the state as they were.
    /// "captive" is a captive portal's login page where the token endpoint should be; "trickle"
    /// a server sending one byte a second; "huge" 2 MB of padding, "huge50" 50 MB; "cut" half a
    /// token answer and then a reset; "invalid" a JSON content type over text that is not JSON;
    /// "refused" nothing listening.
    @Test(arguments: [
        "500", "503", "reset", "timeout", "429", "captive", "trickle", "huge", "huge50", "cut", "invalid", "refused",
    ])
    func transientFailures(_ kind: String) async throws {
        let env = try await EmulatorHome(
            extraConfig: "[backoff]\ninitial-delay = 0.01\nmaximum-delay = 0.05\n[http]\ntimeout = 1"
        )
        try await env.signIn("work", email: "w@example.com")
        let before = try env.stored("work")
        let recordBefore = try env.record("work")
        switch kind {
        case "reset":
            try await env.server.hook("/_test/fault", ["endpoint": "oauth_token", "type": "reset", "count": 1])
        case "timeout":
            try await env.server.hook(
                "/_test/fault",
                ["endpoint": "oauth_token", "type": "delay", "seconds": 3, "count": 1]
            )
        case "429":
            try await env.server.hook(
                "/_test/fault",
                ["endpoint": "oauth_token", "type": "rate_limit", "retry_after": 0, "count": 3]
            )
        case "captive":
            try await env.server.hook(
                "/_test/fault",
                [
                    "endpoint": "oauth_token", "type": "non_json", "count": 1,
                    "body": "<html><head><title>Sign in to Airport Wi-Fi</title></head></html>",
                ]
            )
        case "trickle":
            try await env.server.hook(
                "/_test/fault",
                ["endpoint": "oauth_token", "type": "trickle", "interval": 1, "count": 1]
            )
        case "huge":
            try await env.server.hook(
                "/_test/fault",
                ["endpoint": "oauth_token", "type": "huge", "json": false, "count": 1]
            )
        case "huge50":
            try await env.server.hook(
                "/_test/fault",
                ["endpoint": "oauth_token", "type": "huge", "size": 50 << 20, "count": 1]
            )
        case "cut": try await env.server.hook("/_test/fault", ["endpoint": "oauth_token", "type": "cut", "count": 1])
        case "invalid":
            try await env.server.hook(
                "/_test/fault",
                [
                    "endpoint": "oauth_token", "type": "non_json", "count": 1,
                    "content_type": "application/json", "body": "{\"access_token\": \"at-",
                ]
            )
        case "refused":
            // A port nothing listens on: bind one, note it, close it.
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in(
                sin_family: sa_family_t(AF_INET),
                sin_port: 0,
                sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")),
                sin_zero: (0, 0, 0, 0, 0, 0, 0, 0)
            )
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            close(fd)
            let config = try String(contentsOfFile: env.paths.configFile, encoding: .utf8)
            try env.home.writeConfig(
                config.replacingOccurrences(
                    of: env.server.baseURL.absoluteString,
                    with: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
                )
            )
        default:
            try await env.server.hook(
                "/_test/fault",
                ["endpoint": "oauth_token", "type": "status", "status": Int(kind)!, "count": 1]
            )
        }
        let result = try env.home.run("refresh", "work")
        #expect(result.status == 6, "\(kind): \(result.stderr)")
        #expect(try env.stored("work") == before)
        #expect(try env.record("work") == recordBefore)
        if kind == "429" { #expect(try await env.server.stat("requests.oauth_token") >= 3) }
    }
}

@Suite struct BackoffAgainstServerTests {
    func provider(_ server: OAuthTestServer, policy: BackoffPolicy, sleeper: RecordingSleeper) -> OpenAIProvider {
        var config = ProviderConfig.openAI
        config.issuer = server.baseURL
        return OpenAIProvider(
            config: config,
            transport: BackoffTransport(
                base: URLSessionTransport(),
                policy: policy,
                sleeper: sleeper,
                random: { 0.5 }
            )
        )
    }

    @Test func twoRetriesWithinTheJitterBounds() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook(
            "/_test/fault",
            ["endpoint": "usercode", "type": "status", "status": 429, "body": [:], "count": 5]
        )
        let sleeper = RecordingSleeper()
        await #expect(throws: AuthError.self) {
            _ = try await provider(server, policy: .default, sleeper: sleeper).authorize()
        }
        #expect(sleeper.recorded.count == 2)
        #expect(sleeper.recorded[0] >= 1 && sleeper.recorded[0] < 1.25)
        #expect(sleeper.recorded[1] >= 2 && sleeper.recorded[1] < 2.5)
        #expect(try await server.stat("requests.usercode") == 3)
    }

    @Test func retryAfterIsHonouredAndCapped() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook(
            "/_test/fault",
            ["endpoint": "usercode", "type": "rate_limit", "retry_after": 7, "count": 1]
        )
        let sleeper = RecordingSleeper()
        _ = try await provider(server, policy: .default, sleeper: sleeper).authorize()
        #expect(sleeper.recorded == [7])
        try await server.hook(
            "/_test/fault",
            ["endpoint": "usercode", "type": "rate_limit", "retry_after": 120, "count": 1]
        )
        let capped = RecordingSleeper()
        _ = try await provider(server, policy: .default, sleeper: capped).authorize()
        #expect(capped.recorded == [30])
    }

    @Test func disabledMeansNoRetry() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        try await server.hook(
            "/_test/fault",
            ["endpoint": "usercode", "type": "rate_limit", "retry_after": 1, "count": 1]
        )
        let sleeper = RecordingSleeper()
        await #expect(throws: AuthError.self) {
            _ = try await provider(server, policy: .disabled, sleeper: sleeper).authorize()
        }
        #expect(sleeper.recorded.isEmpty)
        #expect(try await server.stat("requests.usercode") == 1)
    }
}

@Suite struct RefreshDiskFaultTests {
    /// The store refuses the tokens a refresh obtained and the recovery file takes them: exit 5
    /// (the store failed; the sign-in is intact) with its own code, and `doctor --repair` stores
    /// them once the store works. No token is spent twice.
    @Test func refreshedTokensTheStoreRefusesWaitInTheRecoveryFile() async throws {
        let env = try await EmulatorHome()
        env.home.withoutSessionBus = true  // its doctor must see only this home (file store)
        let before = try await env.signIn("work", email: "w@example.com")
        // The store's lock taken by a folder: every write fails, reads still work.
        let data = env.paths.dataDirectory
        try? FileManager.default.removeItem(atPath: data + "/store.age.lock")
        try FileManager.default.createDirectory(atPath: data + "/store.age.lock", withIntermediateDirectories: true)

        let failed = try env.home.run("refresh", "work", "--json")
        #expect(failed.status == 5, "\(failed.stdout) \(failed.stderr)")
        #expect(failed.stdout.contains(ErrorCode.refreshedTokensInRecoveryFile.rawValue), "\(failed.stdout)")
        #expect(failed.stdout.contains("they are kept in this recovery file"), "\(failed.stdout)")
        #expect(try env.stored("work").tokens.refreshToken == before.tokens.refreshToken)

        try FileManager.default.removeItem(atPath: data + "/store.age.lock")
        let repair = try env.home.run("doctor", "--repair")
        #expect(repair.status == 0, "\(repair.stdout) \(repair.stderr)")
        #expect(try env.stored("work").tokens.refreshToken != before.tokens.refreshToken)
        let again = try env.home.run("refresh", "work")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try await env.server.stat("refresh_reused") == 0)
    }

    /// The server has rotated the refresh token when the disk refuses both the recovery file and
    /// the store: the new tokens wait in the kernel keyring (memory), doctor names them, and
    /// `doctor --repair` puts them in the store once the disk works again. No token is spent twice.
    @Test func refreshedTokensTheDiskRefusesWaitInTheKernelKeyring() async throws {
        let env = try await EmulatorHome()
        env.home.withoutSessionBus = true  // its doctor must see only this home (file store)
        let before = try await env.signIn("work", email: "w@example.com")
        let slot = try Slot("work")
        let state = env.paths.stateDirectory
        let data = env.paths.dataDirectory
        // The recovery folder's name taken by a file, and the store's lock by a folder: every write
        // of either fails, reads still work.
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: state + "/recovery", contents: Data("not a folder".utf8))
        try? FileManager.default.removeItem(atPath: data + "/store.age.lock")
        try FileManager.default.createDirectory(atPath: data + "/store.age.lock", withIntermediateDirectories: true)
        defer { RefreshEscrow.remove(slot: slot, paths: env.paths) }

        let failed = try env.home.run("refresh", "work")
        #expect(failed.status == 5, "the store failed; the sign-in is intact: \(failed.stderr)")
        #expect(failed.stderr.contains("they wait in memory, in the kernel keyring"), "\(failed.stderr)")
        let logged = LanyardStore.EventLog(paths: env.paths).read().filter { $0["event"]?.string == "error" }.map {
            $0["code"]?.string
        }
        #expect(logged == [ErrorCode.refreshedTokensInKernelKeyring.rawValue], "\(logged)")
        let waiting = try #require(RefreshEscrow.get(slot: slot, paths: env.paths))
        let kept = try Credential.decode(waiting, source: "escrow")
        #expect(kept.tokens.refreshToken != before.tokens.refreshToken)
        #expect(try env.stored("work").tokens.refreshToken == before.tokens.refreshToken)
        let doctor = try env.home.run("doctor", "--json")
        #expect(doctor.stdout.contains("refreshed tokens wait in recovery files for: work"), "\(doctor.stdout)")

        // The disk works again.
        try FileManager.default.removeItem(atPath: state + "/recovery")
        try FileManager.default.removeItem(atPath: data + "/store.age.lock")
        let repair = try env.home.run("doctor", "--repair")
        #expect(repair.status == 0, "\(repair.stdout) \(repair.stderr)")
        #expect(try env.stored("work").tokens.refreshToken == kept.tokens.refreshToken)
        #expect(RefreshEscrow.get(slot: slot, paths: env.paths) == nil)
        let again = try env.home.run("refresh", "work")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try await env.server.stat("refresh_reused") == 0)
    }
}
