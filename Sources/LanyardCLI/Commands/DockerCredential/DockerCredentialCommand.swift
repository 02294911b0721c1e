import LanyardCore
import LanyardSupport

extension CredentialHelperCommands {
    /// The name `docker-credential-lanyard` (a link to `lanyard`) runs as.
    static let dockerHelperName = "docker-credential-lanyard"

    static let docker = CommandSpec(
        group: "docker-credential",
        summary: "Docker credential helper (installed as docker-credential-lanyard)",
        details: """
            Speaks the docker-credential-helpers protocol; Docker runs it as docker-credential-lanyard ACTION (a link \
            to lanyard) for the registries ~/.docker/config.json hands it ("credHelpers": {"ghcr.io": "lanyard"}). \
            Which slot's token a registry gets is set in the [docker] group of config.ini (HOST = SLOT). Input that is \
            not text (a NUL byte), a line over 64 KiB or more than 1 MiB is refused at once (exit 2). Errors are \
            printed on stdout, where Docker reads them.
            """,
        examples: [
            CommandExample("echo ghcr.io | docker-credential-lanyard get", "what Docker gets for ghcr.io"),
            CommandExample("lanyard docker-credential list", "the registries Lanyard answers for"),
        ],
        subcommands: [dockerGet, dockerStore, dockerErase, dockerList, dockerVersion]
    )

    /// One action of the Docker helper; its errors go to stdout, where the protocol's clients read them.
    static func dockerAction(
        _ word: String,
        summary: String,
        details: String,
        examples: [CommandExample],
        _ action: @escaping @Sendable (Invocation) throws -> ExitStatus
    ) -> CommandSpec {
        CommandSpec(
            name: "docker-credential \(word)",
            summary: summary,
            arguments: "",
            minArguments: 0,
            maxArguments: 0,
            flags: [],
            prints: false,
            takesAccount: false,
            details: details,
            examples: examples
        ) { inv in
            do {
                return try action(inv)
            } catch let error as any LanyardError {
                inv.stdout.rawLine(TerminalText.escaped(error.userFacingDescription))
                return error.exitStatus
            }
        }
    }
}
