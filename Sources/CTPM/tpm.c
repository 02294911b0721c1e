// A TPM 2.0 sealing a small secret, for LanyardStore's TPM-sealed file-store identity (see
// lanyard_tpm.h). libtss2's esys, tctildr, mu and rc libraries are opened with dlopen on first
// use (CLazyLoading's scheme, as every C library): the binaries link none of them, so only a
// process that opens a sealed store loads them (and OpenSSL, which esys uses for the salted
// session).
#include "lanyard_tpm.h"
#include "lanyard_lazy.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

#define ESYS_FUNCTIONS(X)                                                                                   \
    X(Esys_Initialize) X(Esys_Finalize) X(Esys_CreatePrimary) X(Esys_TR_GetName) X(Esys_StartAuthSession) \
    X(Esys_TRSess_SetAttributes) X(Esys_Create) X(Esys_Load) X(Esys_TR_SetAuth) X(Esys_Unseal)            \
    X(Esys_FlushContext) X(Esys_GetCapability) X(Esys_Free)
#define TCTILDR_FUNCTIONS(X) X(Tss2_TctiLdr_Initialize) X(Tss2_TctiLdr_Finalize)
#define MU_FUNCTIONS(X)                                                                                     \
    X(Tss2_MU_TPM2B_PUBLIC_Marshal) X(Tss2_MU_TPM2B_PUBLIC_Unmarshal) X(Tss2_MU_TPM2B_PRIVATE_Marshal)     \
    X(Tss2_MU_TPM2B_PRIVATE_Unmarshal)
#define RC_FUNCTIONS(X) X(Tss2_RC_Decode)

ESYS_FUNCTIONS(LAZY_NAMED_POINTER)
TCTILDR_FUNCTIONS(LAZY_NAMED_POINTER)
MU_FUNCTIONS(LAZY_NAMED_POINTER)
RC_FUNCTIONS(LAZY_NAMED_POINTER)
static const lazy_symbol esys_symbols[] = {ESYS_FUNCTIONS(LAZY_NAMED_ENTRY)};
static const lazy_symbol tctildr_symbols[] = {TCTILDR_FUNCTIONS(LAZY_NAMED_ENTRY)};
static const lazy_symbol mu_symbols[] = {MU_FUNCTIONS(LAZY_NAMED_ENTRY)};
static const lazy_symbol rc_symbols[] = {RC_FUNCTIONS(LAZY_NAMED_ENTRY)};
// libtss2 3.0 or later.
static const lazy_object tss2_objects[] = {
    {"libtss2-esys.so.0", "libtss2-esys-3.0.2-0", esys_symbols, LAZY_COUNT(esys_symbols), 0},
    {"libtss2-tctildr.so.0", "libtss2-tctildr0", tctildr_symbols, LAZY_COUNT(tctildr_symbols), 0},
    {"libtss2-mu.so.0", "libtss2-mu0", mu_symbols, LAZY_COUNT(mu_symbols), 0},
    {"libtss2-rc.so.0", "libtss2-rc0", rc_symbols, LAZY_COUNT(rc_symbols), 0},
};

static int open_tss2(char *error, size_t error_size) {
    // libtss2 logs its own errors (a TCTI that finds no TPM, a failed command) to stderr unless
    // TSS2_LOG says otherwise; Lanyard reports them itself, once, in its own words. A TSS2_LOG the
    // user set is kept. Set before any libtss2 code runs (each module reads it on first use).
    setenv("TSS2_LOG", "all+none", 0);
    return lazy_open_objects(tss2_objects, LAZY_COUNT(tss2_objects), error, error_size);
}

LAZY_LOADER(tpm, open_tss2)

// One connection to a TPM: the TCTI, the ESYS context, the storage primary key and a session.
typedef struct {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
    ESYS_TR primary;
    ESYS_TR session;
    ESYS_TR object;
    lanyard_tpm_outcome *outcome;
} connection;

static void begin(lanyard_tpm_outcome *outcome) {
    memset(outcome, 0, sizeof *outcome);
    outcome->tries_left = -1;
    outcome->max_tries = -1;
}

static void close_connection(connection *c) {
    if (c->esys) {
        if (c->object != ESYS_TR_NONE) real_Esys_FlushContext(c->esys, c->object);
        if (c->session != ESYS_TR_NONE) real_Esys_FlushContext(c->esys, c->session);
        if (c->primary != ESYS_TR_NONE) real_Esys_FlushContext(c->esys, c->primary);
        real_Esys_Finalize(&c->esys);
    }
    if (c->tcti) real_Tss2_TctiLdr_Finalize(&c->tcti);
}

/// The status a failed call's code means.
static lanyard_tpm_status classify(TSS2_RC rc) {
    TSS2_RC layer = rc & TSS2_RC_LAYER_MASK;
    if (layer == TSS2_TCTI_RC_LAYER) return LANYARD_TPM_NOT_FOUND;  // the TPM stopped answering
    if (layer != TSS2_TPM_RC_LAYER && layer != TSS2_RESMGR_TPM_RC_LAYER) return LANYARD_TPM_FAILED;
    TSS2_RC code = rc & 0xFFFF;
    if (code & TPM2_RC_FMT1) {
        TSS2_RC base = (code & 0x3F) | TPM2_RC_FMT1;
        if (base == TPM2_RC_AUTH_FAIL || base == TPM2_RC_BAD_AUTH) return LANYARD_TPM_AUTH_FAIL;
        if (base == TPM2_RC_INTEGRITY) return LANYARD_TPM_BAD_BLOB;
        return LANYARD_TPM_FAILED;
    }
    if (code == TPM2_RC_LOCKOUT) return LANYARD_TPM_LOCKOUT;
    return LANYARD_TPM_FAILED;
}

static lanyard_tpm_status fail(connection *c, const char *step, TSS2_RC rc) {
    c->outcome->rc = rc;
    snprintf(c->outcome->step, sizeof c->outcome->step, "%s", step);
    const char *text = real_Tss2_RC_Decode ? real_Tss2_RC_Decode(rc) : NULL;
    snprintf(c->outcome->detail, sizeof c->outcome->detail, "%s", text ? text : "");
    return classify(rc);
}

/// Why the TCTI found no TPM: for the device TCTI (and the default loader, which tries
/// /dev/tpmrm0 first), whether the device is missing or not ours to open.
static lanyard_tpm_status diagnose_tcti(const char *tcti, lanyard_tpm_outcome *outcome) {
    const char *path = NULL;
    if (!tcti || !*tcti) {
        path = access("/dev/tpmrm0", F_OK) == 0 || access("/dev/tpm0", F_OK) != 0 ? "/dev/tpmrm0" : "/dev/tpm0";
    } else if (strncmp(tcti, "device", 6) == 0 && (tcti[6] == 0 || tcti[6] == ':')) {
        path = tcti[6] == ':' && tcti[7] ? tcti + 7 : "/dev/tpm0";
    }
    if (!path) return LANYARD_TPM_NOT_FOUND;
    snprintf(outcome->device, sizeof outcome->device, "%s", path);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0) {
        close(fd);
        return LANYARD_TPM_NOT_FOUND;  // it opens now: the TCTI failed for another reason
    }
    int code = errno;
    snprintf(outcome->detail, sizeof outcome->detail, "%s", strerror(code));
    return code == EACCES || code == EPERM ? LANYARD_TPM_PERMISSION : LANYARD_TPM_NOT_FOUND;
}

/// The storage key of `tpm2_createprimary -C o -G ecc` (tpm2-tools 5) with noDA added, as in the
/// TCG's Provisioning Guidance SRK template; the unique field is empty, as tpm2-tools leaves it.
/// noDA matters: a TPM in dictionary-attack lockout refuses every object that is not noDA, the
/// parent included, so without it a lockout anyone causes would keep even a store without a PIN
/// shut.
static void srk_template(TPM2B_PUBLIC *template) {
    memset(template, 0, sizeof *template);
    TPMT_PUBLIC *area = &template->publicArea;
    area->type = TPM2_ALG_ECC;
    area->nameAlg = TPM2_ALG_SHA256;
    area->objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    area->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    area->parameters.eccDetail.symmetric.keyBits.aes = 128;
    area->parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    area->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    area->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
}

/// Connects, creates the storage primary key, records its name, and starts the salted session.
static lanyard_tpm_status open_connection(connection *c, const char *tcti, lanyard_tpm_outcome *outcome) {
    memset(c, 0, sizeof *c);
    c->primary = c->session = c->object = ESYS_TR_NONE;
    c->outcome = outcome;
    const char *error;
    if (!lanyard_tpm_load(&error)) {
        snprintf(outcome->detail, sizeof outcome->detail, "%s", error);
        return LANYARD_TPM_LIBRARY_MISSING;
    }
    TSS2_RC rc = real_Tss2_TctiLdr_Initialize(tcti && *tcti ? tcti : NULL, &c->tcti);
    if (rc != TSS2_RC_SUCCESS) {
        c->tcti = NULL;
        fail(c, "Tss2_TctiLdr_Initialize", rc);
        return diagnose_tcti(tcti, outcome);
    }
    rc = real_Esys_Initialize(&c->esys, c->tcti, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        c->esys = NULL;
        return fail(c, "Esys_Initialize", rc) == LANYARD_TPM_NOT_FOUND ? LANYARD_TPM_NOT_FOUND : LANYARD_TPM_FAILED;
    }
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_PUBLIC template;
    srk_template(&template);
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    rc = real_Esys_CreatePrimary(c->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                                 &template, &outside, &pcrs, &c->primary, NULL, NULL, NULL, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        c->primary = ESYS_TR_NONE;
        lanyard_tpm_status status = fail(c, "Esys_CreatePrimary", rc);
        // A password on the owner hierarchy is not a PIN of Lanyard's.
        return status == LANYARD_TPM_AUTH_FAIL ? LANYARD_TPM_FAILED : status;
    }
    TPM2B_NAME *name = NULL;
    rc = real_Esys_TR_GetName(c->esys, c->primary, &name);
    if (rc != TSS2_RC_SUCCESS) return fail(c, "Esys_TR_GetName", rc);
    size_t size = name->size <= sizeof outcome->srk_name ? name->size : sizeof outcome->srk_name;
    memcpy(outcome->srk_name, name->name, size);
    outcome->srk_name_size = size;
    real_Esys_Free(name);
    TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_AES, .keyBits = {.aes = 128}, .mode = {.aes = TPM2_ALG_CFB}};
    rc = real_Esys_StartAuthSession(c->esys, c->primary, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL,
                                 TPM2_SE_HMAC, &symmetric, TPM2_ALG_SHA256, &c->session);
    if (rc != TSS2_RC_SUCCESS) {
        c->session = ESYS_TR_NONE;
        return fail(c, "Esys_StartAuthSession", rc);
    }
    rc = real_Esys_TRSess_SetAttributes(c->esys, c->session,
                                     TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT, 0xff);
    if (rc != TSS2_RC_SUCCESS) return fail(c, "Esys_TRSess_SetAttributes", rc);
    return LANYARD_TPM_OK;
}

/// Reads the dictionary-attack counters into the outcome (left as unknown when the TPM does not tell).
static void read_lockout(connection *c) {
    TPMS_CAPABILITY_DATA *data = NULL;
    TPMI_YES_NO more = 0;
    if (real_Esys_GetCapability(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                             TPM2_PT_LOCKOUT_COUNTER, 3, &more, &data) != TSS2_RC_SUCCESS || !data) return;
    int64_t counter = -1, max = -1;
    for (UINT32 i = 0; i < data->data.tpmProperties.count; i++) {
        TPMS_TAGGED_PROPERTY p = data->data.tpmProperties.tpmProperty[i];
        if (p.property == TPM2_PT_LOCKOUT_COUNTER) counter = p.value;
        if (p.property == TPM2_PT_MAX_AUTH_FAIL) max = p.value;
        if (p.property == TPM2_PT_LOCKOUT_INTERVAL) c->outcome->lockout_interval = p.value;
    }
    real_Esys_Free(data);
    if (max >= 0) c->outcome->max_tries = (int)max;
    if (max >= 0 && counter >= 0) c->outcome->tries_left = counter >= max ? 0 : (int)(max - counter);
}

lanyard_tpm_status lanyard_tpm_seal(const char *tcti, const uint8_t *secret, size_t secret_size,
                                    const uint8_t *auth, size_t auth_size,
                                    uint8_t *public_blob, size_t public_capacity, size_t *public_size,
                                    uint8_t *private_blob, size_t private_capacity, size_t *private_size,
                                    lanyard_tpm_outcome *outcome) {
    begin(outcome);
    *public_size = *private_size = 0;
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    if (secret_size == 0 || secret_size > sizeof sensitive.sensitive.data.buffer
        || auth_size > sizeof sensitive.sensitive.userAuth.buffer) {
        snprintf(outcome->detail, sizeof outcome->detail, "secret of %zu bytes or PIN of %zu bytes too long", secret_size, auth_size);
        return LANYARD_TPM_FAILED;
    }
    connection c;
    lanyard_tpm_status status = open_connection(&c, tcti, outcome);
    if (status != LANYARD_TPM_OK) {
        close_connection(&c);
        return status;
    }
    sensitive.sensitive.data.size = (UINT16)secret_size;
    memcpy(sensitive.sensitive.data.buffer, secret, secret_size);
    sensitive.sensitive.userAuth.size = (UINT16)auth_size;
    if (auth_size) memcpy(sensitive.sensitive.userAuth.buffer, auth, auth_size);
    TPM2B_PUBLIC template = {0};
    TPMT_PUBLIC *area = &template.publicArea;
    area->type = TPM2_ALG_KEYEDHASH;
    area->nameAlg = TPM2_ALG_SHA256;
    // A sealed data object: no sensitiveDataOrigin (the data is ours), usable with its authValue;
    // without a PIN, out of the dictionary-attack logic, so a lockout caused by others never locks it.
    area->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH
        | (auth_size ? 0 : TPMA_OBJECT_NODA);
    area->parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    TPM2B_PRIVATE *out_private = NULL;
    TPM2B_PUBLIC *out_public = NULL;
    TSS2_RC rc = real_Esys_Create(c.esys, c.primary, c.session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template,
                                  &outside, &pcrs, &out_private, &out_public, NULL, NULL, NULL);
    explicit_bzero(&sensitive, sizeof sensitive);
    if (rc != TSS2_RC_SUCCESS) {
        status = fail(&c, "Esys_Create", rc);
        close_connection(&c);
        return status == LANYARD_TPM_AUTH_FAIL ? LANYARD_TPM_FAILED : status;
    }
    size_t offset = 0;
    rc = real_Tss2_MU_TPM2B_PUBLIC_Marshal(out_public, public_blob, public_capacity, &offset);
    *public_size = offset;
    if (rc == TSS2_RC_SUCCESS) {
        offset = 0;
        rc = real_Tss2_MU_TPM2B_PRIVATE_Marshal(out_private, private_blob, private_capacity, &offset);
        *private_size = offset;
    }
    real_Esys_Free(out_private);
    real_Esys_Free(out_public);
    status = rc == TSS2_RC_SUCCESS ? LANYARD_TPM_OK : (fail(&c, "Tss2_MU_TPM2B_Marshal", rc), LANYARD_TPM_FAILED);
    close_connection(&c);
    return status;
}

lanyard_tpm_status lanyard_tpm_unseal(const char *tcti, const uint8_t *srk_name, size_t srk_name_size,
                                      const uint8_t *public_blob, size_t public_size,
                                      const uint8_t *private_blob, size_t private_size,
                                      const uint8_t *auth, size_t auth_size,
                                      uint8_t *secret, size_t secret_capacity, size_t *secret_size,
                                      lanyard_tpm_outcome *outcome) {
    begin(outcome);
    *secret_size = 0;
    const char *error;
    if (!lanyard_tpm_load(&error)) {
        snprintf(outcome->detail, sizeof outcome->detail, "%s", error);
        return LANYARD_TPM_LIBRARY_MISSING;
    }
    TPM2B_PUBLIC in_public = {0};
    TPM2B_PRIVATE in_private = {0};
    size_t offset = 0;
    TSS2_RC rc = real_Tss2_MU_TPM2B_PUBLIC_Unmarshal(public_blob, public_size, &offset, &in_public);
    if (rc != TSS2_RC_SUCCESS || offset != public_size) {
        snprintf(outcome->step, sizeof outcome->step, "Tss2_MU_TPM2B_PUBLIC_Unmarshal");
        outcome->rc = rc;
        return LANYARD_TPM_BAD_BLOB;
    }
    offset = 0;
    rc = real_Tss2_MU_TPM2B_PRIVATE_Unmarshal(private_blob, private_size, &offset, &in_private);
    if (rc != TSS2_RC_SUCCESS || offset != private_size) {
        snprintf(outcome->step, sizeof outcome->step, "Tss2_MU_TPM2B_PRIVATE_Unmarshal");
        outcome->rc = rc;
        return LANYARD_TPM_BAD_BLOB;
    }
    TPM2B_AUTH pin = {0};
    if (auth_size > sizeof pin.buffer) {
        snprintf(outcome->detail, sizeof outcome->detail, "PIN of %zu bytes too long", auth_size);
        return LANYARD_TPM_FAILED;
    }
    connection c;
    lanyard_tpm_status status = open_connection(&c, tcti, outcome);
    if (status != LANYARD_TPM_OK) {
        close_connection(&c);
        return status;
    }
    if (outcome->srk_name_size != srk_name_size || memcmp(outcome->srk_name, srk_name, srk_name_size) != 0) {
        close_connection(&c);
        return LANYARD_TPM_OTHER_TPM;
    }
    rc = real_Esys_Load(c.esys, c.primary, c.session, ESYS_TR_NONE, ESYS_TR_NONE, &in_private, &in_public, &c.object);
    if (rc != TSS2_RC_SUCCESS) {
        c.object = ESYS_TR_NONE;
        status = fail(&c, "Esys_Load", rc);
        close_connection(&c);
        // The storage key is the right one, so a refused blob was changed (or made elsewhere).
        return status == LANYARD_TPM_NOT_FOUND ? status : LANYARD_TPM_BAD_BLOB;
    }
    pin.size = (UINT16)auth_size;
    if (auth_size) memcpy(pin.buffer, auth, auth_size);
    rc = real_Esys_TR_SetAuth(c.esys, c.object, &pin);
    explicit_bzero(&pin, sizeof pin);
    if (rc != TSS2_RC_SUCCESS) {
        status = fail(&c, "Esys_TR_SetAuth", rc);
        close_connection(&c);
        return status;
    }
    TPM2B_SENSITIVE_DATA *data = NULL;
    rc = real_Esys_Unseal(c.esys, c.object, c.session, ESYS_TR_NONE, ESYS_TR_NONE, &data);
    if (rc != TSS2_RC_SUCCESS) {
        status = fail(&c, "Esys_Unseal", rc);
        if (status == LANYARD_TPM_AUTH_FAIL || status == LANYARD_TPM_LOCKOUT) read_lockout(&c);
        close_connection(&c);
        return status;
    }
    if (data->size > secret_capacity) {
        status = LANYARD_TPM_BAD_BLOB;
        snprintf(outcome->detail, sizeof outcome->detail, "the sealed data is %u bytes, more than %zu", data->size, secret_capacity);
    } else {
        memcpy(secret, data->buffer, data->size);
        *secret_size = data->size;
    }
    explicit_bzero(data, sizeof *data);
    real_Esys_Free(data);
    close_connection(&c);
    return status;
}

lanyard_tpm_status lanyard_tpm_identify(const char *tcti, lanyard_tpm_outcome *outcome) {
    begin(outcome);
    connection c;
    lanyard_tpm_status status = open_connection(&c, tcti, outcome);
    if (status == LANYARD_TPM_OK) read_lockout(&c);
    close_connection(&c);
    return status;
}
