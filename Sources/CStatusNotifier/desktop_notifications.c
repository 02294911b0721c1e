// Desktop notifications with actions on GDBus (see desktop_notifications.h).
//
// As in status_notifier.c, every GLib and GIO function goes through CLazyLibraries' trampolines
// and none is variadic. The ids of the notifications sent are kept on the loop's thread, so a
// signal is matched against them in the order the bus delivered the answer and the signal.
#include "desktop_notifications.h"

#include <gio/gio.h>
#include "loop_thread.h"
#include <stdio.h>
#include <string.h>

#define NOTIFICATIONS_NAME "org.freedesktop.Notifications"
#define NOTIFICATIONS_PATH "/org/freedesktop/Notifications"
#define NOTIFICATIONS_INTERFACE "org.freedesktop.Notifications"
// The ids remembered: the tray sends a handful a day, and a signal for an older one is dropped.
#define REMEMBERED 64

struct lanyard_notifications {
    loop_thread main;
    GDBusConnection *connection;
    guint subscription;
    lanyard_notify_reply_fn on_reply;
    lanyard_notification_signal_fn on_signal;
    void *callback_context;
    // Owned by the loop's thread.
    uint32_t sent[REMEMBERED];
    int next_sent;
};

typedef struct {
    lanyard_notifications *owner;
    uint64_t token;
    char *app_name, *icon, *summary, *body;
    char **actions;  // NULL-terminated
    GVariant *image;  // the image-data hint's (iiibiiay), sunk; NULL for none
    uint8_t urgency;
    int32_t timeout_ms;
} pending_notify;

static void free_pending(gpointer data) {
    pending_notify *p = data;
    g_free(p->app_name);
    g_free(p->icon);
    g_free(p->summary);
    g_free(p->body);
    g_strfreev(p->actions);
    if (p->image) g_variant_unref(p->image);
    g_free(p);
}

static int was_sent(const lanyard_notifications *n, uint32_t id) {
    if (id == 0) return 0;
    for (int i = 0; i < REMEMBERED; i++)
        if (n->sent[i] == id) return 1;
    return 0;
}

static void notify_answered(GObject *source, GAsyncResult *result, gpointer data) {
    pending_notify *p = data;
    lanyard_notifications *n = p->owner;
    GError *error = NULL;
    GVariant *reply = g_dbus_connection_call_finish((GDBusConnection *)source, result, &error);
    if (reply) {
        uint32_t id = 0;
        if (g_variant_n_children(reply) == 1) {
            GVariant *child = g_variant_get_child_value(reply, 0);
            if (strcmp(g_variant_get_type_string(child), "u") == 0) id = g_variant_get_uint32(child);
            g_variant_unref(child);
        }
        g_variant_unref(reply);
        n->sent[n->next_sent] = id;
        n->next_sent = (n->next_sent + 1) % REMEMBERED;
        n->on_reply(n->callback_context, p->token, id, id == 0 ? "the notification service answered without an id" : NULL);
    } else {
        g_dbus_error_strip_remote_error(error);
        n->on_reply(n->callback_context, p->token, 0, error->message);
        g_error_free(error);
    }
    free_pending(p);
}

static GVariant *dict_entry(const char *key, GVariant *value) {
    return g_variant_new_dict_entry(g_variant_new_string(key), g_variant_new_variant(value));
}

static gboolean send_on_loop(gpointer data) {
    pending_notify *p = data;
    lanyard_notifications *n = p->owner;
    GVariantBuilder hints;
    g_variant_builder_init(&hints, (const GVariantType *)"a{sv}");
    g_variant_builder_add_value(&hints, dict_entry("urgency", g_variant_new_byte(p->urgency)));
    if (p->image) g_variant_builder_add_value(&hints, dict_entry("image-data", g_variant_ref(p->image)));
    // Notify(app_name s, replaces_id u, app_icon s, summary s, body s, actions as, hints a{sv}, expire_timeout i)
    GVariant *arguments[8] = {
        g_variant_new_string(p->app_name), g_variant_new_uint32(0), g_variant_new_string(p->icon),
        g_variant_new_string(p->summary), g_variant_new_string(p->body),
        g_variant_new_strv((const gchar *const *)p->actions, -1), g_variant_builder_end(&hints),
        g_variant_new_int32(p->timeout_ms),
    };
    g_dbus_connection_call(n->connection, NOTIFICATIONS_NAME, NOTIFICATIONS_PATH, NOTIFICATIONS_INTERFACE, "Notify",
                           g_variant_new_tuple(arguments, 8), NULL, G_DBUS_CALL_FLAGS_NONE, 5000, NULL, notify_answered, p);
    return G_SOURCE_REMOVE;
}

static void signal_received(GDBusConnection *connection, const gchar *sender, const gchar *path, const gchar *interface,
                            const gchar *signal, GVariant *parameters, gpointer data) {
    (void)connection, (void)sender, (void)path, (void)interface;
    lanyard_notifications *n = data;
    const char *type = g_variant_get_type_string(parameters);
    int action = strcmp(signal, "ActionInvoked") == 0 && strcmp(type, "(us)") == 0;
    int closed = strcmp(signal, "NotificationClosed") == 0 && strcmp(type, "(uu)") == 0;
    if (!action && !closed) return;
    GVariant *first = g_variant_get_child_value(parameters, 0), *second = g_variant_get_child_value(parameters, 1);
    uint32_t id = g_variant_get_uint32(first);
    if (was_sent(n, id)) {
        if (action) n->on_signal(n->callback_context, id, g_variant_get_string(second, NULL), 0);
        else n->on_signal(n->callback_context, id, NULL, g_variant_get_uint32(second));
    }
    g_variant_unref(first);
    g_variant_unref(second);
}

lanyard_notifications *lanyard_notifications_start(lanyard_notify_reply_fn on_reply, lanyard_notification_signal_fn on_signal,
                                                   void *context, char *error_text, int error_size) {
    GDBusConnection *connection = session_bus(error_text, error_size);
    if (!connection) return NULL;
    lanyard_notifications *n = g_malloc0(sizeof *n);
    n->connection = connection;
    n->on_reply = on_reply;
    n->on_signal = on_signal;
    n->callback_context = context;
    loop_thread_init(&n->main);
    // Signals go to the thread-default context of the moment they are subscribed: the loop's.
    // Any sender: the service's unique name changes when it restarts; the ids filter instead.
    g_main_context_push_thread_default(n->main.context);
    n->subscription = g_dbus_connection_signal_subscribe(connection, NULL, NOTIFICATIONS_INTERFACE, NULL, NOTIFICATIONS_PATH, NULL,
                                                         G_DBUS_SIGNAL_FLAGS_NONE, signal_received, n, NULL);
    g_main_context_pop_thread_default(n->main.context);
    loop_thread_start(&n->main);
    return n;
}

void lanyard_notifications_send(lanyard_notifications *n, uint64_t token, const char *app_name, const char *icon,
                                const char *summary, const char *body, const char *const *actions, int action_count,
                                const lanyard_notification_image *image, uint8_t urgency, int32_t timeout_ms) {
    pending_notify *p = g_malloc0(sizeof *p);
    p->owner = n;
    p->token = token;
    p->app_name = g_strdup(app_name ? app_name : "");
    p->icon = g_strdup(icon ? icon : "");
    p->summary = g_strdup(summary ? summary : "");
    p->body = g_strdup(body ? body : "");
    p->actions = g_malloc0(sizeof(char *) * (size_t)(action_count + 1));
    for (int i = 0; i < action_count; i++) p->actions[i] = g_strdup(actions[i] ? actions[i] : "");
    if (image && image->rgba && image->width > 0 && image->height > 0) {
        // The spec's image-data: width, height, rowstride, has alpha, bits per sample, channels,
        // pixels; built here (GVariant is immutable and thread-safe once sunk).
        gsize bytes = (gsize)image->width * (gsize)image->height * 4;
        GVariant *parts[7] = {
            g_variant_new_int32(image->width), g_variant_new_int32(image->height),
            g_variant_new_int32(image->width * 4), g_variant_new_boolean(TRUE), g_variant_new_int32(8),
            g_variant_new_int32(4),
            g_variant_new_fixed_array((const GVariantType *)"y", image->rgba, bytes, 1),
        };
        p->image = g_variant_ref_sink(g_variant_new_tuple(parts, 7));
    }
    p->urgency = urgency;
    p->timeout_ms = timeout_ms;
    // notify_answered frees it. (After stop nothing runs: a request still queued then is not freed.)
    g_main_context_invoke(n->main.context, send_on_loop, p);
}

void lanyard_notifications_stop(lanyard_notifications *n) {
    loop_thread_join(&n->main);
    g_dbus_connection_signal_unsubscribe(n->connection, n->subscription);
    g_dbus_connection_flush_sync(n->connection, NULL, NULL);
    loop_thread_free(&n->main);
    g_object_unref(n->connection);
    g_free(n);
}
