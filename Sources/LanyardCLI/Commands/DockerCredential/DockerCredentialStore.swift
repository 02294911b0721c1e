import FoundationEssentials
import LanyardIntegrations

extension CredentialHelperCommands {
    static let dockerStore = dockerAction(
        "store",
        summary: "read Docker's credentials and keep nothing (Lanyard owns the tokens)",
        details: "Reads the credentials `docker login` hands over and changes nothing: "
            + "a stored copy would go stale at the next refresh.",
        examples: [
            CommandExample(
                "echo '{\"ServerURL\":\"ghcr.io\",\"Username\":\"x\",\"Secret\":\"s\"}' "
                    + "| lanyard docker-credential store",
                "what docker login runs: exits 0, stores nothing"
            )
        ]
    ) { inv in
        try DockerCredential.checkStoreInput(Data(DockerCredential.readInput(inv.context.input).utf8))
        return .ok
    }
}
