import LanyardIntegrations

extension GitCredentialCommand {
    // Lanyard owns these tokens (it refreshes and rotates them): what git would store is a copy of
    // ours, and erasing after a rejected push must not delete the slot's session.
    static let store = CommandSpec(
        name: "git-credential store",
        summary: "read git's request and keep nothing (Lanyard owns the tokens)",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: false,
        takesAccount: false,
        details: "Reads the request and changes nothing: a copy stored by "
            + "git would go stale at the next refresh. \(inputLimits)",
        examples: [
            CommandExample(
                "printf 'protocol=https\\nhost=github.com\\nusername=x\\npassword=p\\n\\n' "
                    + "| lanyard git-credential store",
                "what git runs after a successful push: exits 0, stores nothing"
            )
        ]
    ) { inv in
        _ = try GitCredential.read(inv.context.input)
        return .ok
    }
}
