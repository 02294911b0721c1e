import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport
import LanyardSystem

/// Failures of a credential backend. None of them deletes or replaces stored data.
public enum StoreError: LanyardError, Equatable {
    /// No backend to talk to (no D-Bus session, no Secret Service, no store file); `hint` says what
    /// to do; `cause`, the error the backend reported, when there was one (a GLib error).
    case unavailable(backend: String, hint: String, cause: ErrorCause? = nil)
    /// The keyring collection or encrypted store is locked.
    case locked(backend: String, hint: String)
    /// The backend did not answer within the configured time.
    case timedOut(backend: String, operation: String, seconds: Double)
    /// Stored data did not decode; it was left as it is.
    case corrupt(source: String, detail: String)
    /// The slot has no stored credential.
    case notFound(slot: Slot)
    /// A wrong passphrase or identity.
    case wrongPassphrase
    /// A wrong passphrase from a file or program (`LANYARD_PASSPHRASE_FILE PATH`), named so the
    /// file can be checked; never the passphrase.
    case wrongPassphraseFrom(source: String)
    /// A path Lanyard refuses to use (symlink, foreign owner, wrong type).
    case unsafePath(path: String, reason: String)
    /// A file or system call failed; `cause` is the error it reported (the system call's errno, a
    /// GLib error) when there was one, whose text `detail` already holds.
    case io(path: String, detail: String, cause: ErrorCause? = nil)
    /// Tokens a refresh obtained could not be stored (`storeFailure` says why); they wait in the
    /// recovery file at `path` until `doctor --repair` or the next refresh stores them.
    case refreshedTokensInRecoveryFile(path: String, storeFailure: String)
    /// Tokens a refresh obtained could be written neither to the store nor to the recovery file
    /// at `path`; they wait in memory, in the kernel keyring, until the machine restarts.
    case refreshedTokensInKernelKeyring(path: String, storeFailure: String, fileFailure: String)
    /// Tokens a refresh obtained could be kept nowhere (not the recovery file at `path`, not the
    /// kernel keyring, not the store), and the server has already replaced the refresh token:
    /// the slot must sign in again.
    case refreshedSignInLost(slot: Slot, path: String, storeFailure: String, fileFailure: String)

    public var code: ErrorCode {
        switch self {
        case .unavailable: return .storeUnavailable
        case .locked: return .storeLocked
        case .timedOut: return .storeTimedOut
        case .corrupt: return .storeCorrupt
        case .notFound: return .missingCredential
        case .wrongPassphrase, .wrongPassphraseFrom: return .wrongPassphrase
        case .unsafePath: return .unsafePath
        case .io: return .ioError
        case .refreshedTokensInRecoveryFile: return .refreshedTokensInRecoveryFile
        case .refreshedTokensInKernelKeyring: return .refreshedTokensInKernelKeyring
        case .refreshedSignInLost: return .refreshedSignInLost
        }
    }

    public var errorDescription: String? {
        switch self {
        case .unavailable(let backend, let hint, _): return "\(backend) is unavailable: \(hint)"
        case .locked(let backend, let hint): return "\(backend) is locked: \(hint)"
        case .timedOut(let backend, let op, let s):
            return "\(backend) did not answer \(op) within \(Self.seconds(s)) (is a keyring prompt waiting?)"
        case .corrupt(let source, let detail): return "\(source) is corrupt (left untouched): \(detail)"
        case .notFound(let slot):
            return "slot \(slot.name) has no stored credential; sign in with `lanyard login \(slot.name)`"
        case .wrongPassphrase: return "wrong passphrase: the store was not unlocked and nothing changed"
        case .wrongPassphraseFrom(let source):
            return "wrong passphrase (from \(source)): the store was not "
                + "unlocked and nothing changed; check the passphrase there"
        case .unsafePath(let path, let reason): return "refusing to use \(path): \(reason)"
        case .io(let path, let detail, _): return "\(path): \(detail)"
        case .refreshedTokensInRecoveryFile(let path, let store):
            return "\(path): refreshed tokens could not be stored (\(store)); "
                + "they are kept in this recovery file: run `lanyard doctor --repair` once the store works"
        case .refreshedTokensInKernelKeyring(let path, let store, let file):
            return
                "\(path): refreshed tokens could be written neither to the store (\(store)) nor to this recovery file "
                + "(\(file)); they wait in memory, in the kernel keyring: "
                + "run `lanyard doctor --repair` once the store works "
                + "(free some disk space if the disk is full), before this machine restarts"
        case .refreshedSignInLost(let slot, let path, let store, let file):
            return "\(path): refreshed tokens could be written neither to "
                + "this recovery file (\(file)), the kernel keyring, "
                + "nor the store (\(store)); the server has already "
                + "replaced the refresh token, so this sign-in is lost: "
                + "run `lanyard login \(slot.name)`"
        }
    }

    static func seconds(_ s: Double) -> String {
        s == s.rounded() ? "\(s.saturatingInt) s" : "\((s * 10).rounded() / 10) s"
    }
}

/// Failures reading or changing the registry of slots.
public enum RegistryError: LanyardError, Equatable {
    /// The registry did not parse; it was moved to `movedTo` and is reported, never treated as empty.
    case corrupt(path: String, movedTo: String, detail: String)
    /// No such slot; `chosenBy` says which rule named it, when one did (`pinned by ./.lanyard`).
    case unknownSlot(Slot, chosenBy: String? = nil)
    /// The name is taken; `holdsAnotherAccount` when an import was refused because the slot
    /// holds another account than the one imported.
    case slotExists(Slot, holdsAnotherAccount: Bool = false)
    /// A sign-in into a slot came back as another account than the one the slot holds.
    case slotHoldsAnotherAccount(Slot, holds: String, signedIn: String)
    /// Another process is signing an account into the slot (its pid, when it wrote one).
    case signInInProgress(Slot, pid: Int32?)
    case noActiveSlot

    public var code: ErrorCode {
        switch self {
        case .corrupt: return .registryCorrupt
        case .unknownSlot: return .unknownSlot
        case .slotExists: return .slotExists
        case .noActiveSlot: return .noActiveSlot
        case .slotHoldsAnotherAccount: return .slotHoldsAnotherAccount
        case .signInInProgress: return .signInInProgress
        }
    }

    public var errorDescription: String? {
        switch self {
        case .corrupt(let path, let moved, let detail):
            return "registry \(path) did not parse (\(detail)); it was moved to \(moved). "
                + "Run `lanyard doctor --repair` to rebuild it from the credential store."
        case .unknownSlot(let s, let rule):
            return "no slot named \(s.name) (\(rule.map { "\($0); " } ?? "")see `lanyard list`)"
        case .slotExists(let s, let another):
            return "a slot named \(s.name) already exists"
                + (another ? " and holds another account; give another SLOT" : "")
        case .signInInProgress(let s, let pid):
            return "a sign-in for \(s.name) is already in progress" + (pid.map { " (pid \($0))" } ?? "")
                + "; finish or cancel it first"
        case .slotHoldsAnotherAccount(let slot, let holds, let signedIn):
            let s = slot.name
            return "slot \(s) holds \(holds), but the sign-in was approved as \(signedIn); nothing was stored. "
                + "Sign in to another slot (`lanyard login SLOT`), "
                + "or replace \(s)'s account with `lanyard login \(s) --replace`"
        case .noActiveSlot:
            return "no slot is active; sign in with `lanyard login` or choose one with `lanyard switch SLOT`"
        }
    }
}

extension StoreError {
    /// The error behind ``io(path:detail:cause:)`` or ``unavailable(backend:hint:cause:)``: the
    /// system call's or GLib's.
    public var underlying: (any Error)? {
        switch self {
        case .io(_, _, let cause?), .unavailable(_, _, let cause?): cause.error
        default: nil
        }
    }

    /// `call` on `path` failed with `errno` (by default the one it just set): an
    /// ``io(path:detail:cause:)`` whose detail is `doing` (when given) and the errno's text, and
    /// whose cause is the ``SystemCallError``.
    package static func systemCall(
        _ call: String,
        path: String,
        doing: String? = nil,
        errno: Int32 = Glibc.errno
    ) -> StoreError {
        let error = SystemCallError(call, path, errno: errno)
        return .io(path: path, detail: doing.map { "\($0): \(error.reason)" } ?? error.reason, cause: ErrorCause(error))
    }
}

extension StoreError: SlotNamingError {
    package var slotName: String? {
        switch self {
        case .notFound(let slot), .refreshedSignInLost(let slot, _, _, _): slot.name
        default: nil
        }
    }
}

extension RegistryError: SlotNamingError {
    package var slotName: String? {
        switch self {
        case .unknownSlot(let slot, _), .slotExists(let slot, _), .slotHoldsAnotherAccount(let slot, _, _),
            .signInInProgress(let slot, _):
            slot.name
        case .corrupt, .noActiveSlot: nil
        }
    }
}

/// Failures reading the configuration file.
public enum ConfigError: LanyardError, Equatable {
    /// The file does not parse; `line` is 1-based when known.
    case malformed(path: String, line: Int?, detail: String)
    /// A key has a value Lanyard cannot use; `key` is empty when the group itself is wrong, `line`
    /// the 1-based line of the key (or of the group) when known.
    case invalidValue(path: String, group: String, key: String, detail: String, line: Int? = nil)

    public var code: ErrorCode { .configInvalid }

    /// Everything in it comes from the file (group and key names, values quoted in the detail):
    /// shown with control characters escaped, for every program that prints it.
    public var errorDescription: String? {
        switch self {
        case .malformed(let path, let line, let detail):
            return TerminalText.escaped("\(path)\(line.map { ":\($0)" } ?? ""): \(detail)")
        case .invalidValue(let path, let group, let key, let detail, let line):
            return TerminalText.escaped(
                "\(path)\(line.map { ":\($0)" } ?? ""): [\(group)]\(key.isEmpty ? "" : " \(key)"): \(detail)"
            )
        }
    }
}
