// The example from docs/library.md: sign in if needed, then make a request as the account.
// CI builds it with the package; run it against the emulator with `make demo`-style config.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LanyardCore
import LanyardKit

@main
struct Example {
    static func main() async {
        do {
            let session = try AuthSession(configuration: Configuration(slot: CommandLine.arguments.dropFirst().first))
            Task {
                for await state in session.states { print("state:", state) }
            }
            if case .signedIn = session.state {} else {
                try await session.startDeviceCodeSignIn()
            }
            print("signed in as", session.accountInfo?.email ?? "?", "on", session.accountInfo?.plan?.displayName ?? "an unknown plan")

            let client = try Client(configuration: Configuration(slot: session.slot?.name))
            let usage = try await client.usage()
            print("primary window used:", usage.primary.map { "\(Int($0.usedPercent))%" } ?? "n/a")
        } catch ClientError.usageLimitReached(let limit) {
            print("limit reached on", limit.plan?.displayName ?? "your plan", "; resets", limit.resetsAt.map { "\($0)" } ?? "later")
        } catch ClientError.reauthenticationRequired(let slot, let reason) {
            print("sign \(slot) in again: \(reason)")
        } catch {
            print("error:", error.localizedDescription)
            exit(1)
        }
    }
}
