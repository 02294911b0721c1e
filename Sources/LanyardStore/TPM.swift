import CTPM
import FoundationEssentials
import Glibc
import LanyardSupport

/// A TPM 2.0 sealing and unsealing the file store's identity, through CTPM (libtss2, loaded on
/// first use). The only Swift file that calls CTPM; no C type leaves it.
///
/// Every call connects to the TPM ``TPMLocation`` names, makes the storage key again from its
/// template (nothing stays in the TPM), and disconnects: a few milliseconds on a simulator, tens
/// on a hardware TPM (docs/performance.md). The calls block: they run on the blocking executor,
/// like every store call.
package enum TPM {
    /// What sealing gives: the blobs for `identity.tpm` and the storage key they are under.
    package struct Sealed: Sendable, Equatable {
        package let publicBlob: [UInt8]
        package let privateBlob: [UInt8]
        package let storageKeyName: [UInt8]
    }

    /// What a TPM says about itself: its storage key's name and its dictionary-attack state.
    package struct Identity: Sendable, Equatable {
        package let storageKeyName: [UInt8]
        /// Wrong PINs the TPM accepts before it locks out, when it tells.
        package let triesLeft: Int?
        package let maxTries: Int?
    }

    /// Seals `secret` (at most 128 bytes) under the storage key of the TPM at `location`; a
    /// non-empty `auth` (at most 32 bytes) becomes the object's authValue.
    @available(*, noasync)
    package static func seal(_ secret: [UInt8], auth: [UInt8], at location: TPMLocation) throws(TPMError) -> Sealed {
        var outcome = lanyard_tpm_outcome()
        var publicBlob = [UInt8](repeating: 0, count: 1024)
        var privateBlob = [UInt8](repeating: 0, count: 2048)
        var publicSize = 0
        var privateSize = 0
        let status = publicBlob.withUnsafeMutableBufferPointer { pub in
            privateBlob.withUnsafeMutableBufferPointer { priv in
                withOptionalCString(location.tcti) { tcti in
                    lanyard_tpm_seal(
                        tcti,
                        secret,
                        secret.count,
                        auth,
                        auth.count,
                        pub.baseAddress,
                        pub.count,
                        &publicSize,
                        priv.baseAddress,
                        priv.count,
                        &privateSize,
                        &outcome
                    )
                }
            }
        }
        guard status == LANYARD_TPM_OK else { throw error(status, outcome, location: location, sealedUnder: nil) }
        return Sealed(
            publicBlob: Array(publicBlob.prefix(publicSize)),
            privateBlob: Array(privateBlob.prefix(privateSize)),
            storageKeyName: name(outcome)
        )
    }

    /// Unseals what ``seal(_:auth:at:)`` made, refusing (``TPMError/otherTPM(sealedUnder:thisTPM:)``)
    /// before loading anything when this TPM's storage key is not `storageKeyName`. The caller
    /// zeroes the returned bytes once used.
    @available(*, noasync)
    package static func unseal(
        publicBlob: [UInt8],
        privateBlob: [UInt8],
        storageKeyName: [UInt8],
        auth: [UInt8],
        at location: TPMLocation
    ) throws(TPMError) -> [UInt8] {
        var outcome = lanyard_tpm_outcome()
        var secret = [UInt8](repeating: 0, count: 256)
        var secretSize = 0
        let status = secret.withUnsafeMutableBufferPointer { out in
            withOptionalCString(location.tcti) { tcti in
                lanyard_tpm_unseal(
                    tcti,
                    storageKeyName,
                    storageKeyName.count,
                    publicBlob,
                    publicBlob.count,
                    privateBlob,
                    privateBlob.count,
                    auth,
                    auth.count,
                    out.baseAddress,
                    out.count,
                    &secretSize,
                    &outcome
                )
            }
        }
        defer { for i in secret.indices { secret[i] = 0 } }
        guard status == LANYARD_TPM_OK else {
            throw error(status, outcome, location: location, sealedUnder: storageKeyName)
        }
        return Array(secret.prefix(secretSize))
    }

    /// The storage key's name and the dictionary-attack state of the TPM at `location`.
    @available(*, noasync)
    package static func identify(at location: TPMLocation) throws(TPMError) -> Identity {
        var outcome = lanyard_tpm_outcome()
        let status = withOptionalCString(location.tcti) { lanyard_tpm_identify($0, &outcome) }
        guard status == LANYARD_TPM_OK else { throw error(status, outcome, location: location, sealedUnder: nil) }
        return Identity(
            storageKeyName: name(outcome),
            triesLeft: outcome.tries_left >= 0 ? Int(outcome.tries_left) : nil,
            maxTries: outcome.max_tries >= 0 ? Int(outcome.max_tries) : nil
        )
    }

    /// Whether libtss2 can be loaded here, or why not.
    package static func libraryProblem() -> String? {
        var reason: UnsafePointer<CChar>?
        return lanyard_tpm_load(&reason) == 1 ? nil : reason.map { String(cString: $0) } ?? "libtss2 cannot be loaded"
    }

    private static func withOptionalCString<T>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> T) -> T {
        guard let string else { return body(nil) }
        return string.withCString { body($0) }
    }

    private static func name(_ outcome: lanyard_tpm_outcome) -> [UInt8] {
        withUnsafeBytes(of: outcome.srk_name) { Array($0.prefix(min(outcome.srk_name_size, $0.count))) }
    }

    private static func error(
        _ status: lanyard_tpm_status,
        _ outcome: lanyard_tpm_outcome,
        location: TPMLocation,
        sealedUnder: [UInt8]?
    ) -> TPMError {
        let detail = String(nulTerminatedTuple: outcome.detail)
        let step = String(nulTerminatedTuple: outcome.step)
        let device = String(nulTerminatedTuple: outcome.device)
        switch status {
        case LANYARD_TPM_LIBRARY_MISSING: return .libraryMissing(detail: detail)
        case LANYARD_TPM_NOT_FOUND:
            return .notFound(location: device.isEmpty ? location.description : device, detail: detail)
        case LANYARD_TPM_PERMISSION: return .permissionDenied(device: device.isEmpty ? location.description : device)
        case LANYARD_TPM_OTHER_TPM:
            return .otherTPM(
                sealedUnder: SealedIdentityFile.hex(sealedUnder ?? []),
                thisTPM: SealedIdentityFile.hex(name(outcome))
            )
        case LANYARD_TPM_LOCKOUT:
            return .lockout(secondsPerTry: outcome.lockout_interval > 0 ? Int(outcome.lockout_interval) : nil)
        case LANYARD_TPM_AUTH_FAIL:
            return .wrongPIN(triesLeft: outcome.tries_left >= 0 ? Int(outcome.tries_left) : nil)
        case LANYARD_TPM_BAD_BLOB: return .refused(step: step, detail: detail)
        default: return .failed(step: step, code: outcome.rc, detail: detail)
        }
    }
}

/// Where the TPM is: a TCTI configuration string as tpm2-tools take it
/// (`device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=2321`, `tabrmd`), or nil for libtss2's
/// default loader (the resource manager `/dev/tpmrm0`, then `/dev/tpm0`, …).
package struct TPMLocation: Sendable, Equatable, CustomStringConvertible {
    /// The variables that name the TCTI, in the order tpm2-tools read them.
    package static let variables = ["TPM2TOOLS_TCTI", "TCTI"]

    package let tcti: String?
    /// Where ``tcti`` came from: a variable's name, `[store] tpm-tcti`, or nil for the default.
    package let source: String?

    package init(tcti: String?, source: String?) {
        self.tcti = tcti
        self.source = source
    }

    /// `TPM2TOOLS_TCTI`, then `TCTI`, then config.ini's `[store] tpm-tcti`, else the default.
    /// `environment` nil reads the process's variables.
    package static func resolve(environment: [String: String]?, configured: String?) -> TPMLocation {
        for name in variables {
            let value = environment.map { $0[name] } ?? getenv(name).map { String(cString: $0) }
            if let value, !value.isEmpty { return TPMLocation(tcti: value, source: name) }
        }
        if let configured, !configured.isEmpty { return TPMLocation(tcti: configured, source: "[store] tpm-tcti") }
        return TPMLocation(tcti: nil, source: nil)
    }

    /// The TCTI string, or `/dev/tpmrm0` for the default.
    package var description: String { tcti ?? "/dev/tpmrm0" }
}
