// Sealing and unsealing a small secret with a TPM 2.0 through libtss2 (esys, tctildr, mu, rc),
// which is loaded with dlopen on first use, so that only a process that opens a TPM-sealed file
// store pays for it (like libcurl in CCurl). No libtss2 type leaves tpm.c: blobs cross this
// boundary as bytes marshalled with libtss2-mu (TPM2B_PUBLIC, TPM2B_PRIVATE).
//
// The parent of every sealed object is the storage hierarchy's primary key, created again from
// the same template on every call (so nothing is kept in the TPM): the key of
// `tpm2_createprimary -C o -G ecc` with noDA added (ECC NIST P-256, SHA-256 name, AES-128-CFB, a
// restricted decryption key with fixedTPM, fixedParent, sensitiveDataOrigin, userWithAuth and
// noDA, empty unique; docs/store-format.md has the command). Commands carrying the secret run in
// an HMAC session salted with that key, with parameter encryption both ways.
#ifndef LANYARD_TPM_H
#define LANYARD_TPM_H

#include <stddef.h>
#include <stdint.h>

/// How a call ended.
typedef enum {
    LANYARD_TPM_OK = 0,
    /// libtss2 could not be loaded (the outcome's detail says which library).
    LANYARD_TPM_LIBRARY_MISSING = 1,
    /// No TPM answers where the TCTI points (no device, or nothing listening on the socket).
    LANYARD_TPM_NOT_FOUND = 2,
    /// The TPM's device exists but this user may not open it (the outcome names the device).
    LANYARD_TPM_PERMISSION = 3,
    /// This TPM's storage key is not the one the object was sealed under: another TPM, or this
    /// one cleared since.
    LANYARD_TPM_OTHER_TPM = 4,
    /// The TPM is in dictionary-attack lockout.
    LANYARD_TPM_LOCKOUT = 5,
    /// The authorization value (the PIN) was wrong; the TPM counted a failure.
    LANYARD_TPM_AUTH_FAIL = 6,
    /// The blobs do not unmarshal, or the TPM refuses them (integrity check).
    LANYARD_TPM_BAD_BLOB = 7,
    /// Any other TPM or TSS failure (the outcome has the code, the step and its text).
    LANYARD_TPM_FAILED = 8,
} lanyard_tpm_status;

/// What went wrong, and what the TPM said about its dictionary-attack state.
typedef struct {
    uint32_t rc;                   ///< the TSS2_RC of the failing call; 0 when none
    char step[48];                 ///< the failing call ("Esys_Unseal"), or empty
    char detail[256];              ///< Tss2_RC_Decode's text, or the system's error, or empty
    char device[128];              ///< the device for NOT_FOUND and PERMISSION, when it is one
    int tries_left;                ///< MAX_AUTH_FAIL - LOCKOUT_COUNTER, or -1 when unknown
    int max_tries;                 ///< TPM2_PT_MAX_AUTH_FAIL, or -1 when unknown
    uint32_t lockout_interval;     ///< seconds before one failure is forgotten (0: unknown)
    uint8_t srk_name[68];          ///< the name of this TPM's storage key (when it was made)
    size_t srk_name_size;
} lanyard_tpm_outcome;

/// Loads libtss2 (once per process). Returns 1, or 0 with *error (when error is not NULL) saying
/// why.
int lanyard_tpm_load(const char **error);

/// Seals `secret` (at most 128 bytes) into a keyedhash object under the storage key of the TPM
/// `tcti` names (NULL: the default TCTI, the resource manager /dev/tpmrm0). `auth` (at most 32
/// bytes; size 0 for none) becomes the object's authValue; with none, the object is noDA (usable
/// while the TPM is in lockout). Writes the marshalled TPM2B_PUBLIC and TPM2B_PRIVATE and the
/// storage key's name (into outcome->srk_name).
lanyard_tpm_status lanyard_tpm_seal(const char *tcti, const uint8_t *secret, size_t secret_size,
                                    const uint8_t *auth, size_t auth_size,
                                    uint8_t *public_blob, size_t public_capacity, size_t *public_size,
                                    uint8_t *private_blob, size_t private_capacity, size_t *private_size,
                                    lanyard_tpm_outcome *outcome);

/// Unseals what lanyard_tpm_seal made, after checking that this TPM's storage key has the name
/// `srk_name` (LANYARD_TPM_OTHER_TPM otherwise, before the object is loaded). On AUTH_FAIL and
/// LOCKOUT, outcome has the TPM's tries left and lockout interval when it tells them.
lanyard_tpm_status lanyard_tpm_unseal(const char *tcti, const uint8_t *srk_name, size_t srk_name_size,
                                      const uint8_t *public_blob, size_t public_size,
                                      const uint8_t *private_blob, size_t private_size,
                                      const uint8_t *auth, size_t auth_size,
                                      uint8_t *secret, size_t secret_capacity, size_t *secret_size,
                                      lanyard_tpm_outcome *outcome);

/// The name of the storage key of the TPM `tcti` names (into outcome->srk_name), and its
/// dictionary-attack state (tries_left, max_tries, lockout_interval).
lanyard_tpm_status lanyard_tpm_identify(const char *tcti, lanyard_tpm_outcome *outcome);

#endif
