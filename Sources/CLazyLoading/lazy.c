#include "lanyard_lazy.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int lazy_resolve(void *handle, const char *soname, const lazy_symbol *symbols, size_t count, char *error,
                 size_t error_size) {
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
    lazy_object object = {soname, NULL, symbols, count, 0};
    return lazy_open_objects(&object, 1, error, error_size);
}

int lazy_open_objects(const lazy_object *objects, size_t count, char *error, size_t error_size) {
    for (size_t i = 0; i < count; i++) {
        const lazy_object *o = &objects[i];
        void *handle = dlopen(o->soname, RTLD_NOW | RTLD_LOCAL | (o->brought_in ? RTLD_NOLOAD : 0));
        if (!handle) {
            if (o->brought_in) {
                snprintf(error, error_size, "%s did not bring in %s", objects[0].soname, o->soname);
            } else if (o->package) {
                snprintf(error, error_size, "cannot load %s (install %s): %s", o->soname, o->package, dlerror());
            } else {
                snprintf(error, error_size, "cannot load %s (%s)", o->soname, dlerror());
            }
            return 0;
        }
        if (!lazy_resolve(handle, o->soname, o->symbols, o->count, error, error_size)) return 0;
    }
    return 1;
}

void lazy_fail(const char *function, const char *error) {
    fprintf(stderr, "lanyard: cannot call %s: %s\n", function, error);
    _exit(127);
}
