import FoundationEssentials
import LanyardCore
import LanyardSupport
import LanyardStore

/// How a fleet reaches etcd by default.
package enum FleetConnection {
    /// The v3 JSON gateway client for `settings` (the password, when etcd's authentication is
    /// on, read from `password-file`).
    package static let gateway: @Sendable (FleetSettings) throws -> any EtcdKV = { settings in
        var password: String?
        if let file = settings.passwordFile {
            guard let data = try SecureFiles.readUserFile(file) else {
                throw FleetError.unavailable(fleet: settings.name, endpoints: settings.endpoints, detail: "password file \(file) does not exist")
            }
            password = String(decoding: data, as: UTF8.self).trimmingSpaces()
        }
        return EtcdGatewayClient(endpoints: settings.endpoints, caFile: settings.caFile, certFile: settings.certFile, keyFile: settings.keyFile,
                                 user: settings.user, password: password, requestTimeout: settings.requestTimeout)
    }
}
