import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport

extension CredentialHelperCommands {
    static let netrc = CommandSpec(
        name: "netrc",
        summary: "print netrc lines with fresh tokens for hosts mapped in [netrc]",
        arguments: "[HOST…]",
        minArguments: 0,
        maxArguments: Int.max,
        flags: [],
        prints: true,
        takesAccount: false,
        details: """
            One `machine HOST login USER password TOKEN` line per \
            host mapped in [netrc] (HOST = SLOT), or per HOST named, \
            with the slot's access token refreshed when due and the provider's git-username (default x-access-token): \
            curl --netrc-file <(lanyard netrc api.example.com) URL. A named host that is not mapped gets no line and a \
            warning (exit 1); nothing is printed for hosts config.ini does not map. \
            --json: the same as {"machines": [{"machine", "login", "password", "slot"}], "unmapped": [HOST…]}.
            """,
        examples: [
            CommandExample(
                "curl --netrc-file <(lanyard netrc api.example.com) https://api.example.com/v1/me",
                "curl with a fresh token for a host mapped in [netrc]"
            ),
            CommandExample("lanyard netrc", "lines for every host mapped in [netrc]"),
        ]
    ) { inv in
        let config = try inv.config()
        var hosts = config.netrcCredentials.keys.sorted()
        var unmapped: [String] = []
        if !inv.args.positionals.isEmpty {
            hosts = []
            for name in inv.args.positionals {
                guard let host = ConfigFile.hostKey(name), config.netrcCredentials[host] != nil else {
                    unmapped.append(name)
                    continue
                }
                hosts.append(host)
            }
        }
        var machines: [NetrcView.Machine] = []
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
                    machines.append(
                        NetrcView.Machine(
                            machine: host,
                            login: login,
                            password: credential.tokens.accessToken,
                            slot: slot
                        )
                    )
                } else {
                    inv.stdout.rawLine(line)
                }
            }
        }
        if inv.json {
            inv.stdout.rawLine(NetrcView(machines: machines, unmapped: unmapped).json.serialized(pretty: true))
        } else {
            for name in unmapped {
                inv.stderr.line("lanyard: no [netrc] mapping for \(name) in \(inv.paths.configFile) (no line printed)")
            }
        }
        return unmapped.isEmpty ? .ok : .failure
    }
}

/// `netrc --json`: it carries the tokens, as the lines do.
struct NetrcView: JSONView {
    struct Machine {
        let machine: String
        let login: String
        let password: String
        let slot: Slot
    }

    static let keys = ["machines", "unmapped"]
    let machines: [Machine]
    /// Hosts named on the command line with no `[netrc]` mapping.
    let unmapped: [String]
    var json: JSONValue {
        .object([
            "machines": .array(
                machines.map {
                    .object([
                        "machine": .string($0.machine), "login": .string($0.login), "password": .string($0.password),
                        "slot": .string($0.slot.name),
                    ])
                }
            ), "unmapped": .array(unmapped.map(JSONValue.string)),
        ])
    }
}
