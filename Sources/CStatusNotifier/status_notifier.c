// The StatusNotifierItem and its dbusmenu on GDBus (see status_notifier.h).
//
// Every GLib and GIO function called here goes through CLazyLibraries' trampolines (glib.c,
// gio.c, libsecret.c), so `lanyard` loads GLib and GIO only when the tray starts. None of them is
// variadic for that reason: GVariants are built from their parts, never from format strings.
#include "status_notifier.h"

#include <gio/gio.h>
#include "loop_thread.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// LANYARD_TRACE_TRAY=1: each step of start-up and registration on stderr, with the wall-clock time
// (to set beside a watcher's own log) and the seconds since the item started.
static int trace_on = -1;
static struct timespec trace_start;

static void trace(const char *format, ...) {
    if (trace_on < 0) {
        const char *value = getenv("LANYARD_TRACE_TRAY");
        trace_on = value && *value && strcmp(value, "0") != 0;
        clock_gettime(CLOCK_MONOTONIC, &trace_start);
    }
    if (!trace_on) return;
    struct timespec now, wall;
    clock_gettime(CLOCK_MONOTONIC, &now);
    clock_gettime(CLOCK_REALTIME, &wall);
    double since = (double)(now.tv_sec - trace_start.tv_sec) + (double)(now.tv_nsec - trace_start.tv_nsec) / 1e9;
    char line[512];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(line, sizeof line, format, arguments);
    va_end(arguments);
    fprintf(stderr, "lanyard tray trace: %lld.%03ld +%.3f s %s\n", (long long)wall.tv_sec, wall.tv_nsec / 1000000, since, line);
}

static const char introspection_xml[] =
    "<node>"
    " <interface name='org.kde.StatusNotifierItem'>"
    "  <property name='Category' type='s' access='read'/>"
    "  <property name='Id' type='s' access='read'/>"
    "  <property name='Title' type='s' access='read'/>"
    "  <property name='Status' type='s' access='read'/>"
    "  <property name='WindowId' type='i' access='read'/>"
    "  <property name='IconName' type='s' access='read'/>"
    "  <property name='IconPixmap' type='a(iiay)' access='read'/>"
    "  <property name='IconThemePath' type='s' access='read'/>"
    "  <property name='OverlayIconName' type='s' access='read'/>"
    "  <property name='AttentionIconName' type='s' access='read'/>"
    "  <property name='ToolTip' type='(sa(iiay)ss)' access='read'/>"
    "  <property name='XAyatanaLabel' type='s' access='read'/>"
    "  <property name='XAyatanaLabelGuide' type='s' access='read'/>"
    "  <property name='ItemIsMenu' type='b' access='read'/>"
    "  <property name='Menu' type='o' access='read'/>"
    "  <method name='ContextMenu'><arg name='x' type='i' direction='in'/><arg name='y' type='i' direction='in'/></method>"
    "  <method name='Activate'><arg name='x' type='i' direction='in'/><arg name='y' type='i' direction='in'/></method>"
    "  <method name='SecondaryActivate'><arg name='x' type='i' direction='in'/><arg name='y' type='i' direction='in'/></method>"
    "  <method name='Scroll'><arg name='delta' type='i' direction='in'/><arg name='orientation' type='s' direction='in'/></method>"
    "  <signal name='NewTitle'/>"
    "  <signal name='NewIcon'/>"
    "  <signal name='NewToolTip'/>"
    "  <signal name='NewStatus'><arg name='status' type='s'/></signal>"
    "  <signal name='XAyatanaNewLabel'><arg name='label' type='s'/><arg name='guide' type='s'/></signal>"
    " </interface>"
    " <interface name='com.canonical.dbusmenu'>"
    "  <property name='Version' type='u' access='read'/>"
    "  <property name='TextDirection' type='s' access='read'/>"
    "  <property name='Status' type='s' access='read'/>"
    "  <property name='IconThemePath' type='as' access='read'/>"
    "  <method name='GetLayout'>"
    "   <arg type='i' name='parentId' direction='in'/><arg type='i' name='recursionDepth' direction='in'/>"
    "   <arg type='as' name='propertyNames' direction='in'/>"
    "   <arg type='u' name='revision' direction='out'/><arg type='(ia{sv}av)' name='layout' direction='out'/>"
    "  </method>"
    "  <method name='GetGroupProperties'>"
    "   <arg type='ai' name='ids' direction='in'/><arg type='as' name='propertyNames' direction='in'/>"
    "   <arg type='a(ia{sv})' name='properties' direction='out'/>"
    "  </method>"
    "  <method name='GetProperty'>"
    "   <arg type='i' name='id' direction='in'/><arg type='s' name='name' direction='in'/>"
    "   <arg type='v' name='value' direction='out'/>"
    "  </method>"
    "  <method name='Event'>"
    "   <arg type='i' name='id' direction='in'/><arg type='s' name='eventId' direction='in'/>"
    "   <arg type='v' name='data' direction='in'/><arg type='u' name='timestamp' direction='in'/>"
    "  </method>"
    "  <method name='EventGroup'>"
    "   <arg type='a(isvu)' name='events' direction='in'/><arg type='ai' name='idErrors' direction='out'/>"
    "  </method>"
    "  <method name='AboutToShow'>"
    "   <arg type='i' name='id' direction='in'/><arg type='b' name='needUpdate' direction='out'/>"
    "  </method>"
    "  <method name='AboutToShowGroup'>"
    "   <arg type='ai' name='ids' direction='in'/><arg type='ai' name='updatesNeeded' direction='out'/>"
    "   <arg type='ai' name='idErrors' direction='out'/>"
    "  </method>"
    "  <signal name='ItemsPropertiesUpdated'>"
    "   <arg type='a(ia{sv})' name='updatedProps'/><arg type='a(ias)' name='removedProps'/>"
    "  </signal>"
    "  <signal name='LayoutUpdated'><arg type='u' name='revision'/><arg type='i' name='parent'/></signal>"
    "  <signal name='ItemActivationRequested'><arg type='i' name='id'/><arg type='u' name='timestamp'/></signal>"
    " </interface>"
    "</node>";

#define ITEM_PATH "/StatusNotifierItem"
#define MENU_PATH "/MenuBar"
#define ITEM_INTERFACE "org.kde.StatusNotifierItem"
#define MENU_INTERFACE "com.canonical.dbusmenu"
#define WATCHER_NAME "org.kde.StatusNotifierWatcher"

typedef struct {
    int32_t id, parent, toggle_state, enabled;
    char *label, *toggle_type, *type;
    uint8_t *icon_png;  // malloc'd; NULL: no icon
    int32_t icon_png_size;
} menu_entry;

typedef struct {
    char *status, *icon_name, *title, *tooltip_title, *tooltip_body, *label, *label_guide;
    GVariant *pixmaps;  // a(iiay), floating reference sunk; NULL before the first update
} item_look;

struct lanyard_status_notifier {
    loop_thread main;
    GDBusConnection *connection;
    GDBusNodeInfo *node;
    guint item_registration, menu_registration, own_id, watch_id;
    char *bus_name, *item_id;
    // The watcher's unique name while one runs (NULL otherwise), and the registration attempts
    // made with it: a watcher that has just taken its name may not have exported its object yet.
    char *watcher_owner;
    int attempts;
    lanyard_menu_event_fn on_event;
    lanyard_registered_fn on_registered;
    void *callback_context;
    // Owned by the loop's thread once it runs (changed only by apply_update, on that thread).
    menu_entry *entries;
    int entry_count;
    item_look look;
    uint32_t revision;  // written on the loop's thread, read anywhere (atomics)
};

typedef struct {
    lanyard_status_notifier *notifier;
    menu_entry *entries;
    int entry_count;
    item_look look;
} pending_update;

static char *copy(const char *text) { return g_strdup(text ? text : ""); }
static char *copy_or_null(const char *text) { return text ? g_strdup(text) : NULL; }
static uint8_t *copy_bytes(const uint8_t *bytes, int32_t size) {
    if (!bytes || size <= 0) return NULL;
    uint8_t *out = malloc((size_t)size);
    if (out) memcpy(out, bytes, (size_t)size);
    return out;
}

static void free_entries(menu_entry *entries, int count) {
    for (int i = 0; i < count; i++) {
        g_free(entries[i].label);
        g_free(entries[i].toggle_type);
        g_free(entries[i].type);
        free(entries[i].icon_png);
    }
    g_free(entries);
}

static void free_look(item_look *look) {
    g_free(look->status);
    g_free(look->icon_name);
    g_free(look->title);
    g_free(look->tooltip_title);
    g_free(look->tooltip_body);
    g_free(look->label);
    g_free(look->label_guide);
    if (look->pixmaps) g_variant_unref(look->pixmaps);
}

static const menu_entry *find_entry(const lanyard_status_notifier *n, int32_t id) {
    for (int i = 0; i < n->entry_count; i++)
        if (n->entries[i].id == id) return &n->entries[i];
    return NULL;
}

static int has_children(const lanyard_status_notifier *n, int32_t id) {
    for (int i = 0; i < n->entry_count; i++)
        if (n->entries[i].parent == id) return 1;
    return 0;
}

static GVariant *dict_entry(const char *key, GVariant *value) {
    return g_variant_new_dict_entry(g_variant_new_string(key), g_variant_new_variant(value));
}

/// An entry's properties, a{sv} (the root, id 0, has only children-display).
static GVariant *entry_properties(const lanyard_status_notifier *n, int32_t id) {
    GVariantBuilder builder;
    g_variant_builder_init(&builder, (const GVariantType *)"a{sv}");
    const menu_entry *e = id == 0 ? NULL : find_entry(n, id);
    if (e) {
        if (e->type) {
            g_variant_builder_add_value(&builder, dict_entry("type", g_variant_new_string(e->type)));
        } else {
            g_variant_builder_add_value(&builder, dict_entry("label", g_variant_new_string(e->label)));
        }
        if (!e->enabled) g_variant_builder_add_value(&builder, dict_entry("enabled", g_variant_new_boolean(FALSE)));
        if (e->icon_png)
            g_variant_builder_add_value(&builder, dict_entry("icon-data", g_variant_new_fixed_array((const GVariantType *)"y", e->icon_png,
                                                                                                     (gsize)e->icon_png_size, 1)));
        if (e->toggle_type) {
            g_variant_builder_add_value(&builder, dict_entry("toggle-type", g_variant_new_string(e->toggle_type)));
            g_variant_builder_add_value(&builder, dict_entry("toggle-state", g_variant_new_int32(e->toggle_state)));
        }
    }
    if (has_children(n, id))
        g_variant_builder_add_value(&builder, dict_entry("children-display", g_variant_new_string("submenu")));
    return g_variant_builder_end(&builder);
}

/// (ia{sv}av): the entry `id` with its children down to `depth` levels (-1: all).
static GVariant *layout_node(const lanyard_status_notifier *n, int32_t id, int32_t depth) {
    GVariantBuilder children;
    g_variant_builder_init(&children, (const GVariantType *)"av");
    if (depth != 0) {
        for (int i = 0; i < n->entry_count; i++) {
            if (n->entries[i].parent != id) continue;
            g_variant_builder_add_value(&children, g_variant_new_variant(layout_node(n, n->entries[i].id, depth < 0 ? -1 : depth - 1)));
        }
    }
    GVariant *parts[3] = {g_variant_new_int32(id), entry_properties(n, id), g_variant_builder_end(&children)};
    return g_variant_new_tuple(parts, 3);
}

static GVariant *tuple1(GVariant *child) { return g_variant_new_tuple(&child, 1); }

static GVariant *empty_int_array(void) { return g_variant_new_array(G_VARIANT_TYPE_INT32, NULL, 0); }

static void return_unknown_id(GDBusMethodInvocation *invocation, int32_t id) {
    char message[64];
    snprintf(message, sizeof message, "no menu entry %d", id);
    g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.InvalidArgs", message);
}

static void menu_method(GDBusConnection *connection, const gchar *sender, const gchar *path, const gchar *interface,
                        const gchar *method, GVariant *parameters, GDBusMethodInvocation *invocation, gpointer data) {
    (void)connection, (void)sender, (void)path, (void)interface;
    lanyard_status_notifier *n = data;
    if (strcmp(method, "GetLayout") == 0) {
        GVariant *parent = g_variant_get_child_value(parameters, 0), *depth = g_variant_get_child_value(parameters, 1);
        int32_t parent_id = g_variant_get_int32(parent), recursion = g_variant_get_int32(depth);
        g_variant_unref(parent);
        g_variant_unref(depth);
        if (parent_id != 0 && !find_entry(n, parent_id)) return return_unknown_id(invocation, parent_id);
        GVariant *reply[2] = {g_variant_new_uint32(n->revision), layout_node(n, parent_id, recursion)};
        g_dbus_method_invocation_return_value(invocation, g_variant_new_tuple(reply, 2));
    } else if (strcmp(method, "GetGroupProperties") == 0) {
        GVariant *ids = g_variant_get_child_value(parameters, 0);
        GVariantBuilder builder;
        g_variant_builder_init(&builder, (const GVariantType *)"a(ia{sv})");
        gsize count = g_variant_n_children(ids);
        for (gsize i = 0; i < count; i++) {
            GVariant *child = g_variant_get_child_value(ids, i);
            int32_t id = g_variant_get_int32(child);
            g_variant_unref(child);
            if (id != 0 && !find_entry(n, id)) continue;
            GVariant *pair[2] = {g_variant_new_int32(id), entry_properties(n, id)};
            g_variant_builder_add_value(&builder, g_variant_new_tuple(pair, 2));
        }
        g_variant_unref(ids);
        g_dbus_method_invocation_return_value(invocation, tuple1(g_variant_builder_end(&builder)));
    } else if (strcmp(method, "GetProperty") == 0) {
        GVariant *id_value = g_variant_get_child_value(parameters, 0), *name_value = g_variant_get_child_value(parameters, 1);
        int32_t id = g_variant_get_int32(id_value);
        const char *name = g_variant_get_string(name_value, NULL);
        GVariant *properties = (id == 0 || find_entry(n, id)) ? entry_properties(n, id) : NULL;
        GVariant *value = properties ? g_variant_lookup_value(properties, name, NULL) : NULL;
        if (value) {
            g_dbus_method_invocation_return_value(invocation, tuple1(g_variant_new_variant(value)));
            g_variant_unref(value);
        } else {
            g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.InvalidArgs", "no such property");
        }
        if (properties) g_variant_unref(g_variant_ref_sink(properties));
        g_variant_unref(id_value);
        g_variant_unref(name_value);
    } else if (strcmp(method, "Event") == 0) {
        GVariant *id_value = g_variant_get_child_value(parameters, 0), *event_value = g_variant_get_child_value(parameters, 1);
        int32_t id = g_variant_get_int32(id_value);
        char *event = g_strdup(g_variant_get_string(event_value, NULL));
        g_variant_unref(id_value);
        g_variant_unref(event_value);
        if (id != 0 && !find_entry(n, id)) {
            g_free(event);
            return return_unknown_id(invocation, id);
        }
        g_dbus_method_invocation_return_value(invocation, NULL);
        if (n->on_event) n->on_event(n->callback_context, id, event);
        g_free(event);
    } else if (strcmp(method, "EventGroup") == 0) {
        GVariant *events = g_variant_get_child_value(parameters, 0);
        GVariantBuilder errors;
        g_variant_builder_init(&errors, (const GVariantType *)"ai");
        gsize count = g_variant_n_children(events);
        for (gsize i = 0; i < count; i++) {
            GVariant *event = g_variant_get_child_value(events, i);
            GVariant *id_value = g_variant_get_child_value(event, 0), *event_value = g_variant_get_child_value(event, 1);
            int32_t id = g_variant_get_int32(id_value);
            if (id != 0 && !find_entry(n, id)) {
                g_variant_builder_add_value(&errors, g_variant_new_int32(id));
            } else if (n->on_event) {
                n->on_event(n->callback_context, id, g_variant_get_string(event_value, NULL));
            }
            g_variant_unref(id_value);
            g_variant_unref(event_value);
            g_variant_unref(event);
        }
        g_variant_unref(events);
        g_dbus_method_invocation_return_value(invocation, tuple1(g_variant_builder_end(&errors)));
    } else if (strcmp(method, "AboutToShow") == 0) {
        // The menu is about to be shown: the caller may refresh what it shows (a new layout
        // follows with LayoutUpdated; this answer does not wait for it).
        if (n->on_event) n->on_event(n->callback_context, -1, "opened");
        g_dbus_method_invocation_return_value(invocation, tuple1(g_variant_new_boolean(FALSE)));
    } else if (strcmp(method, "AboutToShowGroup") == 0) {
        if (n->on_event) n->on_event(n->callback_context, -1, "opened");
        GVariant *reply[2] = {empty_int_array(), empty_int_array()};
        g_dbus_method_invocation_return_value(invocation, g_variant_new_tuple(reply, 2));
    } else {
        g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.UnknownMethod", method);
    }
}

static GVariant *menu_property(GDBusConnection *connection, const gchar *sender, const gchar *path,
                               const gchar *interface, const gchar *property, GError **error, gpointer data) {
    (void)connection, (void)sender, (void)path, (void)interface, (void)data, (void)error;
    if (strcmp(property, "Version") == 0) return g_variant_new_uint32(3);
    if (strcmp(property, "TextDirection") == 0) return g_variant_new_string("ltr");
    if (strcmp(property, "Status") == 0) return g_variant_new_string("normal");
    if (strcmp(property, "IconThemePath") == 0) return g_variant_new_strv(NULL, 0);
    return NULL;
}

static GVariant *tooltip(const lanyard_status_notifier *n) {
    GVariant *parts[4] = {g_variant_new_string(n->look.icon_name), g_variant_new_array((const GVariantType *)"(iiay)", NULL, 0),
                          g_variant_new_string(n->look.tooltip_title), g_variant_new_string(n->look.tooltip_body)};
    return g_variant_new_tuple(parts, 4);
}

static GVariant *item_property(GDBusConnection *connection, const gchar *sender, const gchar *path,
                               const gchar *interface, const gchar *property, GError **error, gpointer data) {
    (void)connection, (void)sender, (void)path, (void)interface, (void)error;
    lanyard_status_notifier *n = data;
    if (strcmp(property, "Category") == 0) return g_variant_new_string("ApplicationStatus");
    if (strcmp(property, "Id") == 0) return g_variant_new_string(n->item_id);
    if (strcmp(property, "Title") == 0) return g_variant_new_string(n->look.title);
    if (strcmp(property, "Status") == 0) return g_variant_new_string(n->look.status);
    if (strcmp(property, "WindowId") == 0) return g_variant_new_int32(0);
    if (strcmp(property, "IconName") == 0) return g_variant_new_string(n->look.icon_name);
    if (strcmp(property, "IconPixmap") == 0)
        return n->look.pixmaps ? g_variant_ref(n->look.pixmaps) : g_variant_new_array((const GVariantType *)"(iiay)", NULL, 0);
    if (strcmp(property, "IconThemePath") == 0 || strcmp(property, "OverlayIconName") == 0
        || strcmp(property, "AttentionIconName") == 0)
        return g_variant_new_string("");
    if (strcmp(property, "ToolTip") == 0) return tooltip(n);
    if (strcmp(property, "XAyatanaLabel") == 0) return g_variant_new_string(n->look.label);
    if (strcmp(property, "XAyatanaLabelGuide") == 0) return g_variant_new_string(n->look.label_guide);
    if (strcmp(property, "ItemIsMenu") == 0) return g_variant_new_boolean(TRUE);
    if (strcmp(property, "Menu") == 0) return g_variant_new_object_path(MENU_PATH);
    return NULL;
}

static void item_method(GDBusConnection *connection, const gchar *sender, const gchar *path, const gchar *interface,
                        const gchar *method, GVariant *parameters, GDBusMethodInvocation *invocation, gpointer data) {
    (void)connection, (void)sender, (void)path, (void)interface, (void)method, (void)parameters, (void)data;
    // Activate, SecondaryActivate, ContextMenu and Scroll: every action is in the menu (ItemIsMenu),
    // since some hosts never forward clicks.
    g_dbus_method_invocation_return_value(invocation, NULL);
}

static const GDBusInterfaceVTable menu_vtable = {menu_method, menu_property, NULL, {0}};
static const GDBusInterfaceVTable item_vtable = {item_method, item_property, NULL, {0}};

static void emit(lanyard_status_notifier *n, const char *path, const char *interface, const char *signal, GVariant *parameters) {
    g_dbus_connection_emit_signal(n->connection, NULL, path, interface, signal, parameters, NULL);
}

static void register_item(lanyard_status_notifier *n);

static gboolean retry_registration(gpointer data) {
    register_item(data);
    return G_SOURCE_REMOVE;
}

static void registered(GObject *source, GAsyncResult *result, gpointer data) {
    lanyard_status_notifier *n = data;
    GError *error = NULL;
    GVariant *reply = g_dbus_connection_call_finish((GDBusConnection *)source, result, &error);
    if (reply) {
        g_variant_unref(reply);
        trace("registration %d accepted by %s", n->attempts, n->watcher_owner ? n->watcher_owner : "(a watcher gone since)");
        if (n->on_registered) n->on_registered(n->callback_context);
        return;
    }
    trace("registration %d refused: %s", n->attempts, error->message);
    // A watcher that has just started may answer before its object exists, and on a busy machine
    // it may take long to: try again 100 ms, 200 ms, … later, then every 6.4 s, for as long as the
    // same watcher runs (giving up would leave the item unshown until the watcher restarts). Said
    // once, after the eighth refusal (about 25 s).
    if (n->watcher_owner) {
        if (n->attempts == 8) fprintf(stderr, "lanyard: the StatusNotifierWatcher refused the item: %s (still trying)\n", error->message);
        GSource *timer = g_timeout_source_new(100u << (n->attempts < 6 ? n->attempts : 6));
        g_source_set_callback(timer, retry_registration, n, NULL);
        g_source_attach(timer, n->main.context);
        g_source_unref(timer);
    }
    g_error_free(error);
}

static void register_item(lanyard_status_notifier *n) {
    if (!n->watcher_owner) return;  // it went away; the next one starts over
    n->attempts++;
    trace("registration %d sent to %s", n->attempts, n->watcher_owner);
    GVariant *argument = g_variant_new_string(n->bus_name);
    g_dbus_connection_call(n->connection, n->watcher_owner, "/StatusNotifierWatcher", WATCHER_NAME,
                           "RegisterStatusNotifierItem", tuple1(argument), NULL, G_DBUS_CALL_FLAGS_NONE, 5000, NULL,
                           registered, n);
}

static void watcher_appeared(GDBusConnection *connection, const gchar *name, const gchar *owner, gpointer data) {
    (void)connection, (void)name;
    lanyard_status_notifier *n = data;
    g_free(n->watcher_owner);
    n->watcher_owner = g_strdup(owner);
    n->attempts = 0;
    trace("watcher appeared: %s", owner);
    register_item(n);
}

static void watcher_vanished(GDBusConnection *connection, const gchar *name, gpointer data) {
    (void)connection, (void)name;
    lanyard_status_notifier *n = data;
    trace("watcher vanished");
    g_free(n->watcher_owner);  // waits for the next watcher (watcher_appeared)
    n->watcher_owner = NULL;
}

static void name_acquired(GDBusConnection *connection, const gchar *name, gpointer data) {
    (void)connection, (void)data;
    trace("owns %s", name);
}

static void name_lost(GDBusConnection *connection, const gchar *name, gpointer data) {
    (void)connection, (void)data;
    trace("does not own %s", name);
}

static void apply_update(gpointer data) {
    pending_update *update = data;
    lanyard_status_notifier *n = update->notifier;
    free_entries(n->entries, n->entry_count);
    free_look(&n->look);
    n->entries = update->entries;
    n->entry_count = update->entry_count;
    n->look = update->look;
    update->entries = NULL;
    update->entry_count = 0;
    memset(&update->look, 0, sizeof update->look);
    uint32_t revision = __atomic_add_fetch(&n->revision, 1, __ATOMIC_SEQ_CST);
    if (revision == 1) trace("first menu published");
    GVariant *layout[2] = {g_variant_new_uint32(revision), g_variant_new_int32(0)};
    emit(n, MENU_PATH, MENU_INTERFACE, "LayoutUpdated", g_variant_new_tuple(layout, 2));
    emit(n, ITEM_PATH, ITEM_INTERFACE, "NewIcon", NULL);
    emit(n, ITEM_PATH, ITEM_INTERFACE, "NewToolTip", NULL);
    emit(n, ITEM_PATH, ITEM_INTERFACE, "NewTitle", NULL);
    emit(n, ITEM_PATH, ITEM_INTERFACE, "NewStatus", tuple1(g_variant_new_string(n->look.status)));
    GVariant *label[2] = {g_variant_new_string(n->look.label), g_variant_new_string(n->look.label_guide)};
    emit(n, ITEM_PATH, ITEM_INTERFACE, "XAyatanaNewLabel", g_variant_new_tuple(label, 2));
}

static gboolean apply_update_source(gpointer data) {
    apply_update(data);
    return G_SOURCE_REMOVE;
}

static void free_update(gpointer data) {
    pending_update *update = data;
    free_entries(update->entries, update->entry_count);
    free_look(&update->look);
    g_free(update);
}

lanyard_status_notifier *lanyard_status_notifier_start(const char *bus_name, const char *item_id,
                                                       lanyard_menu_event_fn on_event,
                                                       lanyard_registered_fn on_registered, void *context,
                                                       char *error_text, int error_size) {
    trace("starting: %s", bus_name);
    GDBusConnection *connection = session_bus(error_text, error_size);
    if (!connection) return NULL;
    trace("connected to the session bus as %s", g_dbus_connection_get_unique_name(connection));
    GError *error = NULL;
    GDBusNodeInfo *node = g_dbus_node_info_new_for_xml(introspection_xml, &error);
    if (!node) {  // the XML above is fixed: only a broken GLib gets here
        snprintf(error_text, error_size, "%s", error->message);
        g_error_free(error);
        g_object_unref(connection);
        return NULL;
    }
    lanyard_status_notifier *n = g_malloc0(sizeof *n);
    n->connection = connection;
    n->node = node;
    n->bus_name = copy(bus_name);
    n->item_id = copy(item_id);
    n->on_event = on_event;
    n->on_registered = on_registered;
    n->callback_context = context;
    n->look = (item_look){copy("Passive"), copy(""), copy("Lanyard"), copy("Lanyard"), copy(""), copy(""), copy(""), NULL};
    loop_thread_init(&n->main);
    // Callbacks go to the thread-default context of the moment they are set up: the loop's.
    g_main_context_push_thread_default(n->main.context);
    n->item_registration = g_dbus_connection_register_object(
        connection, ITEM_PATH, g_dbus_node_info_lookup_interface(node, ITEM_INTERFACE), &item_vtable, n, NULL, &error);
    if (n->item_registration)
        n->menu_registration = g_dbus_connection_register_object(
            connection, MENU_PATH, g_dbus_node_info_lookup_interface(node, MENU_INTERFACE), &menu_vtable, n, NULL, &error);
    if (!n->item_registration || !n->menu_registration) {
        snprintf(error_text, error_size, "%s", error->message);
        g_error_free(error);
        g_main_context_pop_thread_default(n->main.context);
        if (n->item_registration) g_dbus_connection_unregister_object(connection, n->item_registration);
        n->item_registration = n->menu_registration = 0;
        loop_thread_free(&n->main);
        g_dbus_node_info_unref(node);
        g_object_unref(connection);
        free_look(&n->look);
        g_free(n->bus_name);
        g_free(n->item_id);
        g_free(n);
        return NULL;
    }
    n->own_id = g_bus_own_name_on_connection(connection, bus_name, G_BUS_NAME_OWNER_FLAGS_NONE, name_acquired, name_lost, NULL, NULL);
    n->watch_id = g_bus_watch_name_on_connection(connection, WATCHER_NAME, G_BUS_NAME_WATCHER_FLAGS_NONE,
                                                 watcher_appeared, watcher_vanished, n, NULL);
    g_main_context_pop_thread_default(n->main.context);
    loop_thread_start(&n->main);
    trace("objects exported, watching for %s", WATCHER_NAME);
    return n;
}

// The look's pixmaps as IconPixmap's a(iiay), built on the caller's thread (GVariant is immutable
// and thread-safe once sunk).
static GVariant *pixmaps(const lanyard_item_look *look) {
    int count = look->pixmap_count > 0 && look->pixmaps ? look->pixmap_count : 0;
    GVariant **sizes = g_malloc0(sizeof(GVariant *) * (count > 0 ? count : 1));
    for (int i = 0; i < count; i++) {
        const lanyard_pixmap *p = &look->pixmaps[i];
        gsize bytes = p->width > 0 && p->height > 0 ? (gsize)p->width * (gsize)p->height * 4 : 0;
        GVariant *parts[3] = {g_variant_new_int32(p->width), g_variant_new_int32(p->height),
                              g_variant_new_fixed_array((const GVariantType *)"y", p->argb, bytes, 1)};
        sizes[i] = g_variant_new_tuple(parts, 3);
    }
    GVariant *array = g_variant_ref_sink(g_variant_new_array((const GVariantType *)"(iiay)", sizes, (gsize)count));
    g_free(sizes);
    return array;
}

void lanyard_status_notifier_update(lanyard_status_notifier *n, const lanyard_menu_item *items, int count,
                                    const lanyard_item_look *look) {
    pending_update *update = g_malloc0(sizeof *update);
    update->notifier = n;
    update->entries = g_malloc0(sizeof(menu_entry) * (count > 0 ? count : 1));
    update->entry_count = count;
    for (int i = 0; i < count; i++) {
        update->entries[i] = (menu_entry){items[i].id, items[i].parent, items[i].toggle_state, items[i].enabled,
                                          copy(items[i].label), copy_or_null(items[i].toggle_type), copy_or_null(items[i].type),
                                          copy_bytes(items[i].icon_png, items[i].icon_png_size),
                                          items[i].icon_png && items[i].icon_png_size > 0 ? items[i].icon_png_size : 0};
    }
    update->look = (item_look){copy(look->status), copy(look->icon_name), copy(look->title), copy(look->tooltip_title),
                               copy(look->tooltip_body), copy(look->label), copy(look->label_guide), pixmaps(look)};
    g_main_context_invoke_full(n->main.context, G_PRIORITY_DEFAULT, apply_update_source, update, free_update);
}

uint32_t lanyard_status_notifier_revision(lanyard_status_notifier *n) {
    return __atomic_load_n(&n->revision, __ATOMIC_SEQ_CST);
}

void lanyard_status_notifier_stop(lanyard_status_notifier *n) {
    loop_thread_join(&n->main);
    g_bus_unwatch_name(n->watch_id);
    g_bus_unown_name(n->own_id);
    g_dbus_connection_unregister_object(n->connection, n->item_registration);
    g_dbus_connection_unregister_object(n->connection, n->menu_registration);
    g_dbus_connection_flush_sync(n->connection, NULL, NULL);
    loop_thread_free(&n->main);
    g_dbus_node_info_unref(n->node);
    g_object_unref(n->connection);
    free_entries(n->entries, n->entry_count);
    free_look(&n->look);
    g_free(n->watcher_owner);
    g_free(n->bus_name);
    g_free(n->item_id);
    g_free(n);
}
