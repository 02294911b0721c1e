import LanyardIntegrations

extension GitCredentialCommand {
    static let erase = CommandSpec(
        name: "git-credential erase",
        summary: "read git's request and delete nothing (the slot stays signed in)",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: false,
        takesAccount: false,
        details:
            "Reads the request and changes nothing: a rejected push must not delete the slot's session. \(inputLimits)",
        examples: [
            CommandExample(
                "printf 'protocol=https\\nhost=github.com\\n\\n' | lanyard git-credential erase",
                "what git runs after a rejected password: exits 0, the slot keeps its session"
            )
        ]
    ) { inv in
        _ = try GitCredential.read(inv.context.input)
        return .ok
    }
}
