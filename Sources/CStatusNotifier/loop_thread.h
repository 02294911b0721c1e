#ifndef LANYARD_LOOP_THREAD_H
#define LANYARD_LOOP_THREAD_H

// What the tray item and the notifications share: a GLib main loop with a context of its own, run
// on a thread of its own, and the session bus. Each serves its D-Bus callbacks from its own loop,
// so no caller ever waits for the bus. Internal to CStatusNotifier (not under include/).

#include <gio/gio.h>
#include <pthread.h>

typedef struct {
    GMainContext *context;
    GMainLoop *loop;
    pthread_t thread;
} loop_thread;

/// Makes the context and its loop; callbacks set up between push and pop of `context` as the
/// thread default go to it.
void loop_thread_init(loop_thread *t);
/// Starts the thread that runs the loop.
void loop_thread_start(loop_thread *t);
/// Quits the loop and joins its thread (never from that thread).
void loop_thread_join(loop_thread *t);
/// Frees the loop and the context (after loop_thread_join, or instead of ever starting).
void loop_thread_free(loop_thread *t);

/// GIO's shared connection to the session bus, which does not end the process when the bus goes
/// away; NULL with GIO's message in `error_text` (size `error_size`) when it cannot be reached.
GDBusConnection *session_bus(char *error_text, int error_size);

#endif
