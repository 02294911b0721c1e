import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore

/// The credential protocols other tools speak (Docker, Kubernetes, netrc), each a thin adapter
/// over the fresh-credential path `git-credential` uses: refresh when due, one refresh per slot,
/// a token only for what config.ini maps.
enum CredentialHelperCommands {
    /// The name `docker-credential-lanyard` (a link to `lanyard`) runs as.
    static let dockerHelperName = "docker-credential-lanyard"

    static let docker = CommandSpec(
        group: "docker-credential", summary: "Docker credential helper (installed as docker-credential-lanyard)",
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
        subcommands: [dockerGet, dockerStore, dockerErase, dockerList, dockerVersion])

    /// One action of the Docker helper; its errors go to stdout, where the protocol's clients read them.
    static func dockerAction(_ word: String, summary: String, details: String, examples: [CommandExample],
                             _ action: @escaping @Sendable (Invocation) throws -> ExitStatus) -> CommandSpec {
        CommandSpec(name: "docker-credential \(word)", summary: summary, arguments: "", minArguments: 0, maxArguments: 0,
                    flags: [], prints: false, takesAccount: false, details: details, examples: examples) { inv in
            do {
                return try action(inv)
            } catch let error as any LanyardError {
                inv.stdout.rawLine(TerminalText.escaped(error.userFacingDescription))
                return error.exitStatus
            }
        }
    }

    static let dockerGet = dockerAction(
        "get", summary: "print the mapped slot's credentials for the server URL on stdin",
        details: """
        Reads a server URL on stdin (ghcr.io, https://ghcr.io, https://ghcr.io/v2/) and, for a registry mapped in \
        [docker], prints {"ServerURL", "Username", "Secret"} with the slot's access token (refreshed when due) and \
        the provider's git-username (default x-access-token). For any other registry, or an http:// URL, it prints \
        "credentials not found in native keychain" and exits 1, so Docker falls back to its own store.
        """,
        examples: [
            CommandExample("echo https://ghcr.io | lanyard docker-credential get", "the credentials Docker gets for ghcr.io"),
        ]) { inv in
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
        inv.stdout.rawLine(DockerCredential.getAnswer(serverURL: serverURL, username: username, secret: credential.tokens.accessToken))
        return .ok
    }

    static let dockerList = dockerAction(
        "list", summary: "print the mapped registries and their usernames",
        details: "Prints {\"https://HOST\": \"USERNAME\"} for each registry the [docker] group of config.ini maps; no token.",
        examples: [CommandExample("lanyard docker-credential list", "which registries Docker can get tokens for")]) { inv in
        let config = try inv.config()
        let document = try inv.registry.load()
        let entries = config.dockerCredentials.sorted { $0.key < $1.key }.map { host, slot in
            (host, document.slots[slot].flatMap { config.providers[$0.provider]?.gitUsername } ?? "x-access-token")
        }
        inv.stdout.rawLine(DockerCredential.listAnswer(entries))
        return .ok
    }

    static let dockerStore = dockerAction(
        "store", summary: "read Docker's credentials and keep nothing (Lanyard owns the tokens)",
        details: "Reads the credentials `docker login` hands over and changes nothing: a stored copy would go stale at the next refresh.",
        examples: [CommandExample("echo '{\"ServerURL\":\"ghcr.io\",\"Username\":\"x\",\"Secret\":\"s\"}' | lanyard docker-credential store",
                                  "what docker login runs: exits 0, stores nothing")]) { inv in
        try DockerCredential.checkStoreInput(Data(DockerCredential.readInput(inv.context.input).utf8))
        return .ok
    }

    static let dockerErase = dockerAction(
        "erase", summary: "read a server URL and delete nothing (the slot stays signed in)",
        details: "Reads the server URL `docker logout` hands over and changes nothing: the slot keeps its session.",
        examples: [CommandExample("echo ghcr.io | lanyard docker-credential erase", "what docker logout runs: exits 0, deletes nothing")]) { inv in
        _ = try DockerCredential.host(ofServerURL: DockerCredential.readInput(inv.context.input))
        return .ok
    }

    static let dockerVersion = dockerAction(
        "version", summary: "print the helper's version",
        details: "",
        examples: [CommandExample("docker-credential-lanyard version", "check the helper Docker finds on PATH")]) { inv in
        inv.stdout.line("\(dockerHelperName) (lanyard \(Lanyard.version))")
        return .ok
    }

    static let kube = CommandSpec(
        name: "kube-credential", summary: "Kubernetes exec credential plugin: an ExecCredential with the slot's token",
        arguments: "[SLOT]", minArguments: 0, maxArguments: 1, flags: [], prints: false, takesAccount: true,
        details: """
        Prints an ExecCredential (client.authentication.k8s.io/v1, or the version KUBERNETES_EXEC_INFO asks for: v1 or \
        v1beta1) whose status holds the slot's access token (or its id token when the provider sets kube-token = \
        id-token), refreshed when due, and its expirationTimestamp, so kubectl runs the plugin again only when the \
        token is due. Exit 3 when the slot has no credential, 4 when it must sign in again.
        """,
        examples: [
            CommandExample("lanyard kube-credential work", "what kubectl runs (users.user.exec in kubeconfig): an ExecCredential for work"),
        ]) { inv in
        let apiVersion = try KubeExecCredential.apiVersion(execInfo: inv.context.environment["KUBERNETES_EXEC_INFO"])
        let (slot, record, _) = try inv.targetSlot(positional: inv.args.positionals.first)
        let manager = try inv.accounts()
        let credential = try inv.freshCredential(manager, slot: slot)
        let token: String, expiresAt: Date?
        switch manager.config.providers[record.provider]?.kubeToken ?? .accessToken {
        case .accessToken:
            token = credential.tokens.accessToken
            expiresAt = credential.tokens.expiresAt
        case .idToken:
            guard let idToken = credential.tokens.idToken else {
                throw ClientError.reauthenticationRequired(slot: slot.name, reason: "the provider gave no id token, which kube-token = id-token asks for")
            }
            token = idToken
            expiresAt = (try? JWTClaims(token: idToken))?.expiresAt
        }
        inv.stdout.rawLine(KubeExecCredential.render(apiVersion: apiVersion, token: token, expiresAt: expiresAt))
        return .ok
    }

    static let netrc = CommandSpec(
        name: "netrc", summary: "print netrc lines with fresh tokens for hosts mapped in [netrc]", arguments: "[HOST…]",
        minArguments: 0, maxArguments: Int.max, flags: [], prints: false, takesAccount: false,
        details: """
        One `machine HOST login USER password TOKEN` line per host mapped in [netrc] (HOST = SLOT), or per HOST named, \
        with the slot's access token refreshed when due and the provider's git-username (default x-access-token): \
        curl --netrc-file <(lanyard netrc api.example.com) URL. A named host that is not mapped gets no line and a \
        warning (exit 1); nothing is printed for hosts config.ini does not map.
        """,
        examples: [
            CommandExample("curl --netrc-file <(lanyard netrc api.example.com) https://api.example.com/v1/me", "curl with a fresh token for a host mapped in [netrc]"),
            CommandExample("lanyard netrc", "lines for every host mapped in [netrc]"),
        ]) { inv in
        let config = try inv.config()
        var hosts = config.netrcCredentials.keys.sorted()
        var unmapped: [String] = []
        if !inv.args.positionals.isEmpty {
            hosts = []
            for name in inv.args.positionals {
                guard let host = ConfigFile.hostKey(name), config.netrcCredentials[host] != nil else { unmapped.append(name); continue }
                hosts.append(host)
            }
        }
        if !hosts.isEmpty {
            let manager = try inv.accounts()
            var credentials: [Slot: Credential] = [:]
            for host in hosts {
                let slot = config.netrcCredentials[host]!
                let credential = try credentials[slot] ?? inv.freshCredential(manager, slot: slot)
                credentials[slot] = credential
                let login = config.providers[credential.provider]?.gitUsername ?? "x-access-token"
                inv.stdout.rawLine(try Netrc.line(host: host, login: login, password: credential.tokens.accessToken))
            }
        }
        for name in unmapped {
            inv.stderr.line("lanyard: no [netrc] mapping for \(name) in \(inv.paths.configFile) (no line printed)")
        }
        return unmapped.isEmpty ? .ok : .failure
    }
}
