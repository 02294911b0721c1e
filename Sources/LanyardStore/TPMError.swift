import FoundationEssentials
import LanyardCore

/// Why a TPM-sealed file store could not be opened or sealed. None of them changes a file:
/// the store, its sealed identity and its recovery recipients stay as they are (exit status 5).
package enum TPMError: LanyardError, Equatable {
    /// libtss2 is not installed (or too old); `detail` names the library.
    case libraryMissing(detail: String)
    /// No TPM answers at `location` (a device path or a TCTI string).
    case notFound(location: String, detail: String)
    /// The TPM's device exists, but this user may not open it.
    case permissionDenied(device: String)
    /// The identity was sealed under another storage key than this TPM's: another machine's TPM
    /// (a copied home folder), or this TPM was cleared since. Names in hex, as tpm2-tools print them.
    case otherTPM(sealedUnder: String, thisTPM: String)
    /// The TPM is in dictionary-attack lockout; it forgets one failure every `secondsPerTry`.
    case lockout(secondsPerTry: Int?)
    /// The PIN was wrong; the TPM counted it. `triesLeft` before lockout, when the TPM tells.
    case wrongPIN(triesLeft: Int?)
    /// The TPM refused the sealed blobs under the right storage key: `identity.tpm` was altered.
    case refused(step: String, detail: String)
    /// Any other TPM or libtss2 failure: the call, its response code and libtss2's text for it.
    case failed(step: String, code: UInt32, detail: String)

    package var code: ErrorCode {
        switch self {
        case .libraryMissing, .notFound: .tpmUnavailable
        case .permissionDenied: .tpmPermissionDenied
        case .otherTPM: .tpmMismatch
        case .lockout: .tpmLockout
        case .wrongPIN: .tpmWrongPIN
        case .refused, .failed: .tpmFailed
        }
    }

    package var errorDescription: String? {
        let recovery = "open the store with its recovery key (`age -d -i RECOVERY-KEY store.age`, docs/security.md)"
        switch self {
        case .libraryMissing(let detail):
            return "the file store is sealed by a TPM, but libtss2 cannot be "
                + "loaded (\(detail)); install libtss2-esys-3.0.2-0, "
                + "libtss2-tctildr0, libtss2-mu0 and libtss2-rc0. Nothing was changed"
        case .notFound(let location, let detail):
            return "no TPM answers at \(location)\(detail.isEmpty ? "" : " (\(detail))"): "
                + "the file store's identity is sealed by a TPM, "
                + "so it stays shut until the TPM answers (TPM2TOOLS_TCTI, TCTI or [store] tpm-tcti name another one); "
                + "nothing was changed. If the TPM is gone for good, \(recovery)"
        case .permissionDenied(let device):
            return "permission denied opening \(device): on Debian the TPM belongs to group tss; add yourself with "
                + "`sudo usermod -aG tss $USER` and log in again. Nothing was changed"
        case .otherTPM(let sealed, let this):
            return "the file store was sealed by another TPM (storage key \(sealed)) "
                + "than this machine's (\(this)): this home "
                + "folder was copied from another machine, "
                + "or this TPM was cleared since. Nothing was changed; \(recovery), "
                + "and see docs/troubleshooting.md to seal it with this TPM"
        case .lockout(let seconds):
            return "the TPM is in dictionary-attack lockout after too many wrong PINs: it allows one more try "
                + (seconds.map { "every \($0) s" } ?? "after a while")
                + " (or clear it with `tpm2_dictionarylockout --clear-lockout`, "
                + "which needs the TPM's lockout password). Nothing was changed"
        case .wrongPIN(let tries):
            let left =
                switch tries {
                case 0?: "the TPM now locks out further tries"
                case 1?: "1 try left before the TPM locks out"
                case let n?: "\(n) tries left before the TPM locks out"
                case nil: "the TPM does not say how many tries are left"
                }
            return "wrong TPM PIN: the store was not opened and nothing changed (\(left))"
        case .refused(let step, let detail):
            return "the TPM refused the sealed identity (\(step)\(detail.isEmpty ? "" : ": \(detail)")): "
                + "identity.tpm was altered "
                + "or does not belong to this store. Nothing was changed; \(recovery)"
        case .failed(let step, let code, let detail):
            return "the TPM failed (\(step.isEmpty ? "TPM" : step), "
                + "code 0x\(String(code, radix: 16))\(detail.isEmpty ? "" : ": \(detail)")). "
                + "Nothing was changed"
        }
    }
}
