import FoundationEssentials
import LanyardAuth
import LanyardCore
import LanyardSupport

extension AuthCommands {
    static let refresh = CommandSpec(
        name: "refresh",
        summary: "refresh a slot's tokens now (or every slot with --all)",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [FlagSpec("all", "refresh every signed-in slot")],
        prints: true,
        takesAccount: true,
        details: """
            A refresh another process is already doing is waited for and adopted, never repeated. A permanent failure \
            marks the slot for sign-in again (exit 4); a transient one changes nothing (exit 6).
            """,
        examples: [
            CommandExample("lanyard refresh", "refresh the resolved slot now, whether due or not"),
            CommandExample("lanyard refresh --all --json", "refresh every signed-in slot, one result each"),
        ],
        network: true
    ) { inv in
        let manager = try inv.accounts()
        let slots: [Slot]
        if inv.args.has("all") {
            guard inv.args.positionals.isEmpty else {
                throw UsageError(message: "give a SLOT or --all, not both", command: "refresh")
            }
            slots = try manager.signedInSlots()
        } else {
            slots = [try inv.targetSlot(positional: inv.args.positionals.first).0]
        }
        var results: [RefreshView.Result] = []
        var worst: ExitStatus = .ok
        for slot in slots {
            do {
                let credential = try inv.runAsync { try await manager.freshCredential(slot: slot, force: true) }
                if credential.isPersonalAccessToken {
                    // Nothing was sent: a personal access token has no refresh token.
                    results.append(.doesNotRotate(slot))
                    if !inv.json {
                        inv.stdout.line(
                            "\(slot.name) holds a personal access token, which does not rotate: nothing to refresh."
                        )
                    }
                    continue
                }
                results.append(.refreshed(slot, expiresAt: credential.tokens.expiresAt))
                if !inv.json {
                    let expiry =
                        credential.tokens.expiresAt.map { ", expires \(RelativeTime.describe($0, now: inv.now))" } ?? ""
                    if let machine = manager.adoptedFrom(slot, credential) {
                        // Another machine of the fleet refreshed it first: this one took its tokens.
                        let when = credential.lastRefresh.map { " \(RelativeTime.describe($0, now: inv.now))" } ?? ""
                        inv.stdout.line("\(slot.name): adopted the tokens \(machine) refreshed\(when)\(expiry).")
                    } else {
                        inv.stdout.line("Refreshed \(slot.name)\(expiry).")
                    }
                }
            } catch let error as any LanyardError where slots.count > 1 {
                results.append(.failed(slot, ErrorView(error)))
                if !inv.json { inv.stderr.line("lanyard: \(slot.name): \(error.userFacingDescription)") }
                if worst == .ok { worst = error.exitStatus }
            }
        }
        if inv.json { inv.emit(RefreshView(results: results)) {} }
        return worst
    }
}

/// `refresh --json`: one result per slot, in order.
struct RefreshView: JSONView {
    enum Result {
        case refreshed(Slot, expiresAt: Date?)
        /// A personal access token: skipped, nothing to refresh.
        case doesNotRotate(Slot)
        case failed(Slot, ErrorView)

        var json: JSONValue {
            switch self {
            case .refreshed(let slot, let expiresAt):
                .object(["slot": .string(slot.name), "ok": .bool(true), "expires_at": .date(expiresAt)])
            case .doesNotRotate(let slot):
                .object(["slot": .string(slot.name), "ok": .bool(true), "rotates": .bool(false)])
            case .failed(let slot, let error):
                .object(["slot": .string(slot.name), "ok": .bool(false), "error": error.json["error"] ?? .null])
            }
        }
    }

    static let keys = ["results"]
    let results: [Result]
    var json: JSONValue { .object(["results": .array(results.map(\.json))]) }
}
