#include "lazy.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int lazy_resolve(void *handle, const char *soname, const lazy_symbol *symbols, size_t count, char *error, size_t error_size) {
    for (size_t i = 0; i < count; i++) {
        *symbols[i].slot = dlsym(handle, symbols[i].name);
        if (!*symbols[i].slot) {
            snprintf(error, error_size, "%s has no %s", soname, symbols[i].name);
            return 0;
        }
    }
    return 1;
}

int lazy_open(const char *soname, const lazy_symbol *symbols, size_t count, char *error, size_t error_size) {
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        snprintf(error, error_size, "cannot load %s (%s)", soname, dlerror());
        return 0;
    }
    return lazy_resolve(handle, soname, symbols, count, error, error_size);
}

void lazy_fail(const char *function, const char *error) {
    fprintf(stderr, "lanyard: cannot call %s: %s\n", function, error);
    _exit(127);
}
