import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// What a probe found lost without a word: a failed refresh left no `error` event, an event log
/// that could not be written dropped events silently, and a corrupt registry's active slot was
/// gone after `doctor --repair`.
@Suite(.serialized) struct NothingLostSilentlyTests {
    func events(_ env: IntegrationHome) -> [JSONValue] { EventLog(paths: env.paths).read() }

    @Test func aFailedRefreshIsLoggedAsAnError() async throws {
        let env = try await IntegrationHome(extraConfig: "[backoff]\nmax-retries = 0\n")
        try await env.signIn("work", email: "w@example.com")
        try await env.server.hook(
            "/_test/fault",
            ["endpoint": "oauth_token", "type": "status", "status": 503, "count": 1]
        )
        let transient = try env.run("refresh", "work")
        #expect(transient.status == 6, "\(transient.stderr)")
        let errors = events(env).filter { $0["event"]?.string == "error" }
        #expect(
            errors.count == 1 && errors.first?["slot"]?.string == "work"
                && errors.first?["code"]?.string == "network_failure",
            "\(errors)"
        )
        #expect(errors.first?["source"]?.string == "cli")

        try await env.server.hook("/_test/invalidate_refresh", ["email": "w@example.com"])
        let permanent = try env.run("refresh", "work")
        #expect(permanent.status == 4, "\(permanent.stderr)")
        let after = events(env)
        let logged = after.filter { $0["event"]?.string == "error" }
        #expect(logged.count == 2)
        #expect(
            after.contains { $0["event"]?.string == "transition" && $0["to"]?.string == "reauthentication-required" }
        )
        // Every code the log holds is one of Lanyard's: the server's own (its refusal's reason)
        // is in the message and the transition's reason, not the code.
        for event in logged { #expect(event["code"]?.string.flatMap(ErrorCode.init(rawValue:)) != nil, "\(event)") }
        #expect(logged.last?["code"]?.string == ErrorCode.reauthenticationRequired.rawValue, "\(logged)")
    }

    @Test func anEventLogThatCannotBeWrittenIsReportedOnceAndByDoctor() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("work", email: "w@example.com")
        let log = env.paths.stateDirectory + "/events.jsonl"
        try FileManager.default.createDirectory(atPath: env.paths.stateDirectory, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(atPath: log)
        #expect(symlink(env.home.root + "/nowhere/events.jsonl", log) == 0)
        // Two refreshes in one process's life each log an event: one warning.
        let refresh = try env.run("refresh", "work")
        #expect(refresh.status == 0, "\(refresh.stderr)")
        let warnings = refresh.stderr.components(separatedBy: "warning: events are not being logged").count - 1
        #expect(warnings == 1, "\(refresh.stderr)")
        let doctor = try env.run("doctor")
        #expect(doctor.status == 1)
        #expect(
            doctor.stdout.contains("events are not being logged") && doctor.stdout.contains("not a regular file"),
            "\(doctor.stdout)"
        )
    }

    /// A truncated registry still names its active slot on its first line; one that is garbage
    /// throughout leaves the previous generation (one write older: here, a refresh's).
    @Test(arguments: ["garbage", "truncated"])
    func aCorruptRegistryKeepsItsActiveSlotThroughRepair(_ damage: String) async throws {
        let env = try await IntegrationHome()
        try await env.signIn("work", email: "w@example.com")
        try await env.signIn("home", email: "h@example.com")
        #expect(try env.run("switch", "home").status == 0)
        #expect(try env.run("refresh", "work").status == 0)
        let registry = env.paths.registryFile
        let before = try Registry(paths: env.paths).loadInTest()
        let text = try String(contentsOfFile: registry, encoding: .utf8)
        try (damage == "garbage" ? "{\"active\": \u{0}" : String(text.prefix(text.count / 2))).write(
            toFile: registry,
            atomically: false,
            encoding: .utf8
        )
        let list = try env.run("list")
        #expect(list.status != 0 && list.stderr.contains("corrupt"), "\(list.stderr)")
        let repair = try env.run("doctor", "--repair")
        #expect(repair.status == 0, "\(repair.stdout)\(repair.stderr)")
        #expect(try env.run("which").stdout.hasPrefix("home"), "the active slot survived")
        let after = try Registry(paths: env.paths).loadInTest()
        #expect(Set(after.slots.keys) == Set(before.slots.keys))
        for (slot, record) in before.slots {
            #expect(
                after.slots[slot]?.createdAt == record.createdAt,
                "\(slot.name): created_at kept from the previous generation"
            )
            #expect(after.slots[slot]?.account.email == record.account.email)
        }
    }
}
