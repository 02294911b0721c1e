import LanyardCore
import LanyardIntegrations
import LanyardStore

extension GitCredentialCommand {
    static let get = CommandSpec(
        name: "git-credential get",
        summary: "answer git's request with the mapped slot's token",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: false,
        takesAccount: false,
        details: """
            For a request (protocol=https) whose host, and path when git sends one, is mapped in the [git] group \
            (longest path prefix wins), prints username (the provider's git-username, else x-access-token), password \
            (the slot's access token, refreshed when due) and password_expiry_utc. For an unmapped host, or plain \
            http, it prints nothing, so git asks its other helpers. \(inputLimits)
            """,
        examples: [
            CommandExample(
                "printf 'protocol=https\\nhost=github.com\\n\\n' | lanyard git-credential get",
                "see what git gets for github.com"
            ),
            CommandExample(
                "git credential fill <<< $'protocol=https\\nhost=github.com\\n'",
                "the same through git, with every helper it has"
            ),
        ]
    ) { inv in
        try get(inv)
    }

    static func get(_ inv: Invocation) throws -> ExitStatus {
        let request = try GitCredential.read(inv.context.input)
        let config = try inv.config()
        // Only https: a token must never go out over plain http.
        guard request.protocol?.lowercased() == "https", let host = request.host,
            let (_, slot) = GitCredential.slot(host: host, path: request.path, in: config.gitCredentials)
        else {
            return .ok
        }
        let manager = try inv.accounts()
        let credential = try inv.freshCredential(manager, slot: slot)
        let token = credential.tokens.accessToken
        guard !token.isEmpty, !token.contains(where: { $0.isNewline || $0 == "\0" }) else {
            throw StoreError.corrupt(source: "slot \(slot.name)", detail: "the access token cannot be passed to git")
        }
        let username = config.providers[credential.provider]?.gitUsername ?? "x-access-token"
        inv.stdout.raw(
            GitCredential.answer(username: username, password: token, expiresAt: credential.tokens.expiresAt)
        )
        return .ok
    }
}
