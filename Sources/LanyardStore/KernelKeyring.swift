import CKeyutils
import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSystem

/// The kernel user keyring (keyutils): where an unlocked file-store identity waits, with a timeout,
/// so a session pays for one scrypt. The only file that touches libkeyutils.
enum KernelKeyring {
    /// Why the user keyring cannot be used here (containers whose seccomp profile blocks keyctl,
    /// kernels without keys support), or nil when it can.
    static func unavailableReason() -> String? {
        keyctl_get_keyring_ID(KEY_SPEC_USER_KEYRING, 0) >= 0 ? nil : SystemCallError.reason()
    }

    /// Stores `secret` under `name` in the user keyring, replacing an older key of that name.
    static func store(name: String, secret: [UInt8], timeout: TimeInterval) throws(StoreError) {
        let serial = secret.withUnsafeBytes { add_key("user", name, $0.baseAddress, $0.count, KEY_SPEC_USER_KEYRING) }
        guard serial >= 0 else {
            throw .unavailable(
                backend: "kernel keyring",
                hint: "cannot cache the unlocked store (\(SystemCallError.reason())); "
                    + "set LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS so each command can open it, "
                    + "or use a store made with `lanyard store init --no-passphrase`"
            )
        }
        if timeout > 0 { _ = keyctl_set_timeout(serial, UInt32(min(timeout, Double(UInt32.max)))) }
    }

    /// The secret stored under `name`, or nil when there is none (or it timed out).
    static func load(name: String) -> [UInt8]? {
        let serial = keyctl_search(KEY_SPEC_USER_KEYRING, "user", name, 0)
        guard serial >= 0 else { return nil }
        var buffer: UnsafeMutableRawPointer?
        let length = keyctl_read_alloc(key_serial_t(serial), &buffer)
        guard length >= 0, let buffer else { return nil }
        defer {
            memset(buffer, 0, Int(length))
            free(buffer)
        }
        return Array(UnsafeRawBufferPointer(start: buffer, count: Int(length)))
    }

    /// Removes the key named `name`; false when there was none.
    @discardableResult
    static func remove(name: String) -> Bool {
        let serial = keyctl_search(KEY_SPEC_USER_KEYRING, "user", name, 0)
        guard serial >= 0 else { return false }
        return keyctl_invalidate(key_serial_t(serial)) == 0
            || keyctl_unlink(key_serial_t(serial), KEY_SPEC_USER_KEYRING) == 0
    }
}
