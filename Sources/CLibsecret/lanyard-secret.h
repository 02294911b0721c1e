// The part of libsecret's API Lanyard uses, declared here so that building Lanyard needs only
// GLib's headers and links nothing: libsecret is loaded on first use (CLazyLibraries). The
// values and prototypes are libsecret's ABI (the two `_for_dbus_path…` calls are from secret-paths.h,
// which libsecret calls unstable API but has exported unchanged since 0.7); LazyLibsecretTests compiles them against
// libsecret's own headers, so a difference fails the build of the tests, not a user's keyring.
#ifndef LANYARD_SECRET_H
#define LANYARD_SECRET_H

#include <glib.h>
#include <gio/gio.h>

#ifndef LANYARD_SECRET_PROTOTYPES_ONLY
typedef struct _SecretService SecretService;
typedef struct _SecretItem SecretItem;
typedef struct _SecretValue SecretValue;
typedef struct _LanyardSecretSchema SecretSchema;

typedef enum {
    SECRET_ERROR_PROTOCOL = 1,
    SECRET_ERROR_IS_LOCKED = 2,
    SECRET_ERROR_NO_SUCH_OBJECT = 3,
    SECRET_ERROR_ALREADY_EXISTS = 4,
    SECRET_ERROR_INVALID_FILE_FORMAT = 5,
} SecretError;

typedef enum {
    SECRET_SCHEMA_ATTRIBUTE_STRING = 0,
    SECRET_SCHEMA_ATTRIBUTE_INTEGER = 1,
    SECRET_SCHEMA_ATTRIBUTE_BOOLEAN = 2,
} SecretSchemaAttributeType;

typedef enum {
    SECRET_SCHEMA_NONE = 0,
    SECRET_SCHEMA_DONT_MATCH_NAME = 1 << 1,
} SecretSchemaFlags;

typedef enum {
    SECRET_SEARCH_NONE = 0,
    SECRET_SEARCH_ALL = 1 << 1,
    SECRET_SEARCH_UNLOCK = 1 << 2,
    SECRET_SEARCH_LOAD_SECRETS = 1 << 3,
} SecretSearchFlags;

typedef enum {
    SECRET_SERVICE_NONE = 0,
    SECRET_SERVICE_OPEN_SESSION = 1 << 1,
    SECRET_SERVICE_LOAD_COLLECTIONS = 1 << 2,
} SecretServiceFlags;
#endif

GQuark secret_error_get_quark(void);
gboolean secret_item_delete_sync(SecretItem *self, GCancellable *cancellable, GError **error);
GHashTable *secret_item_get_attributes(SecretItem *self);
gchar *secret_item_get_label(SecretItem *self);
gboolean secret_item_get_locked(SecretItem *self);
guint64 secret_item_get_modified(SecretItem *self);
SecretValue *secret_item_get_secret(SecretItem *self);
gboolean secret_item_load_secret_sync(SecretItem *self, GCancellable *cancellable, GError **error);
gboolean secret_item_set_attributes_sync(SecretItem *self, const SecretSchema *schema, GHashTable *attributes,
                                         GCancellable *cancellable, GError **error);
gboolean secret_item_set_label_sync(SecretItem *self, const gchar *label, GCancellable *cancellable, GError **error);
gboolean secret_item_set_secret_sync(SecretItem *self, SecretValue *value, GCancellable *cancellable, GError **error);
SecretSchema *secret_schema_newv(const gchar *name, SecretSchemaFlags flags, GHashTable *attribute_names_and_types);
void secret_service_disconnect(void);
SecretService *secret_service_get_sync(SecretServiceFlags flags, GCancellable *cancellable, GError **error);
GList *secret_service_search_sync(SecretService *service, const SecretSchema *schema, GHashTable *attributes,
                                  SecretSearchFlags flags, GCancellable *cancellable, GError **error);
gboolean secret_service_search_for_dbus_paths_sync(SecretService *self, const SecretSchema *schema, GHashTable *attributes,
                                                   GCancellable *cancellable, gchar ***unlocked, gchar ***locked,
                                                   GError **error);
SecretValue *secret_service_get_secret_for_dbus_path_sync(SecretService *self, const gchar *item_path,
                                                          GCancellable *cancellable, GError **error);
gboolean secret_service_store_sync(SecretService *service, const SecretSchema *schema, GHashTable *attributes,
                                   const gchar *collection, const gchar *label, SecretValue *value,
                                   GCancellable *cancellable, GError **error);
const gchar *secret_value_get(SecretValue *value, gsize *length);
SecretValue *secret_value_new(const gchar *secret, gssize length, const gchar *content_type);
void secret_value_unref(gpointer value);

#endif
