import FoundationEssentials
import LanyardCore

/// How a fleet reaches etcd by default.
package enum FleetConnection {
    /// The v3 JSON gateway client for `settings`.
    package static let gateway: @Sendable (FleetSettings) throws -> any EtcdKV = { settings in
        throw FleetError.unavailable(fleet: settings.name, endpoints: settings.endpoints, detail: "the etcd client is not built yet")
    }
}
