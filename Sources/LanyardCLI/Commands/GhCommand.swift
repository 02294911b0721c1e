import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport

/// `lanyard gh import`: adopts the accounts the GitHub CLI holds.
enum GhCommand {
    static let command = CommandSpec(
        group: "gh",
        summary: "adopt the accounts the GitHub CLI holds into slots",
        details: """
            GitHub CLI tokens do not expire, so Lanyard never refreshes them. The adopted slots work with exec and env \
            (GH_TOKEN), git-credential and docker-credential ([git] and [docker] mappings).
            """,
        examples: [CommandExample("lanyard gh import", "one slot per account gh is signed in to")],
        subcommands: [importAccounts]
    )

    static let importAccounts = CommandSpec(
        name: "gh import",
        summary: "adopt gh's accounts (one slot each)",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [
            FlagSpec(
                "hostname",
                value: "HOST",
                "only gh's account for HOST (repeatable; default: every host in gh's hosts.yml)"
            )
        ],
        prints: true,
        takesAccount: false,
        details: """
            Reads the hosts gh is signed in to from its hosts.yml ($GH_CONFIG_DIR, else $XDG_CONFIG_HOME/gh, else \
            ~/.config/gh) and asks `gh auth token --hostname HOST` for each token (or reads hosts.yml when gh is not \
            installed), then stores each in a slot of provider github: gh-USER for github.com, gh-USER-HOST otherwise, \
            or SLOT when one account is imported. A slot that holds another account is not overwritten (exit 1); \
            importing the same account again updates its token.
            """,
        examples: [
            CommandExample("lanyard gh import", "adopt every account gh holds"),
            CommandExample(
                "lanyard gh import --hostname github.example.com work",
                "adopt the GitHub Enterprise account into the slot work"
            ),
            CommandExample(
                "lanyard exec gh-octocat -- gh repo list",
                "then run gh (or anything reading GH_TOKEN) as that account"
            ),
        ]
    ) { inv in
        let requested = try inv.args.positionals.first.map { try SlotCommands.parseSlot($0, inv) }
        let manager = try inv.accounts()
        let adopted = try manager.adoptGitHubCLIAccounts(
            from: GitHubCLI(environment: inv.context.environment),
            hosts: inv.args.repeated("hostname"),
            into: requested
        )
        inv.emit(GhImportView(slots: adopted)) {
            for a in adopted {
                let who = a.user.map { "\($0) on \(a.host)" } ?? a.host
                inv.stdout.line(
                    a.changed
                        ? "Adopted gh's \(who) into slot \(a.slot.name)."
                        : "Slot \(a.slot.name) already holds gh's \(who)."
                )
            }
        }
        return .ok
    }
}

/// `gh import --json`.
struct GhImportView: JSONView {
    static let keys = ["slots"]
    let slots: [AdoptedGitHubAccount]
    var json: JSONValue {
        .object([
            "slots": .array(
                slots.map {
                    .object([
                        "slot": .string($0.slot.name), "host": .string($0.host), "user": .optional($0.user),
                        "backend": .string($0.backend.rawValue), "changed": .bool($0.changed),
                    ])
                }
            )
        ])
    }
}
