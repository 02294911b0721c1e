// The example from docs/library.md, built with the package so it never rots and run end to end
// against the ChatGPT emulator by LanyardKitTests. It imports LanyardKit alone.
//
//   lanyard-example [SLOT [NEW-NAME]]
//
// Signs SLOT in when it is not (printing the device code), lists the slots, makes SLOT the active
// one, renames it to NEW-NAME when given, takes a fresh token (printing only its length), reads
// the usage windows and runs the doctor's checks.
import LanyardKit

@main
struct Example {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            let session = try AuthSession(configuration: Configuration(slot: arguments.first))
            if case .signedIn = session.state {
            } else {
                let states = session.states
                let watcher = Task {
                    for await state in states {
                        if case .awaitingDeviceCode(let code, let url) = state {
                            print("open \(url) and enter the code: \(code)")
                            fflush(nil)  // into a pipe too: whoever approves the code must see it now
                        }
                        if case .signedIn = state { break }
                    }
                }
                try await session.startDeviceCodeSignIn()
                await watcher.value
            }
            guard var slot = session.slot else { return }
            let who = session.accountInfo?.email ?? "?"
            print(
                "signed in as \(who) on \(session.accountInfo?.plan?.displayName ?? "an unknown plan") "
                    + "in slot \(slot.name)"
            )

            let accounts = try Accounts()
            let registry = try accounts.list()
            print("slots:", registry.sortedSlots.map { "\($0.slot.name) (\($0.record.state))" }.joined(separator: ", "))

            let switched = try await accounts.switchActive(to: slot)
            print("active: \(switched.change.active.name) (was \(switched.change.previous?.name ?? "none"))")

            if arguments.count > 1 {
                let renamed = try accounts.rename(slot, to: try Slot(arguments[1]))
                slot = renamed.to
                print("renamed \(renamed.from.name) to \(renamed.to.name)")
            }

            let client = try Client(configuration: Configuration(slot: slot.name))
            // Never print a token: its length shows that one came back.
            print("token: \(try await client.accessToken().count) characters")
            do {
                let usage = try await client.usage()
                // Windows are named by their length (5 h, weekly, monthly…), not by their place.
                for window in usage.windows {
                    print("\(window.length?.name ?? "window") used: \(Int(window.usedPercent))%")
                }
            } catch ClientError.usageLimitReached(let limit) {
                print(
                    "limit reached on",
                    limit.plan?.displayName ?? "your plan",
                    "; resets",
                    limit.resetsAt.map { "\($0)" } ?? "later"
                )
            }

            let report = try accounts.diagnose()
            print("doctor:", report.problems.isEmpty ? "no problems" : report.problems.joined(separator: "; "))
        } catch ClientError.reauthenticationRequired(let slot, let reason) {
            print("sign \(slot) in again: \(reason)")
            exit(4)
        } catch {
            print("error:", error.localizedDescription)
            exit(1)
        }
    }
}
