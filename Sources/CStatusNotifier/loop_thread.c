#include "loop_thread.h"

#include <stdio.h>

void loop_thread_init(loop_thread *t) {
    t->context = g_main_context_new();
    t->loop = g_main_loop_new(t->context, FALSE);
}

static void *run(void *data) {
    loop_thread *t = data;
    g_main_context_push_thread_default(t->context);
    g_main_loop_run(t->loop);
    g_main_context_pop_thread_default(t->context);
    return NULL;
}

void loop_thread_start(loop_thread *t) { pthread_create(&t->thread, NULL, run, t); }

static gboolean quit(gpointer data) {
    g_main_loop_quit(((loop_thread *)data)->loop);
    return G_SOURCE_REMOVE;
}

void loop_thread_join(loop_thread *t) {
    g_main_context_invoke(t->context, quit, t);
    pthread_join(t->thread, NULL);
}

GDBusConnection *session_bus(char *error_text, int error_size) {
    GError *error = NULL;
    GDBusConnection *connection = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
    if (!connection) {
        snprintf(error_text, error_size, "%s", error->message);
        g_error_free(error);
        return NULL;
    }
    g_dbus_connection_set_exit_on_close(connection, FALSE);
    return connection;
}

void loop_thread_free(loop_thread *t) {
    if (t->loop) g_main_loop_unref(t->loop);
    if (t->context) g_main_context_unref(t->context);
    t->loop = NULL;
    t->context = NULL;
}
