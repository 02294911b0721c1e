// libsecret, GIO and GObject, loaded on first use: only the Secret Service backend (and the
// agent's notifications) need them; a command that never touches the keyring does not pay their
// start-up cost, about 1.2 ms of dynamic loading and relocation.
//
// The prototypes come from GIO's headers and lanyard-secret.h, which the compiler checks the
// trampolines against (and LazyLibsecretTests checks lanyard-secret.h against libsecret's own
// headers).
#include "CLazyLibraries.h"
#include "lanyard_lazy.h"

#include <gio/gio.h>
#include "../CLibsecret/lanyard-secret.h"

#define SECRET_FUNCTIONS(F, P)                                                                                        \
    F(gboolean, secret_item_delete_sync, (SecretItem * self, GCancellable *cancellable, GError **error),              \
      (self, cancellable, error))                                                                                     \
    F(GHashTable *, secret_item_get_attributes, (SecretItem * self), (self))                                          \
    F(gchar *, secret_item_get_label, (SecretItem * self), (self))                                                    \
    F(gboolean, secret_item_get_locked, (SecretItem * self), (self))                                                  \
    F(guint64, secret_item_get_modified, (SecretItem * self), (self))                                                 \
    F(SecretValue *, secret_item_get_secret, (SecretItem * self), (self))                                             \
    F(gboolean, secret_item_load_secret_sync, (SecretItem * self, GCancellable *cancellable, GError **error),         \
      (self, cancellable, error))                                                                                     \
    F(gboolean, secret_item_set_attributes_sync,                                                                      \
      (SecretItem * self, const SecretSchema *schema, GHashTable *attributes, GCancellable *cancellable,              \
       GError **error),                                                                                               \
      (self, schema, attributes, cancellable, error))                                                                 \
    F(gboolean, secret_item_set_label_sync,                                                                           \
      (SecretItem * self, const gchar *label, GCancellable *cancellable, GError **error),                             \
      (self, label, cancellable, error))                                                                              \
    F(gboolean, secret_item_set_secret_sync,                                                                          \
      (SecretItem * self, SecretValue *value, GCancellable *cancellable, GError **error),                             \
      (self, value, cancellable, error))                                                                              \
    F(SecretSchema *, secret_schema_newv,                                                                             \
      (const gchar *name, SecretSchemaFlags flags, GHashTable *attribute_names_and_types),                            \
      (name, flags, attribute_names_and_types))                                                                       \
    P(void, secret_service_disconnect, (void), ())                                                                    \
    F(SecretService *, secret_service_get_sync, (SecretServiceFlags flags, GCancellable *cancellable, GError **error), \
      (flags, cancellable, error))                                                                                    \
    F(GList *, secret_service_search_sync,                                                                            \
      (SecretService * service, const SecretSchema *schema, GHashTable *attributes, SecretSearchFlags flags,          \
       GCancellable *cancellable, GError **error),                                                                    \
      (service, schema, attributes, flags, cancellable, error))                                                       \
    F(gboolean, secret_service_search_for_dbus_paths_sync,                                                            \
      (SecretService * self, const SecretSchema *schema, GHashTable *attributes, GCancellable *cancellable,           \
       gchar ***unlocked, gchar ***locked, GError **error),                                                           \
      (self, schema, attributes, cancellable, unlocked, locked, error))                                               \
    F(SecretValue *, secret_service_get_secret_for_dbus_path_sync,                                                    \
      (SecretService * self, const gchar *item_path, GCancellable *cancellable, GError **error),                      \
      (self, item_path, cancellable, error))                                                                          \
    F(gboolean, secret_service_store_sync,                                                                            \
      (SecretService * service, const SecretSchema *schema, GHashTable *attributes, const gchar *collection,          \
       const gchar *label, SecretValue *value, GCancellable *cancellable, GError **error),                            \
      (service, schema, attributes, collection, label, value, cancellable, error))                                    \
    F(const gchar *, secret_value_get, (SecretValue * value, gsize *length), (value, length))                         \
    F(SecretValue *, secret_value_new, (const gchar *secret, gssize length, const gchar *content_type),               \
      (secret, length, content_type))                                                                                 \
    P(void, secret_value_unref, (gpointer value), (value))

#define GIO_FUNCTIONS(F, P)                                                                                           \
    F(GDBusConnection *, g_bus_get_sync, (GBusType bus_type, GCancellable *cancellable, GError **error),              \
      (bus_type, cancellable, error))                                                                                 \
    P(void, g_cancellable_cancel, (GCancellable * cancellable), (cancellable))                                        \
    F(gboolean, g_cancellable_is_cancelled, (GCancellable * cancellable), (cancellable))                              \
    F(GCancellable *, g_cancellable_new, (void), ())                                                                  \
    F(GVariant *, g_dbus_connection_call_sync,                                                                        \
      (GDBusConnection * connection, const gchar *bus_name, const gchar *object_path, const gchar *interface_name,    \
       const gchar *method_name, GVariant *parameters, const GVariantType *reply_type, GDBusCallFlags flags,          \
       gint timeout_msec, GCancellable *cancellable, GError **error),                                                 \
      (connection, bus_name, object_path, interface_name, method_name, parameters, reply_type, flags, timeout_msec,   \
       cancellable, error))                                                                                           \
    F(gboolean, g_dbus_connection_is_closed, (GDBusConnection * connection), (connection))                            \
    P(void, g_dbus_connection_set_exit_on_close, (GDBusConnection * connection, gboolean exit_on_close),              \
      (connection, exit_on_close))                                                                                    \
    F(gchar *, g_dbus_error_get_remote_error, (const GError *error), (error))                                         \
    F(gboolean, g_dbus_error_strip_remote_error, (GError * error), (error))                                           \
    F(gchar *, g_dbus_proxy_get_name_owner, (GDBusProxy * proxy), (proxy))                                            \
    F(const gchar *, g_dbus_proxy_get_object_path, (GDBusProxy * proxy), (proxy))

#define GOBJECT_FUNCTIONS(F, P)                                \
    F(gpointer, g_object_ref, (gpointer object), (object))     \
    P(void, g_object_unref, (gpointer object), (object))

// Error domains: when libsecret is not loaded no error can come from them, so these answer 0
// instead of loading it.
#define SECRET_QUARKS(F, P) F(GQuark, secret_error_get_quark, (void), ())
#define GIO_QUARKS(F, P) F(GQuark, g_dbus_error_quark, (void), ()) F(GQuark, g_io_error_quark, (void), ())

#define SECRET_ALL(F, P) SECRET_FUNCTIONS(F, P) SECRET_QUARKS(F, P)
#define GIO_ALL(F, P) GIO_FUNCTIONS(F, P) GIO_QUARKS(F, P)

SECRET_ALL(LAZY_POINTER, LAZY_POINTER)
GIO_ALL(LAZY_POINTER, LAZY_POINTER)
GOBJECT_FUNCTIONS(LAZY_POINTER, LAZY_POINTER)
static const lazy_symbol secret_symbols[] = {SECRET_ALL(LAZY_ENTRY, LAZY_ENTRY)};
static const lazy_symbol gio_symbols[] = {GIO_ALL(LAZY_ENTRY, LAZY_ENTRY)};
static const lazy_symbol gobject_symbols[] = {GOBJECT_FUNCTIONS(LAZY_ENTRY, LAZY_ENTRY)};

// libsecret needs GIO and GObject (and GLib), which it brings in.
static const lazy_object objects[] = {
    {"libsecret-1.so.0", NULL, secret_symbols, LAZY_COUNT(secret_symbols), 0},
    {"libgio-2.0.so.0", NULL, gio_symbols, LAZY_COUNT(gio_symbols), 1},
    {"libgobject-2.0.so.0", NULL, gobject_symbols, LAZY_COUNT(gobject_symbols), 1},
};

static int open_libsecret(char *error, size_t error_size) {
    return lazy_open_objects(objects, LAZY_COUNT(objects), error, error_size);
}

// Callers check lanyard_libsecret_load() first (Secret Service stores report a missing libsecret
// as an unavailable backend); reaching a function without it is a bug.
LAZY_LOADER(libsecret, open_libsecret)

#define LAZY_REQUIRE libsecret_require
SECRET_FUNCTIONS(LAZY_FUNCTION, LAZY_PROCEDURE)
GIO_FUNCTIONS(LAZY_FUNCTION, LAZY_PROCEDURE)
GOBJECT_FUNCTIONS(LAZY_FUNCTION, LAZY_PROCEDURE)

#define QUARK(ret, name, params, args) \
    HIDDEN ret(name) params { return lanyard_libsecret_load(NULL) ? real_##name args : 0; }
SECRET_QUARKS(QUARK, QUARK)
GIO_QUARKS(QUARK, QUARK)
