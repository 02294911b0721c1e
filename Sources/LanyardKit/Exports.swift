// What a program gets from `import LanyardKit` alone. The modules below declare `package` access
// for everything but the types listed here and LanyardCore's vocabulary, so this file and
// Tests/RepositoryChecks/PublicAPI.txt (checked by PublicSurfaceTests) are the whole public surface. Foundation (URL, Date, Data in the API) and
// LanyardCore, the shared vocabulary (slots, states, account info, plans, policies), are
// re-exported whole; LanyardNetwork brings URLRequest and URLSession on Linux. From the lower layers only the types that LanyardKit's API
// hands out or throws are re-exported, one by one; `PublicSurfaceTests` fails when a public
// signature here names a type that is not on this list.
@_exported import Foundation
@_exported import LanyardCore
@_exported import LanyardNetwork

@_exported import enum LanyardSupport.JSONValue
@_exported import struct LanyardSupport.DecodeError

@_exported import enum LanyardStore.StoreError
@_exported import enum LanyardStore.RegistryError
@_exported import enum LanyardStore.ConfigError
@_exported import enum LanyardStore.BackendKind
@_exported import struct LanyardStore.StoreHealth
@_exported import struct LanyardStore.SlotRecord
@_exported import struct LanyardStore.RegistryDocument
@_exported import struct LanyardStore.MigrationStep

@_exported import enum LanyardAuth.ClientError
@_exported import enum LanyardAuth.AuthError
@_exported import protocol LanyardAuth.HTTPTransport
@_exported import struct LanyardAuth.HTTPRequest
@_exported import struct LanyardAuth.HTTPResponse
@_exported import struct LanyardAuth.TransportError
@_exported import struct LanyardAuth.UsageReport
@_exported import struct LanyardAuth.UsageCredits
@_exported import struct LanyardAuth.AdditionalUsageLimit
@_exported import struct LanyardAuth.UsageErrorText
@_exported import struct LanyardAuth.DoctorReport
@_exported import struct LanyardAuth.RenameOutcome
@_exported import struct LanyardAuth.ActiveSlotChange
@_exported import struct LanyardAuth.UnpinOutcome
@_exported import struct LanyardAuth.SignOutOutcome
@_exported import struct LanyardAuth.NotRevokedError
@_exported import enum LanyardAuth.FleetSyncOutcome
@_exported import enum LanyardAuth.FleetSignInOutcome
@_exported import struct LanyardAuth.FleetStatusReport
@_exported import struct LanyardAuth.FleetRemoval

@_exported import enum LanyardFleet.FleetError
@_exported import struct LanyardFleet.FleetMember
@_exported import struct LanyardFleet.EtcdEndpointStatus
@_exported import enum LanyardFleet.EtcdAccessStatus

@_exported import struct LanyardIntegrations.SwitchOutcome
@_exported import struct LanyardIntegrations.CodexFollow
@_exported import struct LanyardIntegrations.BestSlotChoice
@_exported import struct LanyardIntegrations.SlotCandidate
@_exported import enum LanyardIntegrations.AutoSwitchOutcome
@_exported import struct LanyardIntegrations.AutoSwitchDone
@_exported import struct LanyardIntegrations.UsageShortfall
@_exported import enum LanyardIntegrations.IntegrationError
@_exported import struct LanyardIntegrations.ExecFolderRecovery
@_exported import struct LanyardIntegrations.ExecOutcome
@_exported import enum LanyardIntegrations.ExecError
