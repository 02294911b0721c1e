import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardIntegrations
import LanyardStore

extension CredentialHelperCommands {
    static let kube = CommandSpec(
        name: "kube-credential",
        summary: "Kubernetes exec credential plugin: an ExecCredential with the slot's token",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [],
        prints: false,
        takesAccount: true,
        details: """
            Prints an ExecCredential (client.authentication.k8s.io/v1, \
            or the version KUBERNETES_EXEC_INFO asks for: v1 or \
            v1beta1) whose status holds the slot's access token (or its id token when the provider sets kube-token = \
            id-token), refreshed when due, and its expirationTimestamp, so kubectl runs the plugin again only when the \
            token is due. Exit 3 when the slot has no credential, 4 when it must sign in again.
            """,
        examples: [
            CommandExample(
                "lanyard kube-credential work",
                "what kubectl runs (users.user.exec in kubeconfig): an ExecCredential for work"
            )
        ]
    ) { inv in
        let apiVersion = try KubeExecCredential.apiVersion(execInfo: inv.context.environment["KUBERNETES_EXEC_INFO"])
        let (slot, record, _) = try inv.targetSlot(positional: inv.args.positionals.first)
        let manager = try inv.accounts()
        let credential = try inv.freshCredential(manager, slot: slot)
        let token: String
        let expiresAt: Date?
        switch manager.config.providers[record.provider]?.kubeToken ?? .accessToken {
        case .accessToken:
            token = credential.tokens.accessToken
            expiresAt = credential.tokens.expiresAt
        case .idToken:
            guard let idToken = credential.tokens.idToken else {
                throw ClientError.reauthenticationRequired(
                    slot: slot.name,
                    reason: "the provider gave no id token, which kube-token = id-token asks for"
                )
            }
            token = idToken
            expiresAt = (try? JWTClaims(token: idToken))?.expiresAt
        }
        inv.stdout.rawLine(KubeExecCredential.render(apiVersion: apiVersion, token: token, expiresAt: expiresAt))
        return .ok
    }
}
