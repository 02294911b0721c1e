import LanyardCore
import LanyardIntegrations
import LanyardStore

extension CredentialHelperCommands {
    static let dockerList = dockerAction(
        "list",
        summary: "print the mapped registries and their usernames",
        details: "Prints {\"https://HOST\": \"USERNAME\"} for each registry "
            + "the [docker] group of config.ini maps; no token.",
        examples: [CommandExample("lanyard docker-credential list", "which registries Docker can get tokens for")]
    ) { inv in
        let config = try inv.config()
        let document = try inv.registry.load()
        let entries = config.dockerCredentials.sorted { $0.key < $1.key }.map { host, slot in
            (host, document.slots[slot].flatMap { config.providers[$0.provider]?.gitUsername } ?? "x-access-token")
        }
        inv.stdout.rawLine(DockerCredential.listAnswer(entries))
        return .ok
    }
}
