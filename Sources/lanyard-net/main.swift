// `lanyard` with HTTP: runs the commands that talk to a provider (login, logout, refresh, usage,
// ask, the refresh worker). Installed in lib/lanyard/; people run `lanyard`, which hands over to it.
import Foundation
import LanyardCLI
import LanyardNetwork

exit(lanyardMain(transportFactory: { URLSessionTransport(timeout: $0) }, streamFactory: { manager, slot, policy, request in
    ResponseStreamer(manager: manager, slot: slot, session: StreamingSession(), policy: policy).stream(request)
}))
