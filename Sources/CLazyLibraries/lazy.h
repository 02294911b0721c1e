// Loading a C library on first use instead of at every start.
//
// Each function Lanyard calls is defined in this target under its own name, with hidden
// visibility (never exported, so the libraries themselves, and libraries they load, never bind to
// these), as a trampoline that loads the library once and calls the real function. The linker
// resolves Lanyard's calls to the trampolines, so the binaries do not depend on the libraries at
// start-up (the release build reads a headers-only glib-2.0.pc so nothing links GLib, and
// scripts/test-install.sh checks that the installed binaries name none of them). The
// prototypes come from the libraries' own headers, which the compiler checks the trampolines
// against.
//
// A library is listed once, as X-macro entries F(return type, name, (parameters), (arguments))
// for functions that return a value and P(…) for those that return void; the list is expanded
// into the function pointers, the symbol table for dlsym and the trampolines.
#ifndef LANYARD_LAZY_H
#define LANYARD_LAZY_H

#include <pthread.h>
#include <stddef.h>

#define HIDDEN __attribute__((visibility("hidden")))

typedef struct {
    const char *name;
    void **slot;
} lazy_symbol;

/// Looks every symbol up in `handle` (the library `soname`). Returns 1 when all are there;
/// otherwise 0 with the first missing one named in `error`.
HIDDEN int lazy_resolve(void *handle, const char *soname, const lazy_symbol *symbols, size_t count, char *error, size_t error_size);
/// dlopen(`soname`) and lazy_resolve.
HIDDEN int lazy_open(const char *soname, const lazy_symbol *symbols, size_t count, char *error, size_t error_size);
/// A library every install has (a package dependency) could not be loaded: says so and exits
/// with 127, as the dynamic loader does when a linked library is missing.
HIDDEN _Noreturn void lazy_fail(const char *function, const char *error);

#define LAZY_POINTER(ret, name, params, args) static __typeof__(&name) real_##name;
#define LAZY_ENTRY(ret, name, params, args) {#name, (void **)&real_##name},
#define LAZY_FUNCTION(ret, name, params, args) \
    HIDDEN ret(name) params {                  \
        LAZY_REQUIRE(#name);                   \
        return real_##name args;               \
    }
#define LAZY_PROCEDURE(ret, name, params, args) \
    HIDDEN void(name) params {                  \
        LAZY_REQUIRE(#name);                    \
        real_##name args;                       \
    }

/// Defines `int lanyard_<prefix>_load(const char **error)` for a library of one shared object
/// whose functions are listed by LIST, and the `require` used by its trampolines.
#define LAZY_LIBRARY(prefix, soname, LIST)                                                       \
    LIST(LAZY_POINTER, LAZY_POINTER)                                                             \
    static const lazy_symbol prefix##_symbols[] = {LIST(LAZY_ENTRY, LAZY_ENTRY)};                \
    static pthread_once_t prefix##_once = PTHREAD_ONCE_INIT;                                     \
    static int prefix##_loaded;                                                                  \
    static char prefix##_error[512];                                                             \
    static void prefix##_load_once(void) {                                                       \
        prefix##_loaded = lazy_open(soname, prefix##_symbols,                                    \
                                    sizeof prefix##_symbols / sizeof *prefix##_symbols,          \
                                    prefix##_error, sizeof prefix##_error);                      \
    }                                                                                            \
    int lanyard_##prefix##_load(const char **error) {                                            \
        pthread_once(&prefix##_once, prefix##_load_once);                                        \
        if (error) *error = prefix##_loaded ? NULL : prefix##_error;                             \
        return prefix##_loaded;                                                                  \
    }                                                                                            \
    static void prefix##_require(const char *function) {                                         \
        if (!lanyard_##prefix##_load(NULL)) lazy_fail(function, prefix##_error);                 \
    }

#endif
