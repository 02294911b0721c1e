#ifndef LANYARD_DESKTOP_NOTIFICATIONS_H
#define LANYARD_DESKTOP_NOTIFICATIONS_H

// Desktop notifications with actions (org.freedesktop.Notifications: Notify, ActionInvoked,
// NotificationClosed) on GDBus, served by a GLib main loop on a thread of its own, so answers and
// signals arrive without anyone blocking. No GLib type crosses this header:
// LanyardDesktop's Bus/DesktopNotifications.swift is its one caller (and through it the agent's
// notifications: Lanyard's one Notify).

#include <stdint.h>

typedef struct lanyard_notifications lanyard_notifications;

/// Called on the loop's thread with Notify's answer for the request `token`: the notification's id
/// (`error` NULL), or 0 and why not.
typedef void (*lanyard_notify_reply_fn)(void *context, uint64_t token, uint32_t id, const char *error);
/// Called on the loop's thread for a signal about a notification this object sent (others are
/// ignored): ActionInvoked (`action` its key) or NotificationClosed (`action` NULL, `reason` the
/// server's reason code).
typedef void (*lanyard_notification_signal_fn)(void *context, uint32_t id, const char *action, uint32_t reason);

/// Connects to the session bus and listens for the two signals. Returns NULL with a message in
/// `error` (size `error_size`) when the bus cannot be reached.
lanyard_notifications *lanyard_notifications_start(lanyard_notify_reply_fn on_reply, lanyard_notification_signal_fn on_signal,
                                                   void *context, char *error, int error_size);

/// An image sent with a notification (the `image-data` hint): `width` × `height` pixels of 8-bit
/// RGBA, row by row, no padding.
typedef struct {
    int32_t width;
    int32_t height;
    const uint8_t *rgba;
} lanyard_notification_image;

/// Sends Notify (copied; thread-safe): `actions` holds `action_count` strings, key and label
/// alternating; `image` (or NULL) goes in the `image-data` hint. The answer comes to `on_reply`
/// with `token`.
void lanyard_notifications_send(lanyard_notifications *notifications, uint64_t token, const char *app_name, const char *icon,
                                const char *summary, const char *body, const char *const *actions, int action_count,
                                const lanyard_notification_image *image, uint8_t urgency, int32_t timeout_ms);

/// Stops the loop and frees everything; no callback runs after it returns. Not from the loop's thread.
void lanyard_notifications_stop(lanyard_notifications *notifications);

#endif
