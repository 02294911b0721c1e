import FoundationEssentials
import LanyardCore

/// The last place refreshed tokens can wait when no file takes them (a full or failing disk): the
/// kernel user keyring, in memory, until a later command or `doctor --repair` writes them to the
/// store. A refresh has by then spent the old refresh token at the server, so these tokens are
/// the sign-in itself. Keys are named after the data folder and the slot; they live until they
/// are settled or the machine restarts.
package enum RefreshEscrow {
    static func name(_ slot: Slot, _ paths: Paths) -> String { "lanyard-refreshed:\(paths.dataDirectory):\(slot.name)" }

    /// Keeps `document` (a credential's JSON) for `slot`; false when the kernel keyring refused.
    @discardableResult
    package static func put(_ document: Data, slot: Slot, paths: Paths) -> Bool {
        (try? KernelKeyring.store(name: name(slot, paths), secret: Array(document), timeout: 0)) != nil
    }

    /// What waits for `slot`, if anything.
    package static func get(slot: Slot, paths: Paths) -> Data? {
        KernelKeyring.load(name: name(slot, paths)).map { Data($0) }
    }

    /// Forgets what waits for `slot` (once the store holds it).
    package static func remove(slot: Slot, paths: Paths) { KernelKeyring.remove(name: name(slot, paths)) }
}
