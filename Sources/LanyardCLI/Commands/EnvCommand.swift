import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardSystem
import LanyardIntegrations
import LanyardStore

extension IntegrationCommands {
    static let env = CommandSpec(
        name: "env", summary: "print shell lines that export the slot's credentials", arguments: "[SLOT]",
        minArguments: 0, maxArguments: 1, flags: [FlagSpec("shell", value: "SHELL", choices: ["bash", "zsh", "fish", "sh", "json"], "bash, zsh, fish or json (default bash)")],
        prints: false, takesAccount: true,
        details: "For `eval \"$(lanyard env)\"`. Sets LANYARD_ACCOUNT and the variables the provider's env.NAME keys name.",
        examples: [
            CommandExample("eval \"$(lanyard env work)\"", "export work's variables into this shell"),
            CommandExample("lanyard env --shell fish | source", "the same in fish"),
        ]) { inv in
        let (slot, record, _) = try inv.targetSlot(positional: inv.args.positionals.first)
        let manager = try inv.accounts()
        let credential = try inv.freshCredential(manager, slot: slot)
        let variables = Environment.variables(slot: slot, credential: credential, provider: manager.config.providers[record.provider])
        let shell = inv.args.value("shell") ?? "bash"
        if shell == "json" {
            inv.stdout.rawLine(JSONValue.object(variables.mapValues(JSONValue.string)).serialized(pretty: true))
            return .ok
        }
        guard let syntax = ShellQuoting.Shell(rawValue: shell) else {
            throw UsageError(message: "unknown shell \"\(shell)\" (bash, zsh, sh, fish or json)", command: "env")
        }
        for line in try ShellQuoting.exports(variables, for: syntax) { inv.stdout.rawLine(line) }
        return .ok
    }
}

/// Environment variables for a slot.
enum Environment {
    static func variables(slot: Slot, credential: Credential, provider: ProviderConfig?) -> [String: String] {
        var result = ["LANYARD_ACCOUNT": slot.name]
        for (name, field) in provider?.environment ?? [:] {
            switch field {
            case "access_token": result[name] = credential.tokens.accessToken
            case "id_token": credential.tokens.idToken.map { result[name] = $0 }
            case "account_id": credential.account.accountID.map { result[name] = $0 }
            default: break
            }
        }
        return result
    }
}
