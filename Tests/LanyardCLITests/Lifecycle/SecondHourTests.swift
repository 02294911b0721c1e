import Foundation
import LanyardCLI
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

/// Issue 33, "the newcomer's second hour": what a new user trips over once signed in.
@Suite struct SecondHourTests {
    /// `eval "$(lanyard env)"` for a ChatGPT slot sets only LANYARD_ACCOUNT: its help says so,
    /// and what to use instead.
    @Test func envHelpSaysAChatGPTSlotSetsOnlyItsName() async throws {
        let h = CLIHarness()
        let help = await h.run("env", "--help")
        #expect(help.status == 0)
        let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(
            text.contains(
                "A ChatGPT (openai) slot names no env.NAME variables, so for it env sets only LANYARD_ACCOUNT"
            ),
            "\(help.stdout)"
        )
        #expect(
            text.contains("lanyard exec SLOT -- codex …") && text.contains("lanyard codex export SLOT"),
            "\(help.stdout)"
        )

        try h.addSlot("work", email: "w@example.com", active: true)
        let env = await h.run("env", "work", "--json")
        #expect(env.status == 0, "\(env.stderr)")
        #expect(env.json.keys.sorted() == ["LANYARD_ACCOUNT"], "what the help says is what env prints: \(env.stdout)")
    }

    /// `which --json` for a slot that does not exist prints its JSON and nothing else.
    @Test func whichJSONForAMissingSlotPrintsOnlyTheJSON() async throws {
        let h = CLIHarness()
        h.extraEnvironment["LANYARD_ACCOUNT"] = "ghost"
        let json = await h.run("which", "--json")
        #expect(json.status == 3)
        #expect(json.stderr == "", "nothing but the JSON: \(json.stderr)")
        #expect(
            json.json["slot"] as? String == "ghost" && json.json["exists"] as? Bool == false
                && json.json["rule"] as? String == "environment"
        )
        let text = await h.run("which")
        #expect(
            text.status == 3 && text.stderr == "lanyard: slot ghost does not exist (see `lanyard list`)\n",
            "without --json it says so"
        )
    }
}
