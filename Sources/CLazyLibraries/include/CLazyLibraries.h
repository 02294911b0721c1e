#ifndef LANYARD_LIBSECRET_LOADER_H
#define LANYARD_LIBSECRET_LOADER_H

/// Loads libsecret (with GIO and GObject) on first use. Returns 1 when every function Lanyard
/// calls is there; 0 otherwise, with *error (when error is not NULL) saying what is missing.
int lanyard_libsecret_load(const char **error);

#endif
