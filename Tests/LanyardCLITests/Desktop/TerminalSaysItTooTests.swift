import Foundation
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// What the terminal says: `switch` warns about a slot it cannot use, `usage` exits 7
/// for a slot shown at its limit, a token given as an argument is never repeated, `list` reports a
/// broken config.ini as the other commands do, and usage lands in the shared usage.json.
@Suite struct TerminalSaysItTooTests {
    func window(_ used: Int) -> [String: Any] {
        ["used_percent": used, "limit_window_seconds": 18000, "reset_after_seconds": 3600]
    }

    @Test func switchWarnsAboutASlotAtItsLimitOrSignedOutAndStillSwitches() async throws {
        let env = try await IntegrationHome()
        let full = try #require(try await env.signIn("full", email: "full@x.com").account.accountID)
        try await env.signIn("gone", email: "gone@x.com")
        try await env.signIn("fine", email: "fine@x.com")
        try await env.server.hook("/_test/usage", ["account_id": full, "primary_window": window(100)])
        // `usage` shows full at its limit: exit 7, and the figures land in usage.json.
        let usage = try env.run("usage", "full")
        #expect(usage.status == 7, "\(usage.stdout)\(usage.stderr)")
        let paths = env.paths
        let shared = await BlockingExecutor.shared.run { UsageState.load(paths) }
        #expect(shared.slots[try Slot("full")]?.report.isAtLimit == true)
        #expect(permissionBits(UsageState.path(env.paths)) == 0o600)

        #expect(try env.run("switch", "fine").status == 0)  // the first slot signed in is active
        let toFull = try env.run("switch", "full")
        #expect(toFull.status == 0 && toFull.stdout.hasPrefix("Switched to full"), "\(toFull.stderr)")
        #expect(
            toFull.stderr.contains("warning: full is at its usage limit until ")
                && toFull.stderr.contains("`lanyard switch --best`"),
            "\(toFull.stderr)"
        )

        try Registry(paths: env.paths).updateInTest { $0.slots[try Slot("gone")]?.state = .reauthenticationRequired }
        let toGone = try env.run("switch", "gone")
        #expect(toGone.status == 0)
        #expect(
            toGone.stderr.contains("warning: gone must sign in again before it can be used: run `lanyard login gone`"),
            "\(toGone.stderr)"
        )

        let toFine = try env.run("switch", "fine")
        #expect(toFine.status == 0 && !toFine.stderr.contains("warning"), "\(toFine.stderr)")
    }

    @Test func aTokenGivenAsAnArgumentIsRefusedWithoutRepeatingIt() async throws {
        let env = try await IntegrationHome()
        let token = "at-" + String(repeating: "Zq7", count: 30)
        for args in [["login", "--with-access-token", token], ["login", "ci", "--with-access-token", token]] {
            let result = try env.home.run(args)
            #expect(result.status == 2, "\(args): \(result.stderr)")
            #expect(
                !result.stderr.contains(token) && !result.stdout.contains(token) && !result.stderr.contains("Zq7Zq7"),
                "\(result.stderr)"
            )
            #expect(
                result.stderr.contains("standard input") || result.stderr.contains("not repeated"),
                "\(result.stderr)"
            )
        }
    }

    @Test func listSaysABrokenConfigAsTheOtherCommandsDo() async throws {
        let home = TestHome()
        home.withoutSessionBus = true
        try home.writeConfig("[desktop]\nnotify = 80\nnot a key\n")
        let list = try home.run("list")
        let usage = try home.run("status")
        #expect(list.status == 1 && list.stderr.contains("config.ini:3:"), "\(list.stderr)")
        let line = try #require(list.stderr.split(separator: "\n").first { $0.contains("config.ini:3:") })
        let other = try home.run("switch", "x")
        #expect(
            other.stderr.contains(String(line)),
            "switch: \(other.stderr)\nlist: \(list.stderr)\nstatus: \(usage.stderr)"
        )
    }
}
