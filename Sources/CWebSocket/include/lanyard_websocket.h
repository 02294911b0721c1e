// A WebSocket client connection over libwebsockets, which is loaded with dlopen on first use so that
// only processes that stream pay for it. One connection per handle, driven by one thread at a time
// with blocking calls; lanyard_ws_cancel is the only call another thread may make.
#ifndef LANYARD_WEBSOCKET_H
#define LANYARD_WEBSOCKET_H

#include <stddef.h>

typedef struct lanyard_ws lanyard_ws;

/// What a blocking call ended with.
typedef enum {
    LANYARD_WS_OK = 0,
    /// The handshake got an HTTP answer other than 101 (its status is in lanyard_ws_http_status).
    LANYARD_WS_REFUSED = 1,
    /// TCP, TLS or protocol failure before or during the connection (message in lanyard_ws_error).
    LANYARD_WS_FAILED = 2,
    /// The peer closed the connection with a close frame (code in lanyard_ws_close_code).
    LANYARD_WS_CLOSED = 3,
    /// The connection ended without a close frame.
    LANYARD_WS_DROPPED = 4,
    LANYARD_WS_TIMED_OUT = 5,
    LANYARD_WS_CANCELLED = 6,
    /// A message grew past the size limit; the connection was closed.
    LANYARD_WS_TOO_LARGE = 7,
    /// libwebsockets could not be loaded (message in lanyard_ws_error).
    LANYARD_WS_UNAVAILABLE = 8,
} lanyard_ws_result;

typedef struct {
    const char *host;          ///< name or address to connect to
    int port;
    const char *path;          ///< path and query, starting with '/'
    int tls;                   ///< 1 for wss: TLS with the system's (or ca_file's) trust anchors
    const char *ca_file;       ///< NULL, or a PEM file of trusted certificates
    const char *const *header_names;   ///< extra handshake headers, e.g. "Authorization"
    const char *const *header_values;
    int header_count;
    size_t max_message_bytes;  ///< a longer message ends the connection with LANYARD_WS_TOO_LARGE
    int timeout_ms;            ///< for the handshake
} lanyard_ws_options;

/// A received message: bytes owned by the handle, valid until the next call on it.
typedef struct {
    const unsigned char *bytes;
    size_t length;
    int binary;
} lanyard_ws_message;

/// Loads libwebsockets (once per process). Returns 1, or 0 with *error (when error is not NULL)
/// saying why.
int lanyard_ws_load(const char **error);

/// A handle with no connection yet; NULL only when memory runs out.
lanyard_ws *lanyard_ws_new(void);
/// Connects and completes the WebSocket handshake, or fails, times out or is cancelled.
lanyard_ws_result lanyard_ws_connect(lanyard_ws *ws, const lanyard_ws_options *options);
/// Sends one text message and waits until it is written.
lanyard_ws_result lanyard_ws_send_text(lanyard_ws *ws, const char *text, size_t length, int timeout_ms);
/// Waits for the next whole message (fragments joined), up to timeout_ms.
lanyard_ws_result lanyard_ws_receive(lanyard_ws *ws, int timeout_ms, lanyard_ws_message *message);
/// Wakes the call in progress (from any thread), which returns LANYARD_WS_CANCELLED, as do all
/// later calls.
void lanyard_ws_cancel(lanyard_ws *ws);
/// Closes the connection (with a close frame when it is open) and frees the handle.
void lanyard_ws_free(lanyard_ws *ws);

int lanyard_ws_http_status(const lanyard_ws *ws);
int lanyard_ws_close_code(const lanyard_ws *ws);
const char *lanyard_ws_error(const lanyard_ws *ws);

#endif
