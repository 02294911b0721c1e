// libkeyutils, loaded on first use: only the file store's unlock cache needs it.
#include "CLazyLibraries.h"
#include "lanyard_lazy.h"

#include <keyutils.h>

#define KEYUTILS_FUNCTIONS(F, P)                                                                                   \
    F(key_serial_t, add_key,                                                                                       \
      (const char *type, const char *description, const void *payload, size_t plen, key_serial_t ringid),          \
      (type, description, payload, plen, ringid))                                                                  \
    F(key_serial_t, keyctl_get_keyring_ID, (key_serial_t id, int create), (id, create))                            \
    F(long, keyctl_invalidate, (key_serial_t id), (id))                                                            \
    F(int, keyctl_read_alloc, (key_serial_t id, void **_buffer), (id, _buffer))                                    \
    F(long, keyctl_search, (key_serial_t ringid, const char *type, const char *description, key_serial_t destringid), \
      (ringid, type, description, destringid))                                                                     \
    F(long, keyctl_set_timeout, (key_serial_t key, unsigned timeout), (key, timeout))                              \
    F(long, keyctl_unlink, (key_serial_t id, key_serial_t ringid), (id, ringid))

LAZY_LIBRARY(keyutils, "libkeyutils.so.1", KEYUTILS_FUNCTIONS)
#define LAZY_REQUIRE keyutils_require
KEYUTILS_FUNCTIONS(LAZY_FUNCTION, LAZY_PROCEDURE)
