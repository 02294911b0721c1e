import LanyardCore
import LanyardIntegrations
import LanyardSupport

extension CredentialHelperCommands {
    static let dockerGet = dockerAction(
        "get",
        summary: "print the mapped slot's credentials for the server URL on stdin",
        details: """
            Reads a server URL on stdin (ghcr.io, https://ghcr.io, https://ghcr.io/v2/) and, for a registry mapped in \
            [docker], prints {"ServerURL", "Username", "Secret"} with the slot's access token (refreshed when due) and \
            the provider's git-username (default x-access-token). For any other registry, or an http:// URL, it prints \
            "credentials not found in native keychain" and exits 1, so Docker falls back to its own store.
            """,
        examples: [
            CommandExample(
                "echo https://ghcr.io | lanyard docker-credential get",
                "the credentials Docker gets for ghcr.io"
            )
        ]
    ) { inv in
        let serverURL = try DockerCredential.readInput(inv.context.input).trimmingSpaces()
        let host = try DockerCredential.host(ofServerURL: serverURL)
        let config = try inv.config()
        // A token never goes to a registry over plain http.
        guard !serverURL.lowercased().hasPrefix("http://"), let slot = config.dockerCredentials[host] else {
            inv.stdout.rawLine(DockerCredential.notFoundMessage)
            return .failure
        }
        let manager = try inv.accounts()
        let credential = try inv.freshCredential(manager, slot: slot)
        let username = config.providers[credential.provider]?.gitUsername ?? "x-access-token"
        inv.stdout.rawLine(
            DockerCredential.getAnswer(serverURL: serverURL, username: username, secret: credential.tokens.accessToken)
        )
        return .ok
    }
}
