// What a program gets from `import LanyardKit` alone. The modules below declare `package` access
// for most of what they hold, so this file and Tests/RepositoryChecks/PublicAPI.txt (checked by
// PublicSurfaceTests, which lists exactly what is re-exported here) are the whole public surface.
// Foundation (URL, Date, Data in the API) is re-exported whole, and LanyardNetwork, which brings
// URLRequest and URLSession on Linux. From LanyardCore (the shared vocabulary: slots, states,
// account info, plans, policies, error codes) and the lower layers only the types that
// LanyardKit's API hands out or throws are re-exported, one by one (LanyardCore's Credential,
// TokenSet, LanyardConfig, JWTClaims and the clocks, which none of them names, are `package`);
// `PublicSurfaceTests` fails when a public signature here, or of a type listed here, names a type
// that is not on this list.
@_exported import Foundation
@_exported import LanyardNetwork

@_exported import struct LanyardAuth.ActiveSlotChange
@_exported import struct LanyardAuth.AdditionalUsageLimit
@_exported import enum LanyardAuth.AuthError
@_exported import enum LanyardAuth.ClientError
@_exported import struct LanyardAuth.DoctorReport
@_exported import struct LanyardAuth.FleetRemoval
@_exported import enum LanyardAuth.FleetSignInOutcome
@_exported import struct LanyardAuth.FleetStatusReport
@_exported import enum LanyardAuth.FleetSyncOutcome
@_exported import struct LanyardAuth.HTTPRequest
@_exported import struct LanyardAuth.HTTPResponse
@_exported import protocol LanyardAuth.HTTPTransport
@_exported import struct LanyardAuth.NotRevokedError
@_exported import struct LanyardAuth.RenameOutcome
@_exported import struct LanyardAuth.SignOutOutcome
@_exported import struct LanyardAuth.TransportError
@_exported import struct LanyardAuth.UnpinOutcome
@_exported import struct LanyardAuth.UsageCredits
@_exported import struct LanyardAuth.UsageErrorText
@_exported import struct LanyardAuth.UsageReport
@_exported import struct LanyardCore.AccountInfo
@_exported import struct LanyardCore.AccountResolution
@_exported import struct LanyardCore.AccountResolutionError
@_exported import enum LanyardCore.AuthState
@_exported import struct LanyardCore.BackoffPolicy
@_exported import struct LanyardCore.BootInstant
@_exported import struct LanyardCore.ErrorCause
@_exported import struct LanyardCore.ErrorCode
@_exported import protocol LanyardCore.LanyardError
@_exported import struct LanyardCore.Plan
@_exported import struct LanyardCore.ResponseRequest
@_exported import struct LanyardCore.ResponseStream
@_exported import struct LanyardCore.ResponseUsage
@_exported import struct LanyardCore.ServerErrorDetail
@_exported import struct LanyardCore.Slot
@_exported import enum LanyardCore.SlotNameError
@_exported import enum LanyardCore.StreamEvent
@_exported import struct LanyardCore.StreamResponse
@_exported import enum LanyardCore.StreamTransport
@_exported import struct LanyardCore.StreamingTransportPolicy
@_exported import struct LanyardCore.UsageLimit
@_exported import struct LanyardCore.UsageSnapshot
@_exported import struct LanyardCore.UsageWindow
@_exported import enum LanyardCore.UsageWindowLength
@_exported import enum LanyardFleet.EtcdAccessStatus
@_exported import struct LanyardFleet.EtcdEndpointStatus
@_exported import enum LanyardFleet.FleetError
@_exported import struct LanyardFleet.FleetMember
@_exported import struct LanyardIntegrations.AutoSwitchDone
@_exported import enum LanyardIntegrations.AutoSwitchOutcome
@_exported import struct LanyardIntegrations.BestSlotChoice
@_exported import struct LanyardIntegrations.CodexFollow
@_exported import enum LanyardIntegrations.ExecError
@_exported import struct LanyardIntegrations.ExecFolderRecovery
@_exported import struct LanyardIntegrations.ExecOutcome
@_exported import enum LanyardIntegrations.IntegrationError
@_exported import struct LanyardIntegrations.SlotCandidate
@_exported import struct LanyardIntegrations.SwitchOutcome
@_exported import struct LanyardIntegrations.UsageShortfall
@_exported import enum LanyardStore.BackendKind
@_exported import enum LanyardStore.ConfigError
@_exported import struct LanyardStore.MigrationStep
@_exported import struct LanyardStore.RegistryDocument
@_exported import enum LanyardStore.RegistryError
@_exported import struct LanyardStore.SlotRecord
@_exported import enum LanyardStore.StoreError
@_exported import struct LanyardStore.StoreHealth
@_exported import struct LanyardSupport.DecodeError
@_exported import enum LanyardSupport.JSONValue
