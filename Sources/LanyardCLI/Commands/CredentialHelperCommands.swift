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
        name: "docker-credential", summary: "Docker credential helper (installed as docker-credential-lanyard)",
        arguments: "get|store|erase|list|version", minArguments: 1, maxArguments: 1, flags: [], prints: false, takesAccount: false,
        details: """
        Speaks the docker-credential-helpers protocol; Docker runs it as docker-credential-lanyard (set "credHelpers": \
        {"ghcr.io": "lanyard"} in ~/.docker/config.json). get reads a server URL on stdin and, for a registry mapped in \
        [docker] (HOST = SLOT), prints {"ServerURL", "Username", "Secret"} with the slot's access token (refreshed when \
        due) and the provider's git-username (default x-access-token); for any other registry it prints "credentials \
        not found in native keychain" and exits 1, so Docker falls back to its own store. list prints the mapped \
        registries and usernames. store and erase read their input and change nothing: Lanyard owns the tokens. \
        Input that is not text (a NUL byte), a line over 64 KiB or more than 1 MiB is refused at once (exit 2). \
        Errors are printed on stdout, where Docker reads them.
        """, subcommands: ["get", "store", "erase", "list", "version"]) { inv in
        do {
            return try dockerAction(inv)
        } catch let error as any LanyardError {
            // The protocol's clients read a helper's error from its stdout.
            inv.stdout.rawLine(TerminalText.escaped(error.userFacingDescription))
            return error.exitStatus
        }
    }

    static func dockerAction(_ inv: Invocation) throws -> ExitStatus {
        switch inv.args.positionals[0] {
        case "get":
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
        case "list":
            let config = try inv.config()
            let document = try inv.registry.load()
            let entries = config.dockerCredentials.sorted { $0.key < $1.key }.map { host, slot in
                (host, document.slots[slot].flatMap { config.providers[$0.provider]?.gitUsername } ?? "x-access-token")
            }
            inv.stdout.rawLine(DockerCredential.listAnswer(entries))
        case "store":
            try DockerCredential.checkStoreInput(Data(DockerCredential.readInput(inv.context.input).utf8))
        case "erase":
            _ = try DockerCredential.host(ofServerURL: DockerCredential.readInput(inv.context.input))
        case "version":
            inv.stdout.line("\(dockerHelperName) (lanyard \(Lanyard.version))")
        default:
            preconditionFailure("the parser admits only the table's subcommands")
        }
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
        """) { inv in
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
        minArguments: 0, maxArguments: Int.max, flags: [], prints: true, takesAccount: false,
        details: """
        One `machine HOST login USER password TOKEN` line per host mapped in [netrc] (HOST = SLOT), or per HOST named, \
        with the slot's access token refreshed when due and the provider's git-username (default x-access-token): \
        curl --netrc-file <(lanyard netrc api.example.com) URL. A named host that is not mapped gets no line and a \
        warning (exit 1); nothing is printed for hosts config.ini does not map. \
        --json: the same as {"machines": [{"machine", "login", "password", "slot"}], "unmapped": [HOST…]}.
        """) { inv in
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
        var machines: [JSONValue] = []
        if !hosts.isEmpty {
            let manager = try inv.accounts()
            var credentials: [Slot: Credential] = [:]
            for host in hosts {
                let slot = config.netrcCredentials[host]!
                let credential = try credentials[slot] ?? inv.freshCredential(manager, slot: slot)
                credentials[slot] = credential
                let login = config.providers[credential.provider]?.gitUsername ?? "x-access-token"
                let line = try Netrc.line(host: host, login: login, password: credential.tokens.accessToken)
                if inv.json {
                    machines.append(.object(["machine": .string(host), "login": .string(login),
                                             "password": .string(credential.tokens.accessToken), "slot": .string(slot.name)]))
                } else {
                    inv.stdout.rawLine(line)
                }
            }
        }
        if inv.json {
            inv.stdout.rawLine(JSONValue.object(["machines": .array(machines), "unmapped": .array(unmapped.map(JSONValue.string))])
                .serialized(pretty: true))
        } else {
            for name in unmapped {
                inv.stderr.line("lanyard: no [netrc] mapping for \(name) in \(inv.paths.configFile) (no line printed)")
            }
        }
        return unmapped.isEmpty ? .ok : .failure
    }
}
