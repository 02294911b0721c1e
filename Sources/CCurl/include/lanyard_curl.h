// One blocking HTTP request over libcurl, which is loaded with dlopen on first use so that only
// processes that talk to etcd or a provider pay for it (like libwebsockets in CWebSocket). No curl
// type leaves curl.c. Plain requests reuse one curl handle per thread (its connections and TLS
// sessions); a request with a cancel token runs on a fresh handle that lanyard_curl_cancel_fire
// wakes at once.
#ifndef LANYARD_CURL_H
#define LANYARD_CURL_H

#include <stddef.h>

/// What a transfer ended with.
typedef enum {
    /// The server answered (its status is in the outcome; the body went to on_data).
    LANYARD_CURL_OK = 0,
    /// No connection: the name did not resolve, the connection was refused or the connect timeout
    /// ran out. The request was not sent.
    LANYARD_CURL_CONNECT_FAILED = 1,
    /// TLS failed: the server's certificate, the CA file, the client certificate or its key, or
    /// the server refused the client's certificate (a TLS alert). The request was not served.
    LANYARD_CURL_TLS_FAILED = 2,
    /// The total timeout ran out after the connection was made (the request may have been served).
    LANYARD_CURL_TIMED_OUT = 3,
    /// The cancel token fired.
    LANYARD_CURL_CANCELLED = 4,
    /// on_data or on_header returned 0.
    LANYARD_CURL_STOPPED = 5,
    /// Any other failure (the connection dropped, a protocol error); see request_sent.
    LANYARD_CURL_FAILED = 6,
    /// libcurl could not be loaded or a handle not made (the reason is in the outcome's error).
    LANYARD_CURL_UNAVAILABLE = 7,
} lanyard_curl_result;

/// Receives the answer's body in chunks as they arrive; returns 0 to stop the transfer.
typedef int (*lanyard_curl_data_fn)(const unsigned char *bytes, size_t length, void *context);

/// A flag that stops a transfer from any thread.
typedef struct lanyard_curl_cancel lanyard_curl_cancel;

typedef struct {
    const char *url;                    ///< http:// or https:// only
    const unsigned char *body;          ///< sent as is (with Content-Type: application/json when method is NULL)
    size_t body_length;
    const char *ca_file;                ///< NULL: the system's trust anchors
    const char *cert_file;              ///< NULL, or a PEM client certificate
    const char *key_file;               ///< NULL, or its PEM key (unencrypted)
    const char *const *headers;         ///< extra header lines, "Name: value"
    int header_count;
    long timeout_ms;                    ///< the whole transfer; 0: no limit (a watch)
    long connect_timeout_ms;            ///< TCP and TLS set-up
    lanyard_curl_data_fn on_data;       ///< required
    void *context;                      ///< handed to on_data
    lanyard_curl_cancel *cancel;        ///< NULL, or a token made by lanyard_curl_cancel_new
    /// NULL: a POST of `body` with Content-Type: application/json over HTTP/1.1 (etcd's gateway).
    /// Otherwise this method ("GET", "POST", "HEAD", or any other), with `headers` as the only
    /// extra headers and `body` when it is not empty. Redirects are never followed.
    const char *method;
    /// NULL, or receives each line of the answer's head as it arrives (status lines included,
    /// line ends kept); returns 0 to stop the transfer.
    lanyard_curl_data_fn on_header;
    /// 0, or the transfer fails as timed out once less than a byte a second has arrived for
    /// this many seconds.
    long idle_timeout_s;
} lanyard_curl_request;

typedef struct {
    long http_status;       ///< 0 when no answer arrived
    int request_sent;       ///< 1 when bytes of the request left this process
    int curl_code;          ///< curl's own code (CURLcode), for messages
    char error[256];        ///< curl's error text, or why libcurl could not be used
} lanyard_curl_outcome;

/// Loads libcurl (once per process). Returns 1, or 0 with *error (when error is not NULL) saying
/// why.
int lanyard_curl_load(const char **error);

/// Sends the request (a POST unless `method` says otherwise) and blocks until the answer ends,
/// fails, times out, is stopped or cancelled.
lanyard_curl_result lanyard_curl_post(const lanyard_curl_request *request, lanyard_curl_outcome *outcome);

/// A cancel token not yet fired; NULL only when memory runs out.
lanyard_curl_cancel *lanyard_curl_cancel_new(void);
/// Fires the token (from any thread): the transfer using it, and every later one, ends with
/// LANYARD_CURL_CANCELLED.
void lanyard_curl_cancel_fire(lanyard_curl_cancel *cancel);
int lanyard_curl_cancel_fired(const lanyard_curl_cancel *cancel);
/// Frees the token; no transfer may be using it.
void lanyard_curl_cancel_free(lanyard_curl_cancel *cancel);

#endif
