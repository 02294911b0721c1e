import LanyardCore
import LanyardStore
import LanyardSupport

/// How a fleet reaches etcd by default.
package enum FleetConnection {
    /// The v3 JSON gateway client for `settings` (the password, when etcd's authentication is
    /// on, read from `password-file`).
    package static let gateway: @Sendable (FleetSettings) throws -> any EtcdKV = { settings in
        EtcdGatewayClient(
            endpoints: settings.endpoints,
            caFile: settings.caFile,
            certFile: settings.certFile,
            keyFile: settings.keyFile,
            user: settings.user,
            password: try password(settings),
            requestTimeout: settings.requestTimeout
        )
    }

    /// The etcd password in `password-file`, read as `LANYARD_PASSPHRASE_FILE` is: the first
    /// line without its ending (`\n` or `\r\n`), spaces kept, since they may be part of it. Nil
    /// when the settings name no file.
    package static func password(_ settings: FleetSettings) throws -> String? {
        guard let file = settings.passwordFile else { return nil }
        let shown = TerminalText.escaped(file)
        // Refused when group or others can read it, as LANYARD_PASSPHRASE_FILE is.
        guard let data = try SecureFiles.readSecretFile(file) else {
            throw FleetError.unavailable(
                fleet: settings.name,
                endpoints: settings.endpoints,
                detail: "password file \(shown) does not exist"
            )
        }
        do {
            return try PassphraseReader.firstLine(data, source: "password file \(shown)", what: "password")
        } catch {
            throw FleetError.unavailable(
                fleet: settings.name,
                endpoints: settings.endpoints,
                detail: error.message,
                cause: ErrorCause(error)
            )
        }
    }
}
