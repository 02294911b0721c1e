// `lanyard` with HTTP: runs the commands that talk to a provider (login, logout, refresh, usage,
// ask, the refresh worker). Installed in lib/lanyard/; people run `lanyard`, which hands over to it.
import Foundation
import LanyardCLI
import LanyardNetwork

// Before anything else (and before any thread): FoundationNetworking's shared stores would
// otherwise make folders in $XDG_DATA_HOME and $XDG_CACHE_HOME.
SessionConfiguration.makeFoundationStoresWithoutFolders()

exit(
    lanyardMain(
        transportFactory: { CurlTransport(timeout: $0) },
        streamFactory: { manager, slot, policy, request in
            ResponseStreamer(manager: manager, slot: slot, session: StreamingSession(), policy: policy).stream(request)
        }
    )
)
