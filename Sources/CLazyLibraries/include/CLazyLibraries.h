#ifndef LANYARD_LAZY_LIBRARIES_H
#define LANYARD_LAZY_LIBRARIES_H

// The C libraries Lanyard calls are loaded with dlopen the first time one of their functions is
// called, so a command pays only for the libraries it uses (see lanyard_lazy.h). Each function below loads
// its library (once) and returns 1 when every function Lanyard calls is there; 0 otherwise, with
// *error (when error is not NULL) saying what is missing.

/// libsecret, with GIO and GObject (and GLib) that it brings in.
int lanyard_libsecret_load(const char **error);
/// GIO's D-Bus service side (the tray's StatusNotifierItem).
int lanyard_gio_load(const char **error);
/// GLib (key files, durable writes, GVariant, GError).
int lanyard_glib_load(const char **error);
/// libsodium (the age format's ciphers, scrypt, X25519).
int lanyard_sodium_load(const char **error);
/// libkeyutils (the kernel keyring's unlock cache).
int lanyard_keyutils_load(const char **error);

#endif
