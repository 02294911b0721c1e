import LanyardStore
import LanyardSupport

extension StoreGroupCommand {
    static let lock = CommandSpec(
        name: "store lock",
        summary: "forget the unlocked file store now",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: true,
        takesAccount: false,
        details: "Removes the cached identity from the kernel keyring; "
            + "the next command that needs the store asks for the passphrase again.",
        examples: [CommandExample("lanyard store lock", "lock the store before leaving the machine")]
    ) { inv in
        let (file, _) = try fileStore(inv)
        let was = file.lock()
        inv.emit(StoreLockView(wasUnlocked: was)) {
            inv.stdout.line(was ? "Locked the file store." : "The file store was not unlocked.")
        }
        return .ok
    }
}

/// `store lock --json`: the store is always locked afterwards.
struct StoreLockView: JSONView {
    static let keys = ["locked", "was_unlocked"]
    let wasUnlocked: Bool
    var json: JSONValue { .object(["locked": .bool(true), "was_unlocked": .bool(wasUnlocked)]) }
}
