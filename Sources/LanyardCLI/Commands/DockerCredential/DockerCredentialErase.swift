import LanyardIntegrations

extension CredentialHelperCommands {
    static let dockerErase = dockerAction(
        "erase",
        summary: "read a server URL and delete nothing (the slot stays signed in)",
        details: "Reads the server URL `docker logout` hands over and changes nothing: the slot keeps its session.",
        examples: [
            CommandExample(
                "echo ghcr.io | lanyard docker-credential erase",
                "what docker logout runs: exits 0, deletes nothing"
            )
        ]
    ) { inv in
        _ = try DockerCredential.host(ofServerURL: DockerCredential.readInput(inv.context.input))
        return .ok
    }
}
