// A blocking WebSocket client over libwebsockets, for LanyardNetwork's streaming transport.
//
// libwebsockets is opened with dlopen on first use (CLazyLoading's scheme, as every C library): the
// binaries link none of it, so only a process that streams over WebSocket pays for loading it and
// OpenSSL. Each handle owns one lws context with one client connection, driven by the calling
// thread; lws_cancel_service wakes that thread from any other.
#include "lanyard_websocket.h"
#include "lanyard_lazy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libwebsockets.h>

#define LWS_FUNCTIONS(X) \
    X(lws_create_context) X(lws_context_destroy) X(lws_client_connect_via_info) X(lws_service) \
    X(lws_cancel_service) X(lws_callback_on_writable) X(lws_write) X(lws_is_final_fragment) \
    X(lws_frame_is_binary) X(lws_remaining_packet_payload) X(lws_add_http_header_by_name) \
    X(lws_http_client_http_response) X(lws_set_log_level) X(lws_sul_schedule) X(lws_sul_cancel) \
    X(lws_get_context) X(lws_context_user) X(lws_close_reason) X(lws_callback_http_dummy)

LWS_FUNCTIONS(LAZY_NAMED_POINTER)
static const lazy_symbol lws_symbols[] = {LWS_FUNCTIONS(LAZY_NAMED_ENTRY)};
static const lazy_object lws_objects[] = {
    {"libwebsockets.so.17", "libwebsockets17", lws_symbols, LAZY_COUNT(lws_symbols), 0},
};

static int open_lws(char *error, size_t error_size) {
    if (!lazy_open_objects(lws_objects, LAZY_COUNT(lws_objects), error, error_size)) return 0;
    real_lws_set_log_level(0, NULL);  // errors come back as values; lws would print to stderr
    return 1;
}

LAZY_LOADER(ws, open_lws)

typedef struct message {
    unsigned char *bytes;
    size_t length;
    int binary;
    struct message *next;
} message;

struct lanyard_ws {
    pthread_mutex_t lock;  // guards context against lanyard_ws_cancel from another thread
    struct lws_context *context;
    struct lws *wsi;
    atomic_int cancelled;

    const lanyard_ws_options *options;  // during lanyard_ws_connect only
    int established, failed, gone, peer_closed, close_code, http_status, too_large, want_close;
    char error[256];

    unsigned char *partial;  // the message being received
    size_t partial_length, partial_capacity;
    int partial_binary;
    size_t max_message_bytes;
    message *head, *tail;   // whole messages not yet handed out
    message *handed_out;    // freed on the next call

    unsigned char *out;     // LWS_PRE bytes of headroom, then the text being sent
    size_t out_length;
    int out_pending;

    lws_sorted_usec_list_t timer;
    int timed_out;
};

static void drop_handed_out(lanyard_ws *ws) {
    if (ws->handed_out) {
        free(ws->handed_out->bytes);
        free(ws->handed_out);
        ws->handed_out = NULL;
    }
}

static int append_partial(lanyard_ws *ws, const void *in, size_t len) {
    if (ws->partial_length + len > ws->max_message_bytes) return -1;
    if (ws->partial_length + len > ws->partial_capacity) {
        size_t capacity = ws->partial_capacity ? ws->partial_capacity : 4096;
        while (capacity < ws->partial_length + len) capacity *= 2;
        unsigned char *grown = realloc(ws->partial, capacity);
        if (!grown) return -1;
        ws->partial = grown;
        ws->partial_capacity = capacity;
    }
    if (len) memcpy(ws->partial + ws->partial_length, in, len);
    ws->partial_length += len;
    return 0;
}

static void finish_message(lanyard_ws *ws) {
    message *m = calloc(1, sizeof *m);
    if (!m) return;
    m->bytes = ws->partial;  // handed over; a new buffer is grown for the next message
    m->length = ws->partial_length;
    m->binary = ws->partial_binary;
    ws->partial = NULL;
    ws->partial_length = ws->partial_capacity = 0;
    if (ws->tail) ws->tail->next = m; else ws->head = m;
    ws->tail = m;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
    lanyard_ws *ws = real_lws_context_user(real_lws_get_context(wsi));
    if (!ws) return 0;
    switch (reason) {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
        unsigned char **p = (unsigned char **)in, *end = *p + len;
        const lanyard_ws_options *o = ws->options;
        for (int i = 0; o && i < o->header_count; i++) {
            char name[128];
            snprintf(name, sizeof name, "%s:", o->header_names[i]);
            const char *value = o->header_values[i];
            if (real_lws_add_http_header_by_name(wsi, (const unsigned char *)name, (const unsigned char *)value,
                                              (int)strlen(value), p, end)) {
                snprintf(ws->error, sizeof ws->error, "the handshake headers do not fit");
                return -1;
            }
        }
        return 0;
    }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        ws->failed = 1;
        ws->http_status = real_lws_http_client_http_response(wsi);
        snprintf(ws->error, sizeof ws->error, "%s", in ? (const char *)in : "connection failed");
        ws->wsi = NULL;
        return 0;
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        ws->established = 1;
        ws->http_status = 101;
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        if (ws->partial_length == 0) ws->partial_binary = real_lws_frame_is_binary(wsi);
        if (append_partial(ws, in, len)) {
            ws->too_large = 1;
            return -1;
        }
        if (real_lws_is_final_fragment(wsi) && !real_lws_remaining_packet_payload(wsi)) finish_message(ws);
        return 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        ws->peer_closed = 1;
        if (len >= 2) ws->close_code = (((unsigned char *)in)[0] << 8) | ((unsigned char *)in)[1];
        return 0;
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        if (ws->want_close) {
            real_lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
            return -1;
        }
        if (ws->out_pending) {
            int n = real_lws_write(wsi, ws->out + LWS_PRE, ws->out_length, LWS_WRITE_TEXT);
            ws->out_pending = 0;
            if (n < (int)ws->out_length) {
                snprintf(ws->error, sizeof ws->error, "writing the request failed");
                return -1;
            }
        }
        return 0;
    case LWS_CALLBACK_CLIENT_CLOSED:
        ws->gone = 1;
        ws->wsi = NULL;
        return 0;
    default:
        return real_lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

static const struct lws_protocols protocols[] = {
    {"lanyard-stream", callback, 0, 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

static void timer_fired(lws_sorted_usec_list_t *sul) {
    lanyard_ws *ws = (lanyard_ws *)((char *)sul - offsetof(lanyard_ws, timer));
    ws->timed_out = 1;
}

/// Services the connection until `done` says so, the timer fires or the handle is cancelled.
static lanyard_ws_result service_until(lanyard_ws *ws, int timeout_ms, int (*done)(lanyard_ws *)) {
    ws->timed_out = 0;
    if (timeout_ms > 0) real_lws_sul_schedule(ws->context, 0, &ws->timer, timer_fired, (lws_usec_t)timeout_ms * 1000);
    lanyard_ws_result result = LANYARD_WS_OK;
    for (;;) {
        if (done(ws)) break;
        if (atomic_load(&ws->cancelled)) { result = LANYARD_WS_CANCELLED; break; }
        if (ws->timed_out) { result = LANYARD_WS_TIMED_OUT; break; }
        if (real_lws_service(ws->context, 0) < 0) {
            snprintf(ws->error, sizeof ws->error, "the connection's event loop failed");
            result = LANYARD_WS_FAILED;
            break;
        }
    }
    if (timeout_ms > 0) real_lws_sul_cancel(&ws->timer);
    return result;
}

lanyard_ws *lanyard_ws_new(void) {
    lanyard_ws *ws = calloc(1, sizeof *ws);
    if (ws) pthread_mutex_init(&ws->lock, NULL);
    return ws;
}

static int connect_done(lanyard_ws *ws) { return ws->established || ws->failed || ws->gone; }

lanyard_ws_result lanyard_ws_connect(lanyard_ws *ws, const lanyard_ws_options *options) {
    const char *why;
    if (!lanyard_ws_load(&why)) {
        snprintf(ws->error, sizeof ws->error, "%s", why);
        return LANYARD_WS_UNAVAILABLE;
    }
    if (atomic_load(&ws->cancelled)) return LANYARD_WS_CANCELLED;
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = protocols;
    info.options = options->tls ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0;
    info.client_ssl_ca_filepath = options->ca_file;
    info.user = ws;
    info.fd_limit_per_thread = 8;       // one connection and the cancel pipe; not a table sized by ulimit
    info.pt_serv_buf_size = 32 * 1024;  // room for a bearer token in the handshake headers
    info.connect_timeout_secs = options->timeout_ms > 0 ? (unsigned)(options->timeout_ms + 999) / 1000 : 30;

    pthread_mutex_lock(&ws->lock);
    ws->context = real_lws_create_context(&info);
    pthread_mutex_unlock(&ws->lock);
    if (!ws->context) {
        snprintf(ws->error, sizeof ws->error, "libwebsockets could not create a client context%s",
                 options->tls ? " (TLS set-up failed)" : "");
        return LANYARD_WS_FAILED;
    }
    ws->max_message_bytes = options->max_message_bytes;
    ws->options = options;

    char host_header[300];
    int default_port = options->tls ? 443 : 80;
    if (options->port == default_port) snprintf(host_header, sizeof host_header, "%s", options->host);
    else snprintf(host_header, sizeof host_header, "%s:%d", options->host, options->port);

    struct lws_client_connect_info connect;
    memset(&connect, 0, sizeof connect);
    connect.context = ws->context;
    connect.address = options->host;
    connect.port = options->port;
    connect.path = options->path;
    connect.host = host_header;
    connect.origin = host_header;
    connect.ssl_connection = options->tls ? LCCSCF_USE_SSL : 0;
    connect.local_protocol_name = "lanyard-stream";
    connect.pwsi = &ws->wsi;
    if (!real_lws_client_connect_via_info(&connect) && !ws->failed) {
        ws->options = NULL;
        snprintf(ws->error, sizeof ws->error, "cannot start a connection to %s", host_header);
        return LANYARD_WS_FAILED;
    }
    lanyard_ws_result result = service_until(ws, options->timeout_ms, connect_done);
    ws->options = NULL;
    if (result != LANYARD_WS_OK) return result;
    if (ws->established) return LANYARD_WS_OK;
    if (ws->http_status && ws->http_status != 101) return LANYARD_WS_REFUSED;
    return LANYARD_WS_FAILED;
}

static int send_done(lanyard_ws *ws) { return !ws->out_pending || ws->gone; }

lanyard_ws_result lanyard_ws_send_text(lanyard_ws *ws, const char *text, size_t length, int timeout_ms) {
    if (atomic_load(&ws->cancelled)) return LANYARD_WS_CANCELLED;
    if (!ws->wsi || ws->gone) return LANYARD_WS_DROPPED;
    free(ws->out);
    ws->out = malloc(LWS_PRE + length + 1);
    if (!ws->out) return LANYARD_WS_FAILED;
    memcpy(ws->out + LWS_PRE, text, length);
    ws->out_length = length;
    ws->out_pending = 1;
    real_lws_callback_on_writable(ws->wsi);
    lanyard_ws_result result = service_until(ws, timeout_ms, send_done);
    if (result != LANYARD_WS_OK) return result;
    if (ws->out_pending) return ws->peer_closed ? LANYARD_WS_CLOSED : LANYARD_WS_DROPPED;
    return LANYARD_WS_OK;
}

static int receive_done(lanyard_ws *ws) { return ws->head || ws->gone || ws->too_large; }

lanyard_ws_result lanyard_ws_receive(lanyard_ws *ws, int timeout_ms, lanyard_ws_message *out) {
    drop_handed_out(ws);
    lanyard_ws_result result = LANYARD_WS_OK;
    if (!ws->head) {
        if (atomic_load(&ws->cancelled)) return LANYARD_WS_CANCELLED;
        result = service_until(ws, timeout_ms, receive_done);
    }
    if (ws->head) {  // whole messages are handed out even when the connection has ended since
        message *m = ws->head;
        ws->head = m->next;
        if (!ws->head) ws->tail = NULL;
        ws->handed_out = m;
        out->bytes = m->bytes ? m->bytes : (const unsigned char *)"";
        out->length = m->length;
        out->binary = m->binary;
        return LANYARD_WS_OK;
    }
    if (result != LANYARD_WS_OK) return result;
    if (ws->too_large) return LANYARD_WS_TOO_LARGE;
    return ws->peer_closed ? LANYARD_WS_CLOSED : LANYARD_WS_DROPPED;
}

void lanyard_ws_cancel(lanyard_ws *ws) {
    pthread_mutex_lock(&ws->lock);
    atomic_store(&ws->cancelled, 1);
    if (ws->context) real_lws_cancel_service(ws->context);
    pthread_mutex_unlock(&ws->lock);
}

static int close_done(lanyard_ws *ws) { return ws->gone || !ws->wsi; }

void lanyard_ws_free(lanyard_ws *ws) {
    if (!ws) return;
    if (ws->context) {
        if (ws->wsi && ws->established && !ws->gone) {
            // Say goodbye with a close frame, briefly: destroying the context closes the socket anyway.
            ws->want_close = 1;
            atomic_store(&ws->cancelled, 0);
            real_lws_callback_on_writable(ws->wsi);
            service_until(ws, 50, close_done);
        }
        pthread_mutex_lock(&ws->lock);
        real_lws_context_destroy(ws->context);
        ws->context = NULL;
        pthread_mutex_unlock(&ws->lock);
    }
    drop_handed_out(ws);
    while (ws->head) {
        message *m = ws->head;
        ws->head = m->next;
        free(m->bytes);
        free(m);
    }
    free(ws->partial);
    free(ws->out);
    pthread_mutex_destroy(&ws->lock);
    free(ws);
}

int lanyard_ws_http_status(const lanyard_ws *ws) { return ws->http_status; }
int lanyard_ws_close_code(const lanyard_ws *ws) { return ws->close_code; }
const char *lanyard_ws_error(const lanyard_ws *ws) { return ws->error; }
