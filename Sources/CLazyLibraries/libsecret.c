// Lazy loading of libsecret, GIO and GObject: the `lanyard` binary links only GLib, and the
// Secret Service backend (and the agent's notifications) load these libraries the first time they
// are used. A command that never touches the keyring (the file store, `list`, `which`, …) does not
// pay their start-up cost: about 1.2 ms of dynamic loading and relocation at every run.
//
// Each function Lanyard calls is defined here under its own name, with hidden visibility (never
// exported, so the libraries themselves never bind to these), as a trampoline to the real one.
// The prototypes come from GIO's headers and lanyard-secret.h, which the compiler checks them
// against (and LazyLibsecretTests checks lanyard-secret.h against libsecret's own headers).
#include "CLibsecretLoader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gio/gio.h>
#include "../CLibsecret/lanyard-secret.h"

#define HIDDEN __attribute__((visibility("hidden")))

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];
static int loaded;

static __typeof__(&secret_error_get_quark) real_secret_error_get_quark;
static __typeof__(&secret_item_delete_sync) real_secret_item_delete_sync;
static __typeof__(&secret_item_get_attributes) real_secret_item_get_attributes;
static __typeof__(&secret_item_get_label) real_secret_item_get_label;
static __typeof__(&secret_item_get_locked) real_secret_item_get_locked;
static __typeof__(&secret_item_get_modified) real_secret_item_get_modified;
static __typeof__(&secret_item_get_secret) real_secret_item_get_secret;
static __typeof__(&secret_item_load_secret_sync) real_secret_item_load_secret_sync;
static __typeof__(&secret_item_set_attributes_sync) real_secret_item_set_attributes_sync;
static __typeof__(&secret_item_set_label_sync) real_secret_item_set_label_sync;
static __typeof__(&secret_item_set_secret_sync) real_secret_item_set_secret_sync;
static __typeof__(&secret_schema_newv) real_secret_schema_newv;
static __typeof__(&secret_service_disconnect) real_secret_service_disconnect;
static __typeof__(&secret_service_get_sync) real_secret_service_get_sync;
static __typeof__(&secret_service_search_sync) real_secret_service_search_sync;
static __typeof__(&secret_service_search_for_dbus_paths_sync) real_secret_service_search_for_dbus_paths_sync;
static __typeof__(&secret_service_get_secret_for_dbus_path_sync) real_secret_service_get_secret_for_dbus_path_sync;
static __typeof__(&secret_service_store_sync) real_secret_service_store_sync;
static __typeof__(&secret_value_get) real_secret_value_get;
static __typeof__(&secret_value_new) real_secret_value_new;
static __typeof__(&secret_value_unref) real_secret_value_unref;
static __typeof__(&g_bus_get_sync) real_g_bus_get_sync;
static __typeof__(&g_cancellable_cancel) real_g_cancellable_cancel;
static __typeof__(&g_cancellable_is_cancelled) real_g_cancellable_is_cancelled;
static __typeof__(&g_cancellable_new) real_g_cancellable_new;
static __typeof__(&g_dbus_connection_call_sync) real_g_dbus_connection_call_sync;
static __typeof__(&g_dbus_connection_is_closed) real_g_dbus_connection_is_closed;
static __typeof__(&g_dbus_connection_set_exit_on_close) real_g_dbus_connection_set_exit_on_close;
static __typeof__(&g_dbus_error_get_remote_error) real_g_dbus_error_get_remote_error;
static __typeof__(&g_dbus_error_quark) real_g_dbus_error_quark;
static __typeof__(&g_dbus_error_strip_remote_error) real_g_dbus_error_strip_remote_error;
static __typeof__(&g_dbus_proxy_get_object_path) real_g_dbus_proxy_get_object_path;
static __typeof__(&g_io_error_quark) real_g_io_error_quark;
static __typeof__(&g_object_ref) real_g_object_ref;
static __typeof__(&g_object_unref) real_g_object_unref;

static void *resolve(void *library, const char *library_name, const char *name) {
    void *symbol = dlsym(library, name);
    if (!symbol && !load_error[0]) snprintf(load_error, sizeof load_error, "%s has no %s", library_name, name);
    return symbol;
}

static void load(void) {
    // libsecret needs GIO and GObject, which it brings in; GLib is already linked.
    void *secret = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!secret) { snprintf(load_error, sizeof load_error, "cannot load libsecret-1.so.0 (%s)", dlerror()); return; }
    void *gio = dlopen("libgio-2.0.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    void *gobject = dlopen("libgobject-2.0.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!gio || !gobject) { snprintf(load_error, sizeof load_error, "libsecret-1.so.0 did not bring in GIO and GObject"); return; }

    real_secret_error_get_quark = (__typeof__(real_secret_error_get_quark))resolve(secret, "libsecret-1.so.0", "secret_error_get_quark");
    real_secret_item_delete_sync = (__typeof__(real_secret_item_delete_sync))resolve(secret, "libsecret-1.so.0", "secret_item_delete_sync");
    real_secret_item_get_attributes = (__typeof__(real_secret_item_get_attributes))resolve(secret, "libsecret-1.so.0", "secret_item_get_attributes");
    real_secret_item_get_label = (__typeof__(real_secret_item_get_label))resolve(secret, "libsecret-1.so.0", "secret_item_get_label");
    real_secret_item_get_locked = (__typeof__(real_secret_item_get_locked))resolve(secret, "libsecret-1.so.0", "secret_item_get_locked");
    real_secret_item_get_modified = (__typeof__(real_secret_item_get_modified))resolve(secret, "libsecret-1.so.0", "secret_item_get_modified");
    real_secret_item_get_secret = (__typeof__(real_secret_item_get_secret))resolve(secret, "libsecret-1.so.0", "secret_item_get_secret");
    real_secret_item_load_secret_sync = (__typeof__(real_secret_item_load_secret_sync))resolve(secret, "libsecret-1.so.0", "secret_item_load_secret_sync");
    real_secret_item_set_attributes_sync = (__typeof__(real_secret_item_set_attributes_sync))resolve(secret, "libsecret-1.so.0", "secret_item_set_attributes_sync");
    real_secret_item_set_label_sync = (__typeof__(real_secret_item_set_label_sync))resolve(secret, "libsecret-1.so.0", "secret_item_set_label_sync");
    real_secret_item_set_secret_sync = (__typeof__(real_secret_item_set_secret_sync))resolve(secret, "libsecret-1.so.0", "secret_item_set_secret_sync");
    real_secret_schema_newv = (__typeof__(real_secret_schema_newv))resolve(secret, "libsecret-1.so.0", "secret_schema_newv");
    real_secret_service_disconnect = (__typeof__(real_secret_service_disconnect))resolve(secret, "libsecret-1.so.0", "secret_service_disconnect");
    real_secret_service_get_sync = (__typeof__(real_secret_service_get_sync))resolve(secret, "libsecret-1.so.0", "secret_service_get_sync");
    real_secret_service_search_sync = (__typeof__(real_secret_service_search_sync))resolve(secret, "libsecret-1.so.0", "secret_service_search_sync");
    real_secret_service_search_for_dbus_paths_sync = (__typeof__(real_secret_service_search_for_dbus_paths_sync))resolve(secret, "libsecret-1.so.0", "secret_service_search_for_dbus_paths_sync");
    real_secret_service_get_secret_for_dbus_path_sync = (__typeof__(real_secret_service_get_secret_for_dbus_path_sync))resolve(secret, "libsecret-1.so.0", "secret_service_get_secret_for_dbus_path_sync");
    real_secret_service_store_sync = (__typeof__(real_secret_service_store_sync))resolve(secret, "libsecret-1.so.0", "secret_service_store_sync");
    real_secret_value_get = (__typeof__(real_secret_value_get))resolve(secret, "libsecret-1.so.0", "secret_value_get");
    real_secret_value_new = (__typeof__(real_secret_value_new))resolve(secret, "libsecret-1.so.0", "secret_value_new");
    real_secret_value_unref = (__typeof__(real_secret_value_unref))resolve(secret, "libsecret-1.so.0", "secret_value_unref");
    real_g_bus_get_sync = (__typeof__(real_g_bus_get_sync))resolve(gio, "libgio-2.0.so.0", "g_bus_get_sync");
    real_g_cancellable_cancel = (__typeof__(real_g_cancellable_cancel))resolve(gio, "libgio-2.0.so.0", "g_cancellable_cancel");
    real_g_cancellable_is_cancelled = (__typeof__(real_g_cancellable_is_cancelled))resolve(gio, "libgio-2.0.so.0", "g_cancellable_is_cancelled");
    real_g_cancellable_new = (__typeof__(real_g_cancellable_new))resolve(gio, "libgio-2.0.so.0", "g_cancellable_new");
    real_g_dbus_connection_call_sync = (__typeof__(real_g_dbus_connection_call_sync))resolve(gio, "libgio-2.0.so.0", "g_dbus_connection_call_sync");
    real_g_dbus_connection_is_closed = (__typeof__(real_g_dbus_connection_is_closed))resolve(gio, "libgio-2.0.so.0", "g_dbus_connection_is_closed");
    real_g_dbus_connection_set_exit_on_close = (__typeof__(real_g_dbus_connection_set_exit_on_close))resolve(gio, "libgio-2.0.so.0", "g_dbus_connection_set_exit_on_close");
    real_g_dbus_error_get_remote_error = (__typeof__(real_g_dbus_error_get_remote_error))resolve(gio, "libgio-2.0.so.0", "g_dbus_error_get_remote_error");
    real_g_dbus_error_quark = (__typeof__(real_g_dbus_error_quark))resolve(gio, "libgio-2.0.so.0", "g_dbus_error_quark");
    real_g_dbus_error_strip_remote_error = (__typeof__(real_g_dbus_error_strip_remote_error))resolve(gio, "libgio-2.0.so.0", "g_dbus_error_strip_remote_error");
    real_g_dbus_proxy_get_object_path = (__typeof__(real_g_dbus_proxy_get_object_path))resolve(gio, "libgio-2.0.so.0", "g_dbus_proxy_get_object_path");
    real_g_io_error_quark = (__typeof__(real_g_io_error_quark))resolve(gio, "libgio-2.0.so.0", "g_io_error_quark");
    real_g_object_ref = (__typeof__(real_g_object_ref))resolve(gobject, "libgobject-2.0.so.0", "g_object_ref");
    real_g_object_unref = (__typeof__(real_g_object_unref))resolve(gobject, "libgobject-2.0.so.0", "g_object_unref");
    loaded = load_error[0] == 0;
}

int lanyard_libsecret_load(const char **error) {
    pthread_once(&load_once, load);
    if (error) *error = loaded ? NULL : load_error;
    return loaded;
}

// Callers check lanyard_libsecret_load() first; reaching a missing function is a bug.
static void require_loaded(const char *name) {
    if (lanyard_libsecret_load(NULL)) return;
    fprintf(stderr, "lanyard: %s called without libsecret: %s\n", name, load_error);
    abort();
}

HIDDEN GQuark (secret_error_get_quark)(void) {
    return lanyard_libsecret_load(NULL) ? real_secret_error_get_quark() : 0;
}

HIDDEN gboolean (secret_item_delete_sync)(SecretItem *self, GCancellable *cancellable, GError **error) {
    require_loaded("secret_item_delete_sync");
    return real_secret_item_delete_sync(self, cancellable, error);
}

HIDDEN GHashTable * (secret_item_get_attributes)(SecretItem *self) {
    require_loaded("secret_item_get_attributes");
    return real_secret_item_get_attributes(self);
}

HIDDEN gchar * (secret_item_get_label)(SecretItem *self) {
    require_loaded("secret_item_get_label");
    return real_secret_item_get_label(self);
}

HIDDEN gboolean (secret_item_get_locked)(SecretItem *self) {
    require_loaded("secret_item_get_locked");
    return real_secret_item_get_locked(self);
}

HIDDEN guint64 (secret_item_get_modified)(SecretItem *self) {
    require_loaded("secret_item_get_modified");
    return real_secret_item_get_modified(self);
}

HIDDEN SecretValue * (secret_item_get_secret)(SecretItem *self) {
    require_loaded("secret_item_get_secret");
    return real_secret_item_get_secret(self);
}

HIDDEN gboolean (secret_item_load_secret_sync)(SecretItem *self, GCancellable *cancellable, GError **error) {
    require_loaded("secret_item_load_secret_sync");
    return real_secret_item_load_secret_sync(self, cancellable, error);
}

HIDDEN gboolean (secret_item_set_attributes_sync)(SecretItem *self, const SecretSchema *schema, GHashTable *attributes, GCancellable *cancellable, GError **error) {
    require_loaded("secret_item_set_attributes_sync");
    return real_secret_item_set_attributes_sync(self, schema, attributes, cancellable, error);
}

HIDDEN gboolean (secret_item_set_label_sync)(SecretItem *self, const gchar *label, GCancellable *cancellable, GError **error) {
    require_loaded("secret_item_set_label_sync");
    return real_secret_item_set_label_sync(self, label, cancellable, error);
}

HIDDEN gboolean (secret_item_set_secret_sync)(SecretItem *self, SecretValue *value, GCancellable *cancellable, GError **error) {
    require_loaded("secret_item_set_secret_sync");
    return real_secret_item_set_secret_sync(self, value, cancellable, error);
}

HIDDEN SecretSchema * (secret_schema_newv)(const gchar *name, SecretSchemaFlags flags, GHashTable *attribute_names_and_types) {
    require_loaded("secret_schema_newv");
    return real_secret_schema_newv(name, flags, attribute_names_and_types);
}

HIDDEN void (secret_service_disconnect)(void) {
    require_loaded("secret_service_disconnect");
    real_secret_service_disconnect();
}

HIDDEN SecretService * (secret_service_get_sync)(SecretServiceFlags flags, GCancellable *cancellable, GError **error) {
    require_loaded("secret_service_get_sync");
    return real_secret_service_get_sync(flags, cancellable, error);
}

HIDDEN GList * (secret_service_search_sync)(SecretService *service, const SecretSchema *schema, GHashTable *attributes, SecretSearchFlags flags, GCancellable *cancellable, GError **error) {
    require_loaded("secret_service_search_sync");
    return real_secret_service_search_sync(service, schema, attributes, flags, cancellable, error);
}

HIDDEN gboolean (secret_service_search_for_dbus_paths_sync)(SecretService *self, const SecretSchema *schema, GHashTable *attributes, GCancellable *cancellable, gchar ***unlocked, gchar ***locked, GError **error) {
    require_loaded("secret_service_search_for_dbus_paths_sync");
    return real_secret_service_search_for_dbus_paths_sync(self, schema, attributes, cancellable, unlocked, locked, error);
}

HIDDEN SecretValue * (secret_service_get_secret_for_dbus_path_sync)(SecretService *self, const gchar *item_path, GCancellable *cancellable, GError **error) {
    require_loaded("secret_service_get_secret_for_dbus_path_sync");
    return real_secret_service_get_secret_for_dbus_path_sync(self, item_path, cancellable, error);
}

HIDDEN gboolean (secret_service_store_sync)(SecretService *service, const SecretSchema *schema, GHashTable *attributes, const gchar *collection, const gchar *label, SecretValue *value, GCancellable *cancellable, GError **error) {
    require_loaded("secret_service_store_sync");
    return real_secret_service_store_sync(service, schema, attributes, collection, label, value, cancellable, error);
}

HIDDEN const gchar * (secret_value_get)(SecretValue *value, gsize *length) {
    require_loaded("secret_value_get");
    return real_secret_value_get(value, length);
}

HIDDEN SecretValue * (secret_value_new)(const gchar *secret, gssize length, const gchar *content_type) {
    require_loaded("secret_value_new");
    return real_secret_value_new(secret, length, content_type);
}

HIDDEN void (secret_value_unref)(gpointer value) {
    require_loaded("secret_value_unref");
    real_secret_value_unref(value);
}

HIDDEN GDBusConnection * (g_bus_get_sync)(GBusType bus_type, GCancellable *cancellable, GError **error) {
    require_loaded("g_bus_get_sync");
    return real_g_bus_get_sync(bus_type, cancellable, error);
}

HIDDEN void (g_cancellable_cancel)(GCancellable *cancellable) {
    require_loaded("g_cancellable_cancel");
    real_g_cancellable_cancel(cancellable);
}

HIDDEN gboolean (g_cancellable_is_cancelled)(GCancellable *cancellable) {
    require_loaded("g_cancellable_is_cancelled");
    return real_g_cancellable_is_cancelled(cancellable);
}

HIDDEN GCancellable * (g_cancellable_new)(void) {
    require_loaded("g_cancellable_new");
    return real_g_cancellable_new();
}

HIDDEN GVariant * (g_dbus_connection_call_sync)(GDBusConnection *connection, const gchar *bus_name, const gchar *object_path, const gchar *interface_name, const gchar *method_name, GVariant *parameters, const GVariantType *reply_type, GDBusCallFlags flags, gint timeout_msec, GCancellable *cancellable, GError **error) {
    require_loaded("g_dbus_connection_call_sync");
    return real_g_dbus_connection_call_sync(connection, bus_name, object_path, interface_name, method_name, parameters, reply_type, flags, timeout_msec, cancellable, error);
}

HIDDEN gboolean (g_dbus_connection_is_closed)(GDBusConnection *connection) {
    require_loaded("g_dbus_connection_is_closed");
    return real_g_dbus_connection_is_closed(connection);
}

HIDDEN void (g_dbus_connection_set_exit_on_close)(GDBusConnection *connection, gboolean exit_on_close) {
    require_loaded("g_dbus_connection_set_exit_on_close");
    real_g_dbus_connection_set_exit_on_close(connection, exit_on_close);
}

HIDDEN gchar * (g_dbus_error_get_remote_error)(const GError *error) {
    require_loaded("g_dbus_error_get_remote_error");
    return real_g_dbus_error_get_remote_error(error);
}

HIDDEN GQuark (g_dbus_error_quark)(void) {
    return lanyard_libsecret_load(NULL) ? real_g_dbus_error_quark() : 0;
}

HIDDEN gboolean (g_dbus_error_strip_remote_error)(GError *error) {
    require_loaded("g_dbus_error_strip_remote_error");
    return real_g_dbus_error_strip_remote_error(error);
}

HIDDEN const gchar * (g_dbus_proxy_get_object_path)(GDBusProxy *proxy) {
    require_loaded("g_dbus_proxy_get_object_path");
    return real_g_dbus_proxy_get_object_path(proxy);
}

HIDDEN GQuark (g_io_error_quark)(void) {
    return lanyard_libsecret_load(NULL) ? real_g_io_error_quark() : 0;
}

HIDDEN gpointer (g_object_ref)(gpointer object) {
    require_loaded("g_object_ref");
    return real_g_object_ref(object);
}

HIDDEN void (g_object_unref)(gpointer object) {
    require_loaded("g_object_unref");
    real_g_object_unref(object);
}
