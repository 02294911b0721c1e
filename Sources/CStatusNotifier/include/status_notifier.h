#ifndef LANYARD_STATUS_NOTIFIER_H
#define LANYARD_STATUS_NOTIFIER_H

// A StatusNotifierItem (org.kde.StatusNotifierItem at /StatusNotifierItem) with its menu exported
// over com.canonical.dbusmenu at /MenuBar, on GDBus, served by a GLib main loop on a thread of its
// own. No GLib type crosses this header: LanyardDesktop's Bus/StatusNotifier.swift is its one caller.

#include <stdint.h>

/// One menu entry. `parent` is 0 for the top level; ids are unique and positive.
typedef struct {
    int32_t id;
    int32_t parent;
    const char *label;
    /// "radio", "checkmark" or NULL.
    const char *toggle_type;
    /// 1 checked, 0 not, -1 none.
    int32_t toggle_state;
    int32_t enabled;
    /// "separator" or NULL (a standard item).
    const char *type;
    /// A PNG shown beside the label (dbusmenu's icon-data), or NULL.
    const uint8_t *icon_png;
    int32_t icon_png_size;
} lanyard_menu_item;

/// One size of the icon as pixels: `width` × `height` ARGB32 values, each in network byte order
/// (the StatusNotifierItem IconPixmap format), row by row.
typedef struct {
    int32_t width;
    int32_t height;
    const uint8_t *argb;
} lanyard_pixmap;

/// What the item shows: Status ("Active", "Passive", "NeedsAttention"), the themed icon name
/// (empty: none, so hosts draw the pixels), the icon as pixels, the title, the tooltip's title and
/// body, and a label beside the icon with the widest text it takes (Ayatana's XAyatanaLabel and
/// XAyatanaLabelGuide; empty: none).
typedef struct {
    const char *status;
    const char *icon_name;
    const lanyard_pixmap *pixmaps;
    int32_t pixmap_count;
    const char *title;
    const char *tooltip_title;
    const char *tooltip_body;
    const char *label;
    const char *label_guide;
} lanyard_item_look;

typedef struct lanyard_status_notifier lanyard_status_notifier;

/// Called on the main loop's thread: a menu entry was activated ("clicked"), or the menu is about
/// to be shown (id -1, event "opened").
typedef void (*lanyard_menu_event_fn)(void *context, int32_t id, const char *event_id);
/// Called on the main loop's thread each time the watcher accepted the item (after each start of
/// a watcher).
typedef void (*lanyard_registered_fn)(void *context);

/// Connects to the session bus, exports both objects, owns `bus_name` and registers with every
/// org.kde.StatusNotifierWatcher that appears. Returns NULL with a message in `error` (size
/// `error_size`) when the bus cannot be reached.
lanyard_status_notifier *lanyard_status_notifier_start(const char *bus_name, const char *item_id,
                                                       lanyard_menu_event_fn on_event,
                                                       lanyard_registered_fn on_registered, void *context,
                                                       char *error, int error_size);

/// Replaces the menu and the look (copied), bumps the layout revision and emits LayoutUpdated,
/// NewIcon, NewToolTip, NewStatus and XAyatanaNewLabel. Thread-safe.
void lanyard_status_notifier_update(lanyard_status_notifier *notifier, const lanyard_menu_item *items, int count,
                                    const lanyard_item_look *look);

/// The layout revision last published (from any thread).
uint32_t lanyard_status_notifier_revision(lanyard_status_notifier *notifier);

/// Stops the main loop, releases the name and frees everything. Not from the loop's thread.
void lanyard_status_notifier_stop(lanyard_status_notifier *notifier);

#endif
