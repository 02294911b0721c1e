// GIO's D-Bus service side, loaded on first use: only `lanyard tray` (CStatusNotifier) exports
// objects, owns names and listens to signals. The client calls GIO shares with libsecret stay in libsecret.c.
#include "CLazyLibraries.h"
#include "lanyard_lazy.h"

#include <gio/gio.h>

#define GIO_FUNCTIONS(F, P)                                                                                           \
    F(guint, g_bus_own_name_on_connection,                                                                            \
      (GDBusConnection * connection, const gchar *name, GBusNameOwnerFlags flags,                                     \
       GBusNameAcquiredCallback name_acquired_handler, GBusNameLostCallback name_lost_handler, gpointer user_data,     \
       GDestroyNotify user_data_free_func),                                                                           \
      (connection, name, flags, name_acquired_handler, name_lost_handler, user_data, user_data_free_func))            \
    P(void, g_bus_unown_name, (guint owner_id), (owner_id))                                                           \
    P(void, g_bus_unwatch_name, (guint watcher_id), (watcher_id))                                                     \
    F(guint, g_bus_watch_name_on_connection,                                                                          \
      (GDBusConnection * connection, const gchar *name, GBusNameWatcherFlags flags,                                   \
       GBusNameAppearedCallback name_appeared_handler, GBusNameVanishedCallback name_vanished_handler,                \
       gpointer user_data, GDestroyNotify user_data_free_func),                                                       \
      (connection, name, flags, name_appeared_handler, name_vanished_handler, user_data, user_data_free_func))        \
    P(void, g_dbus_connection_call,                                                                                   \
      (GDBusConnection * connection, const gchar *bus_name, const gchar *object_path, const gchar *interface_name,    \
       const gchar *method_name, GVariant *parameters, const GVariantType *reply_type, GDBusCallFlags flags,          \
       gint timeout_msec, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data),               \
      (connection, bus_name, object_path, interface_name, method_name, parameters, reply_type, flags, timeout_msec,   \
       cancellable, callback, user_data))                                                                             \
    F(GVariant *, g_dbus_connection_call_finish, (GDBusConnection * connection, GAsyncResult *res, GError **error),   \
      (connection, res, error))                                                                                       \
    F(gboolean, g_dbus_connection_emit_signal,                                                                        \
      (GDBusConnection * connection, const gchar *destination_bus_name, const gchar *object_path,                     \
       const gchar *interface_name, const gchar *signal_name, GVariant *parameters, GError **error),                   \
      (connection, destination_bus_name, object_path, interface_name, signal_name, parameters, error))                \
    F(gboolean, g_dbus_connection_flush_sync, (GDBusConnection * connection, GCancellable *cancellable, GError **error), \
      (connection, cancellable, error))                                                                               \
    F(guint, g_dbus_connection_register_object,                                                                       \
      (GDBusConnection * connection, const gchar *object_path, GDBusInterfaceInfo *interface_info,                    \
       const GDBusInterfaceVTable *vtable, gpointer user_data, GDestroyNotify user_data_free_func, GError **error),    \
      (connection, object_path, interface_info, vtable, user_data, user_data_free_func, error))                       \
    F(guint, g_dbus_connection_signal_subscribe,                                                                      \
      (GDBusConnection * connection, const gchar *sender, const gchar *interface_name, const gchar *member,           \
       const gchar *object_path, const gchar *arg0, GDBusSignalFlags flags, GDBusSignalCallback callback,             \
       gpointer user_data, GDestroyNotify user_data_free_func),                                                       \
      (connection, sender, interface_name, member, object_path, arg0, flags, callback, user_data, user_data_free_func)) \
    P(void, g_dbus_connection_signal_unsubscribe, (GDBusConnection * connection, guint subscription_id),              \
      (connection, subscription_id))                                                                                  \
    F(const gchar *, g_dbus_connection_get_unique_name, (GDBusConnection * connection), (connection))               \
    F(gboolean, g_dbus_connection_unregister_object, (GDBusConnection * connection, guint registration_id),           \
      (connection, registration_id))                                                                                  \
    P(void, g_dbus_method_invocation_return_dbus_error,                                                               \
      (GDBusMethodInvocation * invocation, const gchar *error_name, const gchar *error_message),                       \
      (invocation, error_name, error_message))                                                                        \
    P(void, g_dbus_method_invocation_return_value, (GDBusMethodInvocation * invocation, GVariant *parameters),        \
      (invocation, parameters))                                                                                       \
    F(GDBusInterfaceInfo *, g_dbus_node_info_lookup_interface, (GDBusNodeInfo * info, const gchar *name), (info, name)) \
    F(GDBusNodeInfo *, g_dbus_node_info_new_for_xml, (const gchar *xml_data, GError **error), (xml_data, error))      \
    P(void, g_dbus_node_info_unref, (GDBusNodeInfo * info), (info))

LAZY_LIBRARY(gio, "libgio-2.0.so.0", GIO_FUNCTIONS)
#define LAZY_REQUIRE gio_require
GIO_FUNCTIONS(LAZY_FUNCTION, LAZY_PROCEDURE)
