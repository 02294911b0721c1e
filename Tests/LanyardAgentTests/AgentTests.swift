import Foundation
import LanyardAuth
import LanyardCore
import LanyardDesktop
import LanyardIntegrations
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardAgent

/// Sleeps 2 ms instead of the device-code interval (sign-in through the library).
private struct QuickSleeper: Sleeper {
    func sleep(seconds: TimeInterval) async throws { try await Task.sleep(nanoseconds: 2_000_000) }
}

/// A home on the ChatGPT emulator with signed-in slots, and the built agent run against it.
private final class AgentHome: @unchecked Sendable {
    let server: OAuthTestServer
    let home = TestHome()
    /// Refresh 4 s before expiry (tokens in the refresh-chain tests live 6 s): a busy 2-core
    /// machine can delay a refresh by a second or more, and the chain checks that every refresh
    /// lands before its token expires (a 1.5 s lead on 3 s tokens missed by 18 ms under load).
    static let lead = 4.0

    init(extraConfig: String = "") throws {
        server = try OAuthTestServer(.chatgptEmulator)
        try home.useEmulator(
            server,
            extraConfig: """
                [refresh]
                lead = \(AgentHome.lead)
                lead-share = 1
                [agent]
                jitter = 0.5
                \(extraConfig)
                """
        )
    }

    var paths: Paths { Paths(environment: home.environment) }

    func manager(clock: any WallClock = SystemClock()) throws -> AccountManager {
        let config = try ConfigFile.load(path: paths.configFile).config
        let paths = self.paths
        return AccountManager(
            paths: paths,
            config: config,
            openStore: { _, _ in EncryptedFileStore(paths: paths) },
            transport: URLSessionTransport(timeout: 5),
            clock: clock,
            sleeper: QuickSleeper()
        )
    }

    func signIn(_ slots: [String], lifetime: Int, clock: any WallClock = SystemClock()) async throws {
        try await server.hook("/_test/config", ["access_token_lifetime": lifetime])
        let server = self.server
        for name in slots {
            _ = try await manager(clock: clock).signIn(slot: try Slot(name), providerID: "openai") { event in
                if case .deviceCode(let auth) = event {
                    Task {
                        _ = try await server.hook(
                            "/_test/approve",
                            ["user_code": auth.userCode, "email": "\(name)@example.com"]
                        )
                    }
                }
            }
        }
    }

    func refreshesOnServer() async throws -> Int { try await server.stat("refreshes_succeeded") }

    var events: [JSONValue] { EventLog(paths: paths).read() }

    func refreshEvents() -> [JSONValue] { events.filter { $0["event"]?.string == "refresh" } }

    /// Starts `lanyard agent` and waits for its start line on stderr.
    func startAgent(_ extra: [String] = [], environment: [String: String] = [:]) async throws -> Process {
        let (p, _, err) = try home.start(["agent"] + extra, extraEnvironment: environment)
        var said = ""
        do {
            _ = try await eventually("the agent has started") {
                said += availableText(err)
                if !said.contains("started") && !p.isRunning {
                    said += availableText(err)
                    throw ServerError("the agent exited (\(p.terminationStatus)) before it started: \(said)")
                }
                return said
            } until: {
                $0.contains("started")
            }
        } catch {
            if p.isRunning { p.terminate() }
            throw error
        }
        // Keep draining stderr so the agent never blocks on a full pipe.
        DispatchQueue.global().async { _ = err.fileHandleForReading.readDataToEndOfFile() }
        return p
    }

    func stop(_ p: Process) {
        p.terminate()
        p.waitUntilExit()
    }
}

/// Keeps the process busy-free for `seconds` of wall time: the observation window of a test
/// that measures what a long-running agent does over time (not a synchronisation).
private func observe(seconds: TimeInterval) { usleep(UInt32(seconds * 1_000_000)) }

@Suite(.serialized) struct AgentTests {
    /// Checks the refresh log of each slot: every refresh happened inside its token's refresh
    /// window (after it fell due, before it expired) and continues the chain from the previous
    /// token, so there was exactly one refresh per token lifetime and the slot was never invalid.
    private func assertOneRefreshPerLifetime(
        _ env: AgentHome,
        slots: [String],
        initial: [String: Double],
        minimum: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let refreshes = env.refreshEvents()
        let onServer = try await env.refreshesOnServer()
        #expect(
            onServer == refreshes.count,
            "every refresh the server made is logged once",
            sourceLocation: sourceLocation
        )
        for slot in slots {
            let mine = refreshes.filter { $0["slot"]?.string == slot }.sorted {
                ($0["ts"]?.number ?? 0) < ($1["ts"]?.number ?? 0)
            }
            #expect(mine.count >= minimum, "\(slot) refreshed often enough", sourceLocation: sourceLocation)
            var expiry = initial[slot]!
            for event in mine {
                let ts = event["ts"]!.number!
                let previous = event["previous_expires_ts"]!.number!
                // The store keeps expiries in whole seconds; the logged expiry is rounded to the
                // millisecond, which can carry X.9996 up to the next second.
                let continues = [expiry, expiry - 0.001].contains { abs(previous - $0.rounded(.down)) < 0.002 }
                #expect(
                    continues,
                    "\(slot): refresh continues the chain (no double, none missed)",
                    sourceLocation: sourceLocation
                )
                #expect(
                    ts >= previous - AgentHome.lead - 0.01,
                    "\(slot): not refreshed before it was due",
                    sourceLocation: sourceLocation
                )
                #expect(ts < previous, "\(slot): refreshed before the token expired", sourceLocation: sourceLocation)
                expiry = event["expires_ts"]!.number!
            }
        }
    }

    private func initialExpiries(_ env: AgentHome, _ slots: [String]) throws -> [String: Double] {
        let document = try Registry(paths: env.paths).load()
        var out: [String: Double] = [:]
        for slot in slots {
            out[slot] = ((document.slots[try Slot(slot)]!.expiresAt!.timeIntervalSince1970) * 1000).rounded() / 1000
        }
        return out
    }

    /// 5 slots with 6-second access tokens refreshed 4 s before expiry (one refresh every 2–2.5 s),
    /// kept valid for a minute by the agent's own schedule on a ManualClock: the test takes the
    /// agent's steps as ``RefreshAgent/run()`` would and advances the clock by each sleep, so the
    /// load on the machine cannot make a refresh late. Every refresh comes inside its token's
    /// refresh window and continues the chain from the previous token: one refresh per lifetime.
    @Test func agentKeepsFiveSlotsValidWithOneRefreshPerLifetime() async throws {
        let env = try AgentHome()
        let clock = ManualClock(Date())
        let slots = ["s1", "s2", "s3", "s4", "s5"]
        try await env.signIn(slots, lifetime: 6, clock: clock)
        let agent = RefreshAgent(
            manager: try env.manager(clock: clock),
            options: .init(jitter: 0.5, notify: false, hook: nil),
            diagnostics: { Issue.record("agent: \($0)") }
        )
        func expiries() throws -> [Slot: Date] {
            try Registry(paths: env.paths).load().slots.compactMapValues { $0.expiresAt }
        }
        var expiry = try expiries()
        let initial = expiry
        var refreshed: [Slot: Int] = [:]
        try agent.start()
        let end = clock.now() + 60
        var steps = 0
        while clock.now() < end, steps < 10_000 {
            steps += 1
            let step = try agent.nextStep()
            switch step {
            case .sleep(let seconds):
                clock.advance(by: max(seconds, 0.001))
            case .refresh(let due):
                for slot in due {
                    let before = try #require(expiry[slot])
                    #expect(
                        clock.now() >= before - AgentHome.lead - 0.01,
                        "\(slot.name): not refreshed before it was due"
                    )
                    #expect(clock.now() < before, "\(slot.name): refreshed before the token expired")
                    refreshed[slot, default: 0] += 1
                }
                await agent.perform(step)
                let after = try expiries()
                for slot in due { #expect(after[slot]! > expiry[slot]!, "\(slot.name): the refresh gave a new token") }
                expiry = after
            case .checkUsage:
                Issue.record("no usage checks without auto-switching")
            }
            for (slot, date) in expiry { #expect(date > clock.now(), "\(slot.name) is valid at every step") }
        }
        #expect(clock.now() >= end, "the schedule reached the end of the minute in \(steps) steps")
        // A refresh every 2 to 2.5 s of virtual time for a minute: at least 20 per slot, and the
        // server made exactly the refreshes the agent asked for, each continuing the chain.
        for slot in initial.keys {
            #expect(refreshed[slot, default: 0] >= 20, "\(slot.name) refreshed \(refreshed[slot, default: 0]) times")
        }
        #expect(try await env.refreshesOnServer() == refreshed.values.reduce(0, +))
        for slot in initial.keys {
            var chain = (initial[slot]!.timeIntervalSince1970 * 1000).rounded() / 1000
            for event in env.refreshEvents() where event["slot"]?.string == slot.name {
                // The store keeps expiries in whole seconds; the logged expiry is rounded to the
                // millisecond, which can carry X.9996 up to the next second.
                let previous = event["previous_expires_ts"]!.number!
                let continues = [chain, chain - 0.001].contains { abs(previous - $0.rounded(.down)) < 0.002 }
                #expect(continues, "\(slot.name): refresh continues the chain (no double, none missed)")
                chain = event["expires_ts"]!.number!
            }
        }
        #expect(!(env.events.contains { $0["event"]?.string == "error" }))
    }

    /// Nothing due: `--once` and a running agent make no request at all.
    /// The agent plans from the registry's boot-clock readings: a wall clock set forward a day
    /// refreshes nothing early, one set back an hour delays nothing.
    @Test func wallClockJumpsNeitherHurryNorDelayTheAgent() async throws {
        let env = try AgentHome(extraConfig: "")
        let clock = ManualClock(Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)))
        try await env.signIn(["a", "b"], lifetime: 3600, clock: clock)
        let agent = RefreshAgent(
            manager: try env.manager(clock: clock),
            options: .init(jitter: 0, notify: false, hook: nil),
            diagnostics: { _ in }
        )
        clock.jump(by: 86_400)
        #expect(try await agent.runOnce() == 0)
        #expect(try await env.refreshesOnServer() == 0, "a day forward on the wall clock is not a day of token life")
        clock.advance(by: 3_599)
        #expect(try await agent.runOnce() == 0)
        #expect(try await env.refreshesOnServer() == 2, "each slot refreshed once when its lead began")
        clock.jump(by: -3_600)
        clock.advance(by: 3_599)
        #expect(try await agent.runOnce() == 0)
        #expect(
            try await env.refreshesOnServer() == 4,
            "an hour back on the wall clock does not postpone the next refresh"
        )
        #expect(try await agent.runOnce() == 0)
        #expect(try await env.refreshesOnServer() == 4, "and nothing refreshes twice")
    }

    @Test func noRefreshWhenNothingIsDue() async throws {
        let env = try AgentHome()
        try await env.signIn(["a", "b"], lifetime: 3600)
        let once = try env.home.run("agent", "--once")
        #expect(once.status == 0, Comment(rawValue: once.stderr))
        let agent = try await env.startAgent()
        observe(seconds: 3)
        env.stop(agent)
        let count = try await env.refreshesOnServer()
        #expect(count == 0)
        #expect(env.refreshEvents().isEmpty)
    }

    /// `--once` refreshes exactly the slots that are due.
    @Test func onceRefreshesDueSlots() async throws {
        let env = try AgentHome()
        try await env.signIn(["due"], lifetime: 1)  // within the 4 s lead (lead-share 1): due at once
        try await env.signIn(["later"], lifetime: 3600)
        let once = try env.home.run("agent", "--once")
        #expect(once.status == 0, Comment(rawValue: once.stderr))
        let count = try await env.refreshesOnServer()
        #expect(count == 1)
        #expect(env.refreshEvents().compactMap { $0["slot"]?.string } == ["due"])
    }

    /// A second agent for the same user refuses to start; `--once` beside a running agent is a no-op.
    @Test func oneAgentPerUser() async throws {
        let env = try AgentHome()
        let agent = try await env.startAgent()
        let second = try env.home.run("agent")
        #expect(second.status == 1)
        #expect(second.stderr.contains("already running"), Comment(rawValue: second.stderr))
        let once = try env.home.run("agent", "--once")
        #expect(once.status == 0)
        env.stop(agent)
    }

    /// A refresh token revoked on the server: the transition is logged, a notification goes out on
    /// the session bus (seen by dbus-monitor: no notification service runs, and nothing breaks),
    /// and the hook receives the event.
    @Test func revokedRefreshTokenNotifiesLogsAndRunsHook() async throws {
        try requireTestKeyring()  // its private session bus, where the notification goes
        let hookFile = NSTemporaryDirectory() + "lanyard-hook-\(UUID().uuidString).jsonl"
        defer { unlink(hookFile) }
        let env = try AgentHome(extraConfig: "hook = cat >> '\(hookFile)'")
        try await env.signIn(["gone"], lifetime: 3)
        let monitor = Process()
        monitor.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-monitor")
        monitor.arguments = ["--session", "interface='org.freedesktop.Notifications',member='Notify'"]
        let monitorOut = Pipe()
        monitor.standardOutput = monitorOut
        monitor.standardError = FileHandle.nullDevice
        try monitor.run()
        defer { monitor.terminate() }
        final class Captured: @unchecked Sendable {
            let lock = NSLock()
            var text = ""
        }
        let captured = Captured()
        monitorOut.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            captured.lock.withLock { captured.text += String(decoding: data, as: UTF8.self) }
        }
        // dbus-monitor prints the NameAcquired/NameLost signals once it is a monitor.
        try await eventually("dbus-monitor has started") {
            captured.lock.withLock { captured.text }
        } until: {
            $0.contains("NameLost")
        }
        try await env.server.hook("/_test/invalidate_refresh", ["all": true])
        let agent = try await env.startAgent()
        try await eventually("the transition in the event log") {
            env.events
        } until: {
            $0.contains { $0["event"]?.string == "transition" && $0["slot"]?.string == "gone" }
        }
        try await eventually("the notification on the bus") {
            captured.lock.withLock { captured.text }
        } until: {
            $0.contains("sign in again to gone")
        }
        try await eventually("the hook") {
            (try? String(contentsOfFile: hookFile, encoding: .utf8)) ?? ""
        } until: {
            $0.contains("\"transition\"")
        }
        #expect(agent.isRunning, "a missing notification service breaks nothing")
        env.stop(agent)
        let transition = env.events.first { $0["event"]?.string == "transition" }!
        #expect(transition["to"]?.string == "reauthentication-required")
        #expect(transition["fix"]?.string == "lanyard login gone")
        let hookEvent = try JSONValue.parse(
            Data(
                String(contentsOfFile: hookFile, encoding: .utf8).split(separator: "\n")
                    .first { $0.contains("\"transition\"") }!.utf8
            )
        )
        #expect(hookEvent["slot"]?.string == "gone")
        #expect(hookEvent["fix"]?.string == "lanyard login gone")
        #expect(try Registry(paths: env.paths).loadInTest().slots[try Slot("gone")]?.state == .reauthenticationRequired)
        #expect(captured.lock.withLock { captured.text.contains("lanyard login gone") })
        #expect(try env.home.run("events").status == 0)
    }

    /// The agent killed with SIGKILL and restarted: no double refresh and no missed one.
    @Test func killedAndRestartedAgentNeitherDoublesNorMisses() async throws {
        let env = try AgentHome()
        let slots = ["k1", "k2", "k3", "k4", "k5"]
        try await env.signIn(slots, lifetime: 6)
        let initial = try initialExpiries(env, slots)
        let first = try await env.startAgent()
        observe(seconds: 7)
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let second = try await env.startAgent()
        observe(seconds: 8)
        env.stop(second)
        try await assertOneRefreshPerLifetime(env, slots: slots, initial: initial, minimum: 4)
    }

    /// `lanyard token` run over and over while the agent refreshes: still one refresh per lifetime.
    @Test func cliTokenDuringAgentRefreshes() async throws {
        let env = try AgentHome()
        try await env.signIn(["shared"], lifetime: 6)
        let initial = try initialExpiries(env, ["shared"])
        let agent = try await env.startAgent()
        let end = Date() + 8
        var runs = 0
        while Date() < end {
            let out = try env.home.run("token", "shared")
            #expect(out.status == 0, Comment(rawValue: out.stderr))
            runs += 1
        }
        env.stop(agent)
        #expect(runs > 5)
        try await assertOneRefreshPerLifetime(env, slots: ["shared"], initial: initial, minimum: 3)
    }

    /// An idle agent (nothing due for an hour) uses next to no CPU: ≤ 50 ms over a 5 s window
    /// (the issue's 60 s shortened for CI; it measures 0.0 ms over 20 s too, so nothing wakes it
    /// up). Prints the numbers and the RSS.
    @Test func idleAgentCPUAndMemory() async throws {
        let env = try AgentHome()
        try await env.signIn(["i1", "i2", "i3"], lifetime: 3600)
        let agent = try await env.startAgent()
        defer { env.stop(agent) }
        // LANYARD_IDLE_SECONDS=60 for the issue's full window.
        let window = ProcessInfo.processInfo.environment["LANYARD_IDLE_SECONDS"].flatMap(Double.init) ?? 5
        observe(seconds: 1)
        let before = try cpuMilliseconds(agent.processIdentifier)
        observe(seconds: window)
        let after = try cpuMilliseconds(agent.processIdentifier)
        let rss =
            try String(contentsOfFile: "/proc/\(agent.processIdentifier)/status", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.map(String.init) ?? "?"
        print("idle agent: CPU \(((after - before) * 100).rounded() / 100) ms over \(Int(window)) s; \(rss)")
        #expect(after - before <= 50)
        let count = try await env.refreshesOnServer()
        #expect(count == 0)
    }

    /// CPU time in ms: /proc/PID/task/*/schedstat (nanoseconds on CPU, summed over threads) when the kernel has it,
    /// else utime + stime from /proc/PID/stat (clock ticks).
    private func cpuMilliseconds(_ pid: Int32) throws -> Double {
        if let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"), !tasks.isEmpty {
            var ns = 0.0
            for task in tasks {
                let sched = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8)) ?? ""
                ns += sched.split(separator: " ").first.flatMap { Double($0) } ?? 0
            }
            if ns > 0 { return ns / 1_000_000 }
        }
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
        // After the command: state is field 3, utime 14, stime 15 (1-based) → indices 11, 12 here.
        let ticks = Int(fields[11])! + Int(fields[12])!
        return Double(ticks * 1000 / Int(sysconf(Int32(_SC_CLK_TCK))))
    }
}

@Suite struct StatusWatchTests {
    /// `status --watch --json` prints the slots, then a new line each time the registry changes
    /// (here: the agent's `--once` refresh of a due slot).
    @Test func statusWatchUpdatesOnChange() async throws {
        let env = try AgentHome()
        try await env.signIn(["w"], lifetime: 1)
        let (watch, out, _) = try env.home.start(["status", "--watch", "--json"])
        defer { watch.terminate() }
        final class Lines: @unchecked Sendable {
            let lock = NSLock()
            var text = ""
        }
        let lines = Lines()
        out.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            lines.lock.withLock { lines.text += String(decoding: data, as: UTF8.self) }
        }
        func firstExpiry(_ doc: JSONValue) -> String? {
            if case .array(let slots)? = doc["slots"] { return slots.first?["expires_at"]?.string }
            return nil
        }
        func documents() -> [JSONValue] {
            lines.lock.withLock { lines.text }.split(separator: "\n").compactMap { try? JSONValue.parse(Data($0.utf8)) }
        }
        try await eventually("the first view") {
            documents()
        } until: {
            $0.count >= 1
        }
        let before = firstExpiry(documents()[0])
        try await env.server.hook("/_test/config", ["access_token_lifetime": 3600])
        #expect(try env.home.run("agent", "--once").status == 0)
        try await eventually("the updated view") {
            documents()
        } until: {
            $0.count >= 2
        }
        let after = firstExpiry(documents().last!)
        #expect(before != after)
        #expect(watch.isRunning)
    }
}

@Suite struct AgentRegistryTests {
    /// A slot signed in by another process while the agent sleeps is picked up (inotify on the
    /// registry) and refreshed when due; a removed slot is dropped without errors.
    @Test func agentNoticesSlotsAddedAndRemoved() async throws {
        let env = try AgentHome()
        try await env.signIn(["old"], lifetime: 3600)
        let agent = try await env.startAgent()
        try await env.signIn(["new"], lifetime: 3)
        try await eventually("the new slot's first refresh") {
            env.refreshEvents()
        } until: {
            $0.contains { $0["slot"]?.string == "new" }
        }
        #expect(try env.home.run("remove", "new", "--yes").status == 0)
        let count = try await env.refreshesOnServer()
        // Nothing more for the removed slot, and the agent keeps running (a 2 s observation window).
        observe(seconds: 2)
        #expect(agent.isRunning)
        env.stop(agent)
        #expect(agent.terminationStatus == 0)
        let after = try await env.refreshesOnServer()
        #expect(after - count <= 1, "at most one refresh was in flight when the slot went")
        #expect(!(env.refreshEvents().contains { $0["slot"]?.string == "old" }))
    }
}

/// A slot holding a personal access token is never planned, however old its last refresh: the
/// registry's clock alone (no expiry, last refresh past max-age) would make it due at every turn.
@Suite struct AgentNonRotatingTests {
    @Test func aPersonalAccessTokenSlotIsNeverDue() async throws {
        let env = try AgentHome(extraConfig: "[refresh]\nmax-age = 60")
        let token = try #require(
            try await env.server.hook("/_test/personal_access_token", ["email": "ci@example.com"])["token"] as? String
        )
        let manager = try env.manager()
        _ = try await manager.signIn(slot: try Slot("ci"), providerID: "openai", accessToken: token)
        try await env.signIn(["oauth"], lifetime: 3600)
        let longAgo = Date().addingTimeInterval(-7200)
        try manager.registry.updateInTest { doc in
            for slot in doc.slots.keys {
                doc.slots[slot]?.lastRefresh = longAgo
                doc.slots[slot]?.lastRefreshBoot = nil
            }
        }
        let agent = RefreshAgent(
            manager: manager,
            options: .init(jitter: 0, notify: false, hook: nil),
            diagnostics: { _ in }
        )
        let document = try manager.registry.loadInTest()
        let plan = agent.plan(document, now: Date(), ignoreJitter: true)
        // Nothing is due: the OAuth slot's token lives an hour, and the token slot is skipped.
        #expect(plan.due.isEmpty)
        #expect(plan.nextWake.map { $0 > Date().addingTimeInterval(600) } == true)
        // Were it planned like any slot, its last refresh alone (past max-age) would make it due.
        var rotating = document
        rotating.slots[try Slot("ci")]?.rotates = true
        #expect(agent.plan(rotating, now: Date(), ignoreJitter: true).due == [try Slot("ci")])
        let once = try env.home.run("agent", "--once")
        #expect(once.status == 0, Comment(rawValue: once.stderr))
        #expect(try await env.server.stat("refresh_requests") == 0)
        #expect(try manager.registry.loadInTest().slots[try Slot("ci")]?.state == .signedIn(expiresAt: nil))
    }
}

@Suite struct AgentRetryTests {
    /// A transient failure (HTTP 503 from the token endpoint) is logged as an error and retried
    /// after a backoff delay; the retry succeeds and the slot stays signed in.
    @Test func transientFailureIsRetriedWithBackoff() async throws {
        let env = try AgentHome()
        try await env.signIn(["flaky"], lifetime: 1)  // due at once (lead 4)
        try await env.server.hook("/_test/config", ["access_token_lifetime": 3600])
        try await env.server.hook(
            "/_test/fault",
            ["endpoint": "oauth_token", "type": "status", "status": 503, "count": 1]
        )
        let agent = try await env.startAgent()
        try await eventually("the retried refresh") {
            env.refreshEvents()
        } until: {
            !$0.isEmpty
        }
        env.stop(agent)
        let errors = env.events.filter { $0["event"]?.string == "error" }
        #expect(errors.count == 1)
        #expect(errors.first?["attempt"]?.number == 1)
        #expect((errors.first?["retry_in"]?.number ?? 0) >= 1)
        let errorTime = errors.first?["ts"]?.number ?? 0
        let refreshTime = env.refreshEvents().first?["ts"]?.number ?? 0
        #expect(refreshTime - errorTime >= 0.9, "the retry waited for its backoff delay")
        #expect(try await env.refreshesOnServer() == 1)
        #expect(try Registry(paths: env.paths).loadInTest().slots[try Slot("flaky")]?.state.name == "signed-in")
    }
}

@Suite struct EventLogTests {
    /// The agent's and the event log's config keys, with their defaults and bounds.
    @Test func agentAndEventsConfigKeys() throws {
        let defaults = try ConfigFile.parse(Data(), path: "config.ini")
        #expect(defaults.config.agentJitter == 30)
        #expect(defaults.config.agentHook == nil)
        #expect(defaults.config.agentNotify)
        #expect(defaults.config.eventsMaxBytes == 1 << 20)
        let text = "[agent]\njitter = 5\nhook = logger -t lanyard\nnotify = false\n[events]\nmax-bytes = 65536\n"
        let loaded = try ConfigFile.parse(Data(text.utf8), path: "config.ini")
        #expect(loaded.warnings.isEmpty)
        #expect(loaded.config.agentJitter == 5)
        #expect(loaded.config.agentHook == "logger -t lanyard")
        #expect(!loaded.config.agentNotify)
        #expect(loaded.config.eventsMaxBytes == 65536)
        #expect(throws: ConfigError.self) {
            try ConfigFile.parse(Data("[events]\nmax-bytes = 10\n".utf8), path: "config.ini")
        }
    }

    /// The log rotates past its cap, keeps one old generation, and `lanyard events` prints both;
    /// `--json` gives one object a line and `-n` the last N.
    @Test func rotationAndEventsCommand() throws {
        let home = TestHome()
        try home.writeConfig("[events]\nmax-bytes = 4096\n")
        let log = EventLog(paths: Paths(environment: home.environment), maxBytes: 4096)
        for i in 0..<100 { log.append("refresh", slot: try Slot("s\(i % 3)"), fields: ["n": .number(Double(i))]) }
        var st = stat()
        let current = stat(log.path, &st)
        #expect(current == 0)
        #expect(Int(st.st_size) <= 4096)
        let rotated = stat(log.rotatedPath, &st)
        #expect(rotated == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        let all = log.read()
        #expect(all.last?["n"]?.number == 99)
        let numbers = all.compactMap { $0["n"]?.number }
        #expect(numbers == numbers.sorted(), "oldest first across the rotation")
        let json = try home.run("events", "--json", "-n", "5")
        #expect(json.status == 0, Comment(rawValue: json.stderr))
        let lines = json.stdout.split(separator: "\n")
        #expect(lines.count == 5)
        #expect(try JSONValue.parse(Data(lines.last!.utf8))["n"]?.number == 99)
        let human = try home.run("events", "-n", "1")
        #expect(human.stdout.contains("refresh"), Comment(rawValue: human.stdout))
        #expect(human.stdout.contains("s0"), Comment(rawValue: human.stdout))
    }
}

/// Notifications sent on the private session bus, as dbus-monitor sees them.
private final class NotificationMonitor: @unchecked Sendable {
    private let process = Process()
    private let lock = NSLock()
    private var captured = ""

    init() async throws {
        try requireTestKeyring()  // its private session bus
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-monitor")
        process.arguments = ["--session", "interface='org.freedesktop.Notifications',member='Notify'"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        out.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self else { return }
            self.lock.withLock { self.captured += String(decoding: data, as: UTF8.self) }
        }
        // dbus-monitor prints the NameAcquired/NameLost signals once it is a monitor.
        try await eventually("dbus-monitor has started") { [self] in
            text
        } until: {
            $0.contains("NameLost")
        }
    }

    var text: String { lock.withLock { captured } }

    func count(_ needle: String) -> Int { text.components(separatedBy: needle).count - 1 }

    // Foundation traps on terminating a process that already ended (a monitor that never started).
    deinit { if process.isRunning { process.terminate() } }
}

/// `[switch] auto = usage`: the agent switches away from an active slot that ran out, against the
/// ChatGPT emulator's usage endpoint (`/_test/usage`, `/_test/usage_limit`).
@Suite(.serialized) struct AutoSwitchTests {
    /// Slots a, b and c signed in (a active), with a's, b's and c's busiest windows at these percentages.
    private func home(_ percents: [String: Double], extraConfig: String = "", poll: Int = 1) async throws -> AgentHome {
        let env = try AgentHome(
            extraConfig: """
                \(extraConfig)
                [switch]
                auto = usage
                poll = \(poll)
                """
        )
        try await env.signIn(["a", "b", "c"], lifetime: 3600)
        for (slot, percent) in percents { try await setUsage(env, slot, percent) }
        return env
    }

    private func accountID(_ env: AgentHome, _ slot: String) throws -> String {
        try #require(try Registry(paths: env.paths).load().slots[try Slot(slot)]?.account.accountID)
    }

    /// The slot's 5-hour window at `percent`, resetting in `resetIn` seconds.
    private func setUsage(_ env: AgentHome, _ slot: String, _ percent: Double, resetIn: Int = 7200) async throws {
        try await env.server.hook(
            "/_test/usage",
            [
                "account_id": try accountID(env, slot),
                "primary_window": [
                    "used_percent": percent, "limit_window_seconds": 18000,
                    "reset_after_seconds": resetIn,
                ],
            ]
        )
    }

    /// Waits until the server has answered `count` usage requests.
    private func waitForRequests(_ env: AgentHome, atLeast count: Int, _ what: String) async throws {
        try await eventually(what) {
            try await env.server.stat("usage_requests")
        } until: {
            $0 >= count
        }
    }

    private func active(_ env: AgentHome) throws -> String? { try Registry(paths: env.paths).load().active?.name }

    private func events(_ env: AgentHome, _ kind: String) -> [JSONValue] {
        env.events.filter { $0["event"]?.string == kind }
    }

    /// The active slot at 96 %: within one poll the agent switches to the slot with the most
    /// headroom, logs a `switch` event, shows a notification, runs the hook and rewrites Codex's
    /// auth.json; a pinned folder keeps its slot; later polls (counted on the server) switch
    /// nothing more, not even back to a once it has reset.
    @Test func agentSwitchesAtTheThresholdWithinOnePoll() async throws {
        let hookFile = NSTemporaryDirectory() + "lanyard-hook-\(UUID().uuidString).jsonl"
        defer { unlink(hookFile) }
        let env = try await home(
            ["a": 96, "b": 50, "c": 20],
            extraConfig: "hook = cat >> '\(hookFile)'\n[integrations]\ncodex = true"
        )
        let codexHome = env.home.root + "/codex"
        try FileManager.default.createDirectory(atPath: codexHome, withIntermediateDirectories: true)
        let pinned = env.home.root + "/project"
        try FileManager.default.createDirectory(atPath: pinned, withIntermediateDirectories: true)
        try "a\n".write(toFile: pinned + "/.lanyard", atomically: true, encoding: .utf8)
        #expect(try active(env) == "a")
        let monitor = try await NotificationMonitor()
        let agent = try await env.startAgent(environment: ["CODEX_HOME": codexHome])
        defer { env.stop(agent) }
        try await eventually("the switch") {
            env.events
        } until: {
            $0.contains { $0["event"]?.string == "switch" }
        }
        #expect(try active(env) == "c")
        let event = try #require(events(env, "switch").first)
        #expect(event["from"]?.string == "a" && event["to"]?.string == "c" && event["slot"]?.string == "c")
        #expect(event["reason"]?.string == "usage" && event["trigger"]?.string == "poll")
        #expect(
            event["window"]?.string == "5h" && event["window_name"]?.string == "5 h"
                && event["limit_window_seconds"]?.number == 18000
        )
        #expect(event["used_percent"]?.number == 96 && event["to_used_percent"]?.number == 20)
        #expect(event["resets_at"]?.string != nil)
        #expect(event["source"]?.string == "agent")
        try await eventually("a notification of the switch") {
            monitor.text
        } until: {
            $0.contains("Switched Codex from a to c")
        }
        #expect(monitor.text.contains("a is at 96 % of its 5 h window until "))
        try await eventually("the hook") {
            (try? String(contentsOfFile: hookFile, encoding: .utf8)) ?? ""
        } until: {
            $0.contains("\"switch\"")
        }
        let auth = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: codexHome + "/auth.json")))
        #expect(
            auth["tokens"]?["account_id"]?.string == (try accountID(env, "c")),
            "Codex's auth.json follows the switch"
        )
        let (status, which, _) = try runProcess(
            builtBinary("lanyard"),
            ["which"],
            environment: env.home.environment,
            workingDirectory: pinned
        )
        #expect(status == 0 && which.hasPrefix("a"), "the pinned folder keeps its slot: \(which)")

        // a resets; c stays under the threshold: five more polls, no second switch.
        try await setUsage(env, "a", 0)
        let requests = try await env.server.stat("usage_requests")
        try await waitForRequests(env, atLeast: requests + 5, "five more polls")
        #expect(events(env, "switch").count == 1)
        #expect(try active(env) == "c")
        #expect(monitor.count("Switched Codex") == 1)
        let status2 = try env.home.run("status", "--json")
        let json = try JSONValue.parse(Data(status2.stdout.utf8))
        #expect(json["auto_switch"]?["auto"]?.string == "usage")
        #expect(json["auto_switch"]?["last_switch"]?["to"]?.string == "c")
        let human = try env.home.run("status")
        #expect(human.stdout.contains("a → c"), Comment(rawValue: human.stdout))
    }

    /// A `usage_limit_reached` that `lanyard ask` got for the active slot switches at once: the
    /// agent's poll is an hour, and it has made its one check at start.
    @Test func aUsageLimitSeenByAskSwitchesWithoutWaitingForAPoll() async throws {
        let env = try await home(["a": 10, "b": 30, "c": 60], poll: 3600)
        let agent = try await env.startAgent()
        defer { env.stop(agent) }
        try await waitForRequests(env, atLeast: 1, "the agent's first check")
        try await env.server.hook(
            "/_test/usage_limit",
            ["account_id": try accountID(env, "a"), "resets_in_seconds": 1800]
        )
        let ask = try env.home.run("ask", "hello")
        #expect(ask.status == 7, Comment(rawValue: ask.stderr))
        let logged = env.events.first { $0["code"]?.string == "usage_limit_reached" }
        #expect(logged?["slot"]?.string == "a" && logged?["resets_at"]?.string != nil)
        try await eventually("the switch") {
            env.events
        } until: {
            $0.contains { $0["event"]?.string == "switch" }
        }
        let event = try #require(events(env, "switch").first)
        #expect(
            event["trigger"]?.string == "usage_limit_reached" && event["from"]?.string == "a"
                && event["to"]?.string == "b"
        )
        #expect(event["used_percent"]?.number == 100)
        #expect(try active(env) == "b")
    }

    /// Weekly-only accounts (primary = 7 days, no 5-hour window): a at 100 % of its weekly window
    /// (the server's `limit_reached` left false) is at its limit; the agent switches to the slot
    /// whose busiest window is least used (c's monthly window at 30 %, over b's weekly 60 %).
    /// Without the Codex integration the notice says the active account switched, not Codex; the
    /// private session bus has no notification service, and the agent says so once, not at each
    /// switch. `events` and `status` say what happened, and a blocked switch (every slot out)
    /// is shown with the earliest reset.
    @Test func aWeeklyOnlyLimitSwitchesAndEveryNoticeSaysWhatHappened() async throws {
        let env = try await home([:], extraConfig: "[integrations]\ncodex = false")
        func weekly(_ slot: String, _ used: Double, seconds: Int = 604_800, resetIn: Int = 86400) async throws {
            try await env.server.hook(
                "/_test/usage",
                [
                    "account_id": try accountID(env, slot),
                    "windows": [["seconds": seconds, "used_percent": used, "reset_after_seconds": resetIn]],
                ]
            )
        }
        try await weekly("a", 100)
        try await weekly("b", 60)
        try await weekly("c", 30, seconds: 2_628_000)
        final class Lines: @unchecked Sendable {
            let lock = NSLock()
            var all: [String] = []
        }
        let lines = Lines()
        var options = RefreshAgent.Options(jitter: 0, notify: true, hook: nil)
        options.autoSwitch = true
        let agent = RefreshAgent(
            manager: try env.manager(),
            options: options,
            diagnostics: { line in lines.lock.withLock { lines.all.append(line) } }
        )

        guard case .switched(let done)? = await agent.checkUsage() else {
            Issue.record("expected a switch")
            return
        }
        #expect(done.from.name == "a" && done.to.name == "c")
        #expect(done.reason.window?.length == .weekly && done.reason.usedPercent == 100)
        let event = try #require(events(env, "switch").last)
        #expect(
            event["window"]?.string == "weekly" && event["limit_window_seconds"]?.number == 604_800
                && event["reason"]?.string == "usage"
        )
        #expect(event["to_used_percent"]?.number == 30)
        let said = lines.lock.withLock { lines.all }
        #expect(
            said.contains {
                $0.hasPrefix("Switched the active account from a to c: a is at 100 % of its weekly window until ")
            },
            "\(said)"
        )
        #expect(!said.contains { $0.contains("Switched Codex") })

        // c's monthly window fills: the second switch, to b; the missing notification service is
        // not reported again.
        try await weekly("c", 100, seconds: 2_628_000, resetIn: 7200)
        guard case .switched(let second)? = await agent.checkUsage() else {
            Issue.record("expected a second switch")
            return
        }
        #expect(second.from.name == "c" && second.to.name == "b")
        let all = lines.lock.withLock { lines.all }
        #expect(all.filter { $0.hasPrefix("Switched the active account from") }.count == 2)
        #expect(all.filter { $0.hasPrefix("notification not shown: ") }.count == 1, "\(all)")

        let shown = try env.home.run("events")
        #expect(
            shown.stdout.contains("a -> c (auto-switch: limit reached on the weekly window, resets in "),
            "\(shown.stdout)"
        )
        #expect(
            shown.stdout.contains("c -> b (auto-switch: limit reached on the monthly window, resets in "),
            "\(shown.stdout)"
        )

        // Every slot out: no switch, and `status` says what is blocked and until when.
        try await weekly("b", 100, resetIn: 3 * 3600)
        guard case .allAtLimit(_, _, let earliest, true, _)? = await agent.checkUsage() else {
            Issue.record("expected every slot out")
            return
        }
        let resetIn = (earliest ?? .distantFuture).timeIntervalSinceNow
        #expect(resetIn > 7000 && resetIn <= 7200, "the earliest reset is c's monthly window")
        let status = try env.home.run("status", "b")
        #expect(
            status.stdout.contains(
                "switch held  every openai slot is at its limit "
                    + "(b at 100 % of its weekly window); until the first reset in "
            ),
            "\(status.stdout)"
        )
        let json = try JSONValue.parse(Data(try env.home.run("status", "--json").stdout.utf8))
        #expect(
            json["auto_switch"]?["blocked"]?["slot"]?.string == "b"
                && json["auto_switch"]?["blocked"]?["earliest_reset"]?.string != nil
        )
        #expect(
            try env.home.run("events").stdout.contains(
                "every openai slot is at its limit (auto-switch: limit reached on the weekly window"
            )
        )
        // A check that finds room again lifts the block.
        try await weekly("a", 10)
        guard case .switched? = await agent.checkUsage() else {
            Issue.record("expected a switch once a reset")
            return
        }
        #expect(!(try env.home.run("status").stdout.contains("switch held")))
    }

    /// Thirty checks in a row with nothing changing: one switch; a resetting afterwards does not
    /// bring it back (bounded by the number of checks, not by time).
    @Test func noSecondSwitchOverRepeatedChecks() async throws {
        let env = try await home(["a": 97, "b": 40, "c": 45])
        var options = RefreshAgent.Options(jitter: 0, notify: false, hook: nil)
        options.autoSwitch = true
        let agent = RefreshAgent(manager: try env.manager(), options: options, diagnostics: { _ in })
        var switched = 0
        for _ in 0..<30 {
            if case .switched? = await agent.checkUsage() { switched += 1 }
        }
        try await setUsage(env, "a", 0)
        for _ in 0..<10 {
            if case .switched? = await agent.checkUsage() { switched += 1 }
        }
        #expect(switched == 1)
        #expect(events(env, "switch").count == 1)
        #expect(try active(env) == "b")
        #expect(try await env.server.stat("usage_requests") >= 40, "each check asked the usage endpoint")
    }

    /// Every slot out (two over the threshold, one refused with usage_limit_reached): no switch,
    /// one `switch_blocked` event naming the earliest reset, and exactly one notification over
    /// repeated checks.
    @Test func allSlotsAtTheirLimitNotifyOnceAndSwitchNothing() async throws {
        let env = try await home(["a": 99, "b": 97])
        try await setUsage(env, "a", 99, resetIn: 7200)
        try await setUsage(env, "b", 97, resetIn: 3600)
        try await env.server.hook(
            "/_test/usage_limit",
            ["account_id": try accountID(env, "c"), "resets_in_seconds": 600]
        )
        let monitor = try await NotificationMonitor()
        var options = RefreshAgent.Options(jitter: 0, notify: true, hook: nil)
        options.autoSwitch = true
        let agent = RefreshAgent(manager: try env.manager(), options: options, diagnostics: { _ in })
        var firsts = 0
        var earliest: Date?
        for _ in 0..<5 {
            guard case .allAtLimit(_, _, let reset, let first, _)? = await agent.checkUsage() else {
                Issue.record("expected no slot with headroom")
                return
            }
            if first { firsts += 1 }
            earliest = reset
        }
        #expect(firsts == 1)
        let resetIn = (earliest ?? .distantFuture).timeIntervalSinceNow
        #expect(resetIn > 500 && resetIn <= 600, "the earliest reset is c's")
        #expect(try active(env) == "a")
        #expect(events(env, "switch").isEmpty)
        let blocked = events(env, "switch_blocked")
        #expect(blocked.count == 1)
        #expect(blocked.first?["slot"]?.string == "a" && blocked.first?["earliest_reset"]?.string != nil)
        // A last notification of our own: once it is seen, every earlier one has been too.
        DesktopNotifier().notify(summary: "sentinel", body: "end of test")
        try await eventually("the sentinel notification") {
            monitor.text
        } until: {
            $0.contains("sentinel")
        }
        #expect(monitor.count("is at its usage limit") == 1, Comment(rawValue: monitor.text))
    }

    /// `exec --best` runs the command as the slot with the most headroom; the active slot stays.
    @Test func execBestRunsTheHeadroomSlot() async throws {
        let env = try await home(["a": 80, "b": 10, "c": 50])
        let out = try env.home.run("exec", "--best", "--", "sh", "-c", "echo $LANYARD_ACCOUNT")
        #expect(out.status == 0, Comment(rawValue: out.stderr))
        #expect(out.stdout == "b\n")
        #expect(try active(env) == "a")
        let usage = try env.home.run("usage", "--all", "--json")
        let slots = try JSONValue.parse(Data(usage.stdout.utf8))["slots"]
        if case .array(let list)? = slots {
            #expect(list.filter { $0["next"]?.bool == true }.compactMap { $0["slot"]?.string } == ["b"])
        } else {
            Issue.record("no slots: \(usage.stdout)")
        }
        let both = try env.home.run("exec", "a", "--best", "--", "true")
        #expect(both.status == 2)
    }

    /// `[switch]`'s keys: defaults, bounds, and the 60 s floor against a provider on another machine.
    @Test func switchConfigKeys() throws {
        let defaults = try ConfigFile.parse(Data(), path: "config.ini").config.autoSwitch
        #expect(defaults.mode == .off && defaults.threshold == 95 && defaults.poll == 300)
        let loaded = try ConfigFile.parse(
            Data("[switch]\nauto = usage\nthreshold = 90\npoll = 5\n".utf8),
            path: "config.ini"
        )
        #expect(loaded.warnings.isEmpty)
        #expect(loaded.config.autoSwitch == AutoSwitchPolicy(mode: .usage, threshold: 90, poll: 5))
        #expect(loaded.config.autoSwitch.pollInterval(usageBaseURL: URL(string: "https://chatgpt.com")) == 60)
        #expect(loaded.config.autoSwitch.pollInterval(usageBaseURL: URL(string: "http://127.0.0.1:8080")) == 5)
        for bad in ["auto = always", "threshold = 0", "threshold = 101", "poll = 0", "poll = soon"] {
            #expect(throws: ConfigError.self, "\(bad)") {
                try ConfigFile.parse(Data("[switch]\n\(bad)\n".utf8), path: "config.ini")
            }
        }
    }
}
