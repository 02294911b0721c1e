// One blocking HTTP request over libcurl, for LanyardFleet's etcd client (the v3 JSON gateway) and
// LanyardNetwork's provider transport.
//
// libcurl is opened with dlopen on first use (CLazyLoading's scheme, as every C library): the binaries link
// none of it, so only a process that talks to etcd or a provider pays for loading it and OpenSSL.
// Plain requests run on one easy handle per thread, reset between requests, which keeps its live
// connections and TLS sessions: a request to the same endpoint skips the TCP and TLS handshakes. A
// request with a cancel token (a watch, every provider request) runs on a handle of its own in a
// multi handle, so that firing the token wakes curl_multi_poll at once instead of at the next
// progress callback.
#define CURL_DISABLE_TYPECHECK  // curl_easy_setopt is called through a pointer, not the macro
#include "lanyard_curl.h"
#include "lanyard_lazy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

static pthread_key_t thread_handle;

#define CURL_FUNCTIONS(X)                                                                                    \
    X(curl_global_init) X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_reset) X(curl_easy_setopt)       \
    X(curl_easy_perform) X(curl_easy_getinfo) X(curl_easy_strerror) X(curl_slist_append)                     \
    X(curl_slist_free_all) X(curl_multi_init) X(curl_multi_cleanup) X(curl_multi_add_handle)                 \
    X(curl_multi_remove_handle) X(curl_multi_perform) X(curl_multi_poll) X(curl_multi_wakeup)                \
    X(curl_multi_info_read)

CURL_FUNCTIONS(LAZY_NAMED_POINTER)
static const lazy_symbol curl_symbols[] = {CURL_FUNCTIONS(LAZY_NAMED_ENTRY)};
// curl_multi_poll and curl_multi_wakeup need libcurl 7.68 or later.
static const lazy_object curl_objects[] = {{"libcurl.so.4", "libcurl4", curl_symbols, LAZY_COUNT(curl_symbols), 0}};

static void free_thread_handle(void *handle) {
    if (handle) real_curl_easy_cleanup(handle);
}

static int open_curl(char *error, size_t error_size) {
    if (!lazy_open_objects(curl_objects, LAZY_COUNT(curl_objects), error, error_size)) return 0;
    // Reference-counted inside libcurl, so FoundationNetworking's own call in the same process is fine.
    if (real_curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(error, error_size, "curl_global_init failed");
        return 0;
    }
    if (pthread_key_create(&thread_handle, free_thread_handle) != 0) {
        snprintf(error, error_size, "no thread-specific key for the curl handle");
        return 0;
    }
    return 1;
}

LAZY_LOADER(curl, open_curl)

struct lanyard_curl_cancel {
    atomic_int fired;
    pthread_mutex_t lock;  // guards multi against lanyard_curl_cancel_fire from another thread
    CURLM *multi;          // the transfer's multi handle while one runs
};

lanyard_curl_cancel *lanyard_curl_cancel_new(void) {
    lanyard_curl_cancel *cancel = calloc(1, sizeof *cancel);
    if (!cancel) return NULL;
    pthread_mutex_init(&cancel->lock, NULL);
    return cancel;
}

void lanyard_curl_cancel_fire(lanyard_curl_cancel *cancel) {
    atomic_store(&cancel->fired, 1);
    pthread_mutex_lock(&cancel->lock);
    if (cancel->multi) real_curl_multi_wakeup(cancel->multi);
    pthread_mutex_unlock(&cancel->lock);
}

int lanyard_curl_cancel_fired(const lanyard_curl_cancel *cancel) {
    return atomic_load(&((lanyard_curl_cancel *)cancel)->fired);
}

void lanyard_curl_cancel_free(lanyard_curl_cancel *cancel) {
    if (!cancel) return;
    pthread_mutex_destroy(&cancel->lock);
    free(cancel);
}

typedef struct {
    const lanyard_curl_request *request;
    int stopped;
} transfer;

static size_t write_body(char *bytes, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t length = size * count;
    if (!t->request->on_data((const unsigned char *)bytes, length, t->request->context)) {
        t->stopped = 1;
        return 0;  // curl ends the transfer with CURLE_WRITE_ERROR
    }
    return length;
}

static size_t write_header(char *bytes, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t length = size * count;
    if (!t->request->on_header((const unsigned char *)bytes, length, t->request->context)) {
        t->stopped = 1;
        return 0;  // curl ends the transfer with CURLE_WRITE_ERROR
    }
    return length;
}

static int progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    transfer *t = user;
    return t->request->cancel && lanyard_curl_cancel_fired(t->request->cancel);
}

static int is_tls_failure(CURLcode code, const char *error) {
    switch (code) {
    case CURLE_SSL_CONNECT_ERROR: case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER: case CURLE_SSL_CACERT_BADFILE: case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED: case CURLE_SSL_ENGINE_INITFAILED: case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR: case CURLE_SSL_PINNEDPUBKEYNOTMATCH: case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT: case CURLE_USE_SSL_FAILED:
        return 1;
    case CURLE_RECV_ERROR: case CURLE_SEND_ERROR:
        // With TLS 1.3 the server checks the client's certificate after the client's side of the
        // handshake is done, so a refusal arrives as an alert on the first read.
        return strstr(error, "alert") != NULL;
    default:
        return 0;
    }
}

// The method and body of a request that names its method.
static void configure_method(CURL *easy, const lanyard_curl_request *r) {
    const char *body = r->body_length ? (const char *)r->body : "";
    if (strcmp(r->method, "GET") == 0 && r->body_length == 0) {
        real_curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(r->method, "HEAD") == 0) {
        real_curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    } else {
        real_curl_easy_setopt(easy, CURLOPT_POST, 1L);
        real_curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_length);
        real_curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
        if (strcmp(r->method, "POST") != 0) real_curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, r->method);
    }
}

// Sets every option of a request on a fresh or reset handle.
static struct curl_slist *configure(CURL *easy, const lanyard_curl_request *r, transfer *t, char *error_buffer) {
    // A named method sends only the caller's headers; etcd's requests are JSON.
    struct curl_slist *headers = real_curl_slist_append(NULL, "Expect:");  // no 100-continue round trip
    if (headers && !r->method) headers = real_curl_slist_append(headers, "Content-Type: application/json");
    for (int i = 0; headers && i < r->header_count; i++) {
        struct curl_slist *grown = real_curl_slist_append(headers, r->headers[i]);
        if (!grown) { real_curl_slist_free_all(headers); return NULL; }
        headers = grown;
    }
    if (!headers) return NULL;
    real_curl_easy_setopt(easy, CURLOPT_URL, r->url);
    real_curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    real_curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    if (r->method) {
        configure_method(easy, r);
    } else {
        // etcd routes HTTP/2 with a gRPC content type to gRPC; HTTP/1.1 always reaches the gateway.
        real_curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        real_curl_easy_setopt(easy, CURLOPT_POST, 1L);
        real_curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_length);
        real_curl_easy_setopt(easy, CURLOPT_POSTFIELDS, r->body_length ? (const char *)r->body : "");
    }
    real_curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    real_curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, r->timeout_ms);
    real_curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, r->connect_timeout_ms);
    if (r->idle_timeout_s > 0) {
        real_curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
        real_curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, r->idle_timeout_s);
    }
    // A watch may stay silent for hours: keep-alive probes notice a peer that vanished.
    real_curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    real_curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, 15L);
    real_curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, 5L);
    if (r->ca_file) real_curl_easy_setopt(easy, CURLOPT_CAINFO, r->ca_file);
    if (r->cert_file) real_curl_easy_setopt(easy, CURLOPT_SSLCERT, r->cert_file);
    if (r->key_file) real_curl_easy_setopt(easy, CURLOPT_SSLKEY, r->key_file);
    real_curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_body);
    real_curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
    if (r->on_header) {
        real_curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, write_header);
        real_curl_easy_setopt(easy, CURLOPT_HEADERDATA, t);
    }
    real_curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    real_curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, progress);
    real_curl_easy_setopt(easy, CURLOPT_XFERINFODATA, t);
    real_curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error_buffer);
    return headers;
}

// Runs the transfer in a multi handle the cancel token can wake.
static CURLcode perform_cancellable(CURL *easy, lanyard_curl_cancel *cancel) {
    CURLM *multi = real_curl_multi_init();
    if (!multi) return CURLE_OUT_OF_MEMORY;
    if (real_curl_multi_add_handle(multi, easy) != CURLM_OK) {
        real_curl_multi_cleanup(multi);
        return CURLE_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&cancel->lock);
    cancel->multi = multi;
    pthread_mutex_unlock(&cancel->lock);

    CURLcode code = CURLE_OK;
    int running = 1;
    while (running) {
        if (lanyard_curl_cancel_fired(cancel)) { code = CURLE_ABORTED_BY_CALLBACK; break; }
        if (real_curl_multi_perform(multi, &running) != CURLM_OK) { code = CURLE_FAILED_INIT; break; }
        if (!running) {
            int left = 0;
            CURLMsg *message;
            while ((message = real_curl_multi_info_read(multi, &left)))
                if (message->msg == CURLMSG_DONE) code = message->data.result;
            break;
        }
        if (real_curl_multi_poll(multi, NULL, 0, 1000, NULL) != CURLM_OK) { code = CURLE_FAILED_INIT; break; }
    }

    pthread_mutex_lock(&cancel->lock);
    cancel->multi = NULL;
    pthread_mutex_unlock(&cancel->lock);
    real_curl_multi_remove_handle(multi, easy);
    real_curl_multi_cleanup(multi);
    return code;
}

lanyard_curl_result lanyard_curl_post(const lanyard_curl_request *r, lanyard_curl_outcome *outcome) {
    memset(outcome, 0, sizeof *outcome);
    const char *why;
    if (!lanyard_curl_load(&why)) {
        snprintf(outcome->error, sizeof outcome->error, "%s", why);
        return LANYARD_CURL_UNAVAILABLE;
    }
    if (r->cancel && lanyard_curl_cancel_fired(r->cancel)) return LANYARD_CURL_CANCELLED;

    CURL *easy;
    if (r->cancel) {
        easy = real_curl_easy_init();
    } else {
        easy = pthread_getspecific(thread_handle);
        if (easy) {
            real_curl_easy_reset(easy);  // keeps live connections and the TLS session cache
        } else if ((easy = real_curl_easy_init())) {
            pthread_setspecific(thread_handle, easy);
        }
    }
    if (!easy) {
        snprintf(outcome->error, sizeof outcome->error, "curl_easy_init failed");
        return LANYARD_CURL_UNAVAILABLE;
    }

    transfer t = {.request = r};
    char error_buffer[CURL_ERROR_SIZE] = "";
    struct curl_slist *headers = configure(easy, r, &t, error_buffer);
    CURLcode code;
    if (!headers) {
        code = CURLE_OUT_OF_MEMORY;
    } else if (r->cancel) {
        code = perform_cancellable(easy, r->cancel);
    } else {
        code = real_curl_easy_perform(easy);
    }

    long status = 0, request_size = 0;
    real_curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    real_curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &request_size);
    // The reused handle must not keep pointers into this call's stack.
    real_curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, NULL);
    real_curl_easy_setopt(easy, CURLOPT_HTTPHEADER, NULL);
    real_curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, NULL);
    if (r->cancel) real_curl_easy_cleanup(easy);
    if (headers) real_curl_slist_free_all(headers);

    outcome->http_status = status;
    outcome->request_sent = request_size > 0;
    outcome->curl_code = (int)code;
    snprintf(outcome->error, sizeof outcome->error, "%s",
             error_buffer[0] ? error_buffer : real_curl_easy_strerror(code));

    if (code == CURLE_OK) return LANYARD_CURL_OK;
    if (r->cancel && lanyard_curl_cancel_fired(r->cancel)) return LANYARD_CURL_CANCELLED;
    if (t.stopped) return LANYARD_CURL_STOPPED;
    if (is_tls_failure(code, outcome->error)) return LANYARD_CURL_TLS_FAILED;
    switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY: case CURLE_COULDNT_CONNECT:
        return LANYARD_CURL_CONNECT_FAILED;
    case CURLE_OPERATION_TIMEDOUT:
        // Out of time before a byte of the request left: the connection or TLS set-up hung.
        return outcome->request_sent ? LANYARD_CURL_TIMED_OUT : LANYARD_CURL_CONNECT_FAILED;
    default:
        return LANYARD_CURL_FAILED;
    }
}
