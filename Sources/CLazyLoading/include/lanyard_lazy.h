// Loading a C library on first use instead of at every start: the one scheme every C target of
// Lanyard uses (CLazyLibraries for GLib, GIO, libsecret, libsodium and libkeyutils; CCurl for
// libcurl; CWebSocket for libwebsockets; CTPM for libtss2).
//
// A library's functions are listed once, as X-macro entries F(return type, name, (parameters),
// (arguments)) for functions that return a value and P(…) for those that return void (only the
// name matters to the pointers and the symbol table; the rest defines trampolines), or as X(name)
// for a library called through its pointers only. The list is
// expanded into function pointers `real_<name>`, typed from the library's own header (which the
// compiler checks them against), and a symbol table for dlsym. LAZY_LIBRARY (one shared object)
// or LAZY_LOADER (several, or work before or after loading) then define
// `int lanyard_<prefix>_load(const char **error)`: loads once per process (pthread_once) and
// returns 1, or 0 with *error saying what is missing ("cannot load libcurl.so.4 (install
// libcurl4): …", "libsodium.so.23 has no crypto_box"). Nothing is linked, so the binaries do not
// depend on the libraries at start-up (scripts/test-install.sh checks that the installed binaries
// name none of them).
//
// Two ways to call a loaded library:
// - Trampolines (CLazyLibraries): LIST(LAZY_FUNCTION, LAZY_PROCEDURE) defines each function
//   under its own name, with hidden visibility (never exported, so the libraries themselves, and
//   libraries they load, never bind to these), loading its library on first call; the linker
//   resolves the Swift callers to them. A library every install has (a package dependency) that
//   cannot be loaded then ends the process with status 127, as the dynamic loader does.
// - Pointers (CCurl, CWebSocket, CTPM): the C code calls lanyard_<prefix>_load first, reports a
//   missing library as a value its Swift caller turns into an error, and calls real_<name>.
#ifndef LANYARD_LAZY_H
#define LANYARD_LAZY_H

#include <pthread.h>
#include <stddef.h>

#define HIDDEN __attribute__((visibility("hidden")))

typedef struct {
    const char *name;
    void **slot;
} lazy_symbol;

/// One shared object of a library and the functions taken from it.
typedef struct {
    const char *soname;
    /// The Debian package that installs it, named in the error when it cannot be loaded; NULL for
    /// none.
    const char *package;
    const lazy_symbol *symbols;
    size_t count;
    /// Already loaded by an earlier object of the same library (libsecret brings GIO): looked up
    /// with RTLD_NOLOAD, never loaded on its own.
    int brought_in;
} lazy_object;

/// Looks every symbol up in `handle` (the library `soname`). Returns 1 when all are there;
/// otherwise 0 with the first missing one named in `error`.
HIDDEN int lazy_resolve(void *handle, const char *soname, const lazy_symbol *symbols, size_t count, char *error,
                        size_t error_size);
/// dlopen(`soname`) and lazy_resolve.
HIDDEN int lazy_open(const char *soname, const lazy_symbol *symbols, size_t count, char *error, size_t error_size);
/// Opens each object in order and resolves its symbols: 1 when every one is there, else 0 with
/// the first failure in `error`.
HIDDEN int lazy_open_objects(const lazy_object *objects, size_t count, char *error, size_t error_size);
/// A library every install has (a package dependency) could not be loaded: says so and exits
/// with 127, as the dynamic loader does when a linked library is missing.
HIDDEN _Noreturn void lazy_fail(const char *function, const char *error);

#define LAZY_COUNT(array) (sizeof array / sizeof *array)
#define LAZY_POINTER(ret, name, params, args) static __typeof__(&name) real_##name;
#define LAZY_ENTRY(ret, name, params, args) {#name, (void **)&real_##name},
/// The same for lists of names only, X(name): libraries called through the pointers.
#define LAZY_NAMED_POINTER(name) static __typeof__(&name) real_##name;
#define LAZY_NAMED_ENTRY(name) {#name, (void **)&real_##name},
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

/// Defines `int lanyard_<prefix>_load(const char **error)`, which runs `open` once per process:
/// `static int open(char *error, size_t error_size)` loads the library (lazy_open_objects, with
/// any work before or after) and returns 1, or 0 with the reason in `error`. Also defines
/// `<prefix>_require`, for trampolines (LAZY_REQUIRE).
#define LAZY_LOADER(prefix, open)                                                                \
    static pthread_once_t prefix##_once = PTHREAD_ONCE_INIT;                                     \
    static int prefix##_loaded;                                                                  \
    static char prefix##_error[512];                                                             \
    static void prefix##_load_once(void) { prefix##_loaded = open(prefix##_error, sizeof prefix##_error); } \
    int lanyard_##prefix##_load(const char **error) {                                            \
        pthread_once(&prefix##_once, prefix##_load_once);                                        \
        if (error) *error = prefix##_loaded ? NULL : prefix##_error;                             \
        return prefix##_loaded;                                                                  \
    }                                                                                            \
    __attribute__((unused)) static void prefix##_require(const char *function) {                 \
        if (!lanyard_##prefix##_load(NULL)) lazy_fail(function, prefix##_error);                 \
    }

/// LAZY_LOADER for a library of one shared object whose functions are listed by LIST, with the
/// pointers and symbol table.
#define LAZY_LIBRARY(prefix, soname, LIST)                                                       \
    LIST(LAZY_POINTER, LAZY_POINTER)                                                             \
    static const lazy_symbol prefix##_symbols[] = {LIST(LAZY_ENTRY, LAZY_ENTRY)};                \
    static int prefix##_open(char *error, size_t error_size) {                                   \
        return lazy_open(soname, prefix##_symbols, LAZY_COUNT(prefix##_symbols), error, error_size); \
    }                                                                                            \
    LAZY_LOADER(prefix, prefix##_open)

#endif
