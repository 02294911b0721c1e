"""Shared plumbing for Lanyard's OAuth test servers (test fixtures only).

- FaultBook + FaultMiddleware: per-endpoint fault injection for the next N requests
  (HTTP status + body, non-JSON body, huge body, connection reset, delay, 429 + Retry-After).
- serve(): threaded WSGI server on 127.0.0.1, prints one ``READY http://HOST:PORT`` line on
  stdout once bound, logs to stderr, stops cleanly on SIGTERM/SIGINT.
- small helpers: JSON responses, JSON hook bodies, HS256 JWTs.

Nothing here talks to anything but loopback clients.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable

from joserfc import jwt as jose_jwt
from joserfc.jwk import OctKey
from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

log = logging.getLogger("oauth-fixture")

HUGE_DEFAULT_SIZE = 2 * 1024 * 1024  # "a 2 MB body": 2 MiB exactly

FAULT_TYPES = ("status", "non_json", "huge", "reset", "delay", "rate_limit", "trickle", "cut")


class HookError(Exception):
    """Raised by test-hook handlers for a bad request; becomes a JSON 4xx answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


class InjectedReset(ConnectionResetError):
    """Raised below Flask to make the server drop the connection without any response."""


# ---------------------------------------------------------------------------------------------
# JSON helpers


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def hook_body(request) -> dict:
    """The JSON object of a test-hook POST ({} when the body is empty)."""
    raw = request.get_data(cache=True)
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as e:
        raise HookError(f"body is not JSON: {e}")
    if not isinstance(body, dict):
        raise HookError("body must be a JSON object")
    return body


def want_number(body: dict, key: str, *, minimum: float = 0, integer: bool = False):
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HookError(f"'{key}' must be a number")
    if value < minimum:
        raise HookError(f"'{key}' must be >= {minimum}")
    if integer:
        if int(value) != value:
            raise HookError(f"'{key}' must be an integer")
        return int(value)
    return value


def want_str(body: dict, key: str, default: str | None = None) -> str | None:
    if key not in body or body[key] is None:
        return default
    value = body[key]
    if not isinstance(value, str):
        raise HookError(f"'{key}' must be a string")
    return value


def want_bool(body: dict, key: str, default: bool | None = None) -> bool | None:
    if key not in body or body[key] is None:
        return default
    value = body[key]
    if not isinstance(value, bool):
        raise HookError(f"'{key}' must be true or false")
    return value


# ---------------------------------------------------------------------------------------------
# JWT


class HS256Signer:
    """Signs JWTs with HS256 and a fixed, published key (clients only decode them)."""

    def __init__(self, secret: str):
        self.secret = secret
        self.key = OctKey.import_key(secret.encode("utf-8"))

    def encode(self, claims: dict) -> str:
        return jose_jwt.encode({"alg": "HS256"}, claims, self.key, algorithms=["HS256"])


def decode_jwt_claims_unverified(token: str) -> dict | None:
    """Payload of a compact JWS without checking the signature (None if malformed)."""
    import base64

    parts = token.split(".")
    if len(parts) != 3:
        return None
    seg = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        return json.loads(base64.urlsafe_b64decode(seg.encode("ascii")))
    except (ValueError, UnicodeError):
        return None


# ---------------------------------------------------------------------------------------------
# Fault injection


def validate_fault(body: dict, endpoints: tuple[str, ...]) -> tuple[str, dict, int]:
    """Checks a /_test/fault body; returns (endpoint, spec, count)."""
    endpoint = want_str(body, "endpoint")
    if endpoint is None:
        raise HookError("'endpoint' is required")
    if endpoint not in endpoints and endpoint != "any":
        raise HookError(f"unknown endpoint '{endpoint}'; one of: {', '.join(endpoints + ('any',))}")
    ftype = want_str(body, "type")
    if ftype not in FAULT_TYPES:
        raise HookError(f"'type' must be one of: {', '.join(FAULT_TYPES)}")
    count = want_number(body, "count", minimum=1, integer=True) if "count" in body else 1
    spec: dict[str, Any] = {"type": ftype}
    if ftype == "status":
        if "status" not in body:
            raise HookError("'status' is required for type 'status'")
        spec["status"] = want_number(body, "status", minimum=100, integer=True)
        if spec["status"] > 599:
            raise HookError("'status' must be 100..599")
    if ftype == "non_json" and "status" in body:
        spec["status"] = want_number(body, "status", minimum=100, integer=True)
    if ftype == "rate_limit":
        if "status" in body:
            spec["status"] = want_number(body, "status", minimum=100, integer=True)
        if "retry_after" in body and body["retry_after"] is not None:
            ra = body["retry_after"]
            if isinstance(ra, str):
                spec["retry_after"] = ra
            else:
                spec["retry_after"] = str(want_number(body, "retry_after", minimum=0, integer=True))
        else:
            spec["retry_after"] = "1"
    if ftype == "huge":
        spec["size"] = (
            want_number(body, "size", minimum=16, integer=True) if "size" in body else HUGE_DEFAULT_SIZE
        )
        spec["json"] = want_bool(body, "json", True)
        # stream: made and sent 64 KiB at a time (never whole in memory), each piece counted in
        # /_test/faults/streamed once written; length: false leaves out the Content-Length.
        spec["stream"] = want_bool(body, "stream", False)
        spec["length"] = want_bool(body, "length", True)
        if "status" in body:
            spec["status"] = want_number(body, "status", minimum=100, integer=True)
            if spec["status"] > 599:
                raise HookError("'status' must be 100..599")
    if ftype == "trickle":
        # A 200 whose body arrives one byte every `interval` seconds (a link that barely moves).
        spec["interval"] = want_number(body, "interval", minimum=0.01) if "interval" in body else 1.0
        if spec["interval"] > 60:
            raise HookError("'interval' must be at most 60")
    if ftype == "delay":
        if "seconds" not in body:
            raise HookError("'seconds' is required for type 'delay'")
        spec["seconds"] = want_number(body, "seconds", minimum=0)
        if spec["seconds"] > 600:
            raise HookError("'seconds' must be <= 600")
        # until_released: the request waits for POST /_test/release (at most `seconds`), so a test
        # acts while a request is held at the server without betting on how long its move takes.
        spec["until_released"] = want_bool(body, "until_released", False)
    if "body" in body:
        spec["body"] = body["body"]
    if "content_type" in body:
        spec["content_type"] = want_str(body, "content_type")
    if "headers" in body:
        headers = body["headers"]
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise HookError("'headers' must be an object of string values")
        spec["headers"] = headers
    return endpoint, spec, count


class FaultBook:
    """FIFO queue of faults per endpoint name; each entry applies to its next `count` requests.

    A request to endpoint E takes the head of E's queue if any, else the head of the "any" queue.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._queues: dict[str, deque] = {}
        self._streamed = 0
        self._streams_ended = 0
        self._releases = threading.Semaphore(0)

    def hold(self, seconds: float) -> None:
        """Waits for one release (POST /_test/release), or `seconds`."""
        self._releases.acquire(timeout=seconds)

    def release(self) -> None:
        """Lets one held request go on."""
        self._releases.release()

    def count_streamed(self, n: int) -> None:
        """Adds bytes of a streamed `huge` body that the server wrote to a connection."""
        with self._lock:
            self._streamed += n

    def count_stream_end(self) -> None:
        """A streamed `huge` body ended: all written, or a write failed (the client went away)."""
        with self._lock:
            self._streams_ended += 1

    def streamed(self) -> dict:
        with self._lock:
            return {"bytes": self._streamed, "ended": self._streams_ended}

    def add(self, endpoint: str, spec: dict, count: int) -> None:
        with self._lock:
            self._queues.setdefault(endpoint, deque()).append({"spec": spec, "remaining": count})

    def take(self, endpoint: str) -> dict | None:
        with self._lock:
            for name in (endpoint, "any"):
                q = self._queues.get(name)
                if q:
                    head = q[0]
                    head["remaining"] -= 1
                    if head["remaining"] <= 0:
                        q.popleft()
                    return head["spec"]
        return None

    def clear(self, endpoint: str | None = None) -> None:
        with self._lock:
            if endpoint is None:
                self._queues.clear()
                self._streamed = 0
                self._streams_ended = 0
            else:
                self._queues.pop(endpoint, None)

    def pending(self) -> dict:
        with self._lock:
            return {
                name: [dict(e["spec"], remaining=e["remaining"]) for e in q]
                for name, q in self._queues.items()
                if q
            }


def _fault_body(spec: dict, default: Any) -> tuple[bytes, str]:
    body = spec.get("body", default)
    ctype = spec.get("content_type")
    if isinstance(body, (dict, list, int, float, bool)) or body is None:
        return json_bytes(body), ctype or "application/json"
    data = str(body).encode("utf-8")
    if ctype is None:
        try:
            json.loads(data)
            ctype = "application/json"
        except ValueError:
            ctype = "text/plain; charset=utf-8"
    return data, ctype


def _huge_body(size: int, as_json: bool) -> bytes:
    if not as_json:
        return b"x" * size
    head, tail = b'{"padding":"', b'"}'
    return head + b"a" * (size - len(head) - len(tail)) + tail


STREAM_PIECE = 64 * 1024


def _huge_pieces(size: int, as_json: bool, book: "FaultBook"):
    """The same body as _huge_body, made 64 KiB at a time. A piece is counted once its write
    returned (the server asks for the next piece only then): a client that stops reading stops
    the count, give or take the socket buffers."""
    head, tail = (b'{"padding":"', b'"}') if as_json else (b"", b"")
    fill = b"a" if as_json else b"x"
    middle = size - len(head) - len(tail)
    full = fill * STREAM_PIECE
    pieces = [head] if head else []

    def generate():
        try:
            for piece in pieces:
                yield piece
                book.count_streamed(len(piece))
            left = middle
            while left > 0:
                piece = full if left >= STREAM_PIECE else fill * left
                left -= len(piece)
                yield piece
                book.count_streamed(len(piece))
            if tail:
                yield tail
                book.count_streamed(len(tail))
        finally:
            book.count_stream_end()

    return generate()


class FaultMiddleware:
    """WSGI middleware in front of the Flask app that applies injected faults.

    `route(path, method)` names the endpoint of a request (None = not fault-injectable, e.g.
    the /_test/ hooks). `on_request(endpoint, fault_type_or_None)` is called for every
    routed request so the app can keep per-endpoint counters.
    """

    def __init__(
        self,
        app,
        book: FaultBook,
        route: Callable[[str, str], str | None],
        on_request: Callable[[str, str | None], None],
        rate_limit_body: Any,
    ):
        self.app = app
        self.book = book
        self.route = route
        self.on_request = on_request
        self.rate_limit_body = rate_limit_body

    def __call__(self, environ, start_response):
        endpoint = self.route(environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "GET"))
        if endpoint is None:
            return self.app(environ, start_response)
        spec = self.book.take(endpoint)
        self.on_request(endpoint, spec["type"] if spec else None)
        if spec is None:
            return self.app(environ, start_response)
        ftype = spec["type"]
        log.info("fault %s on %s %s", ftype, environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
        if ftype == "delay":
            if spec.get("until_released"):
                self.book.hold(spec["seconds"])
            else:
                time.sleep(spec["seconds"])
            return self.app(environ, start_response)
        if ftype == "reset":
            raise InjectedReset("injected connection reset")
        if ftype == "trickle":
            data = b'{"access_token": "at-never-finished", "expires_in": 3600}'
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])

            def trickle(interval=spec["interval"]):
                for i in range(len(data)):
                    yield data[i : i + 1]
                    time.sleep(interval)

            return trickle()
        if ftype == "cut":
            # Half of a token answer, then the connection reset: a link that dies mid-body.
            data = b'{"access_token": "at-cut-short", "refresh_token": "rt-cut-short", "expires_in": 3600}'
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])

            def cut():
                yield data[: len(data) // 2]
                raise InjectedReset("injected reset mid-body")

            return cut()
        extra = list(spec.get("headers", {}).items())
        if ftype == "huge" and spec.get("stream"):
            status = spec.get("status", 200)
            ctype = spec.get("content_type") or ("application/json" if spec["json"] else "text/plain")
            headers = [("Content-Type", ctype)] + extra
            if spec.get("length", True):
                headers.append(("Content-Length", str(spec["size"])))
            start_response(f"{status} {_REASONS.get(status, 'Injected')}", headers)
            return _huge_pieces(spec["size"], spec["json"], self.book)
        if ftype == "status":
            data, ctype = _fault_body(spec, {"error": "injected_fault", "status": spec["status"]})
            status = spec["status"]
        elif ftype == "non_json":
            data, ctype = _fault_body(
                spec, "<html><body><h1>Service temporarily unavailable</h1></body></html>"
            )
            if "content_type" not in spec and "body" not in spec:
                ctype = "text/html; charset=utf-8"
            status = spec.get("status", 200)
        elif ftype == "huge":
            data = _huge_body(spec["size"], spec["json"])
            ctype = spec.get("content_type") or ("application/json" if spec["json"] else "text/plain")
            status = spec.get("status", 200)
        elif ftype == "rate_limit":
            data, ctype = _fault_body(spec, self.rate_limit_body)
            status = spec.get("status", 429)
            extra.append(("Retry-After", spec["retry_after"]))
        else:  # pragma: no cover - validated earlier
            raise AssertionError(ftype)
        reason = _REASONS.get(status, "Injected")
        headers = [("Content-Type", ctype), ("Content-Length", str(len(data)))] + extra
        start_response(f"{status} {reason}", headers)
        return [data]


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    410: "Gone",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


# ---------------------------------------------------------------------------------------------
# Server


class _Handler(WSGIRequestHandler):
    def connection_dropped(self, error, environ=None):
        # Never read another request from a dropped connection (a WebSocket upgrade that the
        # app answered on the raw socket leaves http.server expecting a keep-alive request).
        self.close_connection = True
        if isinstance(error, InjectedReset):
            # No response at all: abortive close (RST) once the handler returns.
            try:
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
            except OSError:
                pass
            self.server.mark_abort(self.connection)

    def log_request(self, code="-", size="-"):
        # One plain line per request on stderr (werkzeug's own line carries ANSI colours).
        code = getattr(code, "value", code)
        log.info('%s "%s" %s', self.address_string(), self.requestline, code)


class _Server(ThreadedWSGIServer):
    """werkzeug's threaded WSGI server (what make_server(threaded=True) builds), plus
    abortive close for sockets marked by an injected reset."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, host, port, app, ssl_context=None):
        self._abort = weakref.WeakSet()
        self._abort_lock = threading.Lock()
        super().__init__(host, port, app, handler=_Handler, ssl_context=ssl_context)

    def mark_abort(self, sock) -> None:
        with self._abort_lock:
            self._abort.add(sock)

    def shutdown_request(self, request):
        with self._abort_lock:
            abort = request in self._abort
            self._abort.discard(request)
        if abort:
            # Skip the graceful shutdown(SHUT_WR): close with SO_LINGER 0 sends RST.
            self.close_request(request)
        else:
            super().shutdown_request(request)


def base_arg_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default)")
    p.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop when the parent process goes away (so an aborted test run leaves nothing behind)",
    )
    p.add_argument(
        "--log-level", default="INFO", help="stderr log level: DEBUG, INFO (default), WARNING, ERROR"
    )
    p.add_argument("--tls-cert", help="serve HTTPS (and wss) with this PEM certificate chain (needs --tls-key)")
    p.add_argument("--tls-key", help="the PEM private key of --tls-cert")
    return p


def setup_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def serve(app, host: str, port: int, on_bound: Callable[[str], None], exit_with_parent=False, tls=None) -> int:
    """Binds, calls on_bound(base_url), prints the READY line, serves until SIGTERM/SIGINT.
    tls: None, or (certificate file, key file) to serve HTTPS."""
    ssl_context = None
    if tls and (tls[0] or tls[1]):
        if not (tls[0] and tls[1]):
            print("--tls-cert and --tls-key go together", file=sys.stderr)
            return 2
        import ssl

        ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ssl_context.load_cert_chain(tls[0], tls[1])
    try:
        server = _Server(host, port, app, ssl_context=ssl_context)
    except SystemExit:
        print(f"cannot bind {host}:{port}", file=sys.stderr)
        return 1
    actual_port = server.socket.getsockname()[1]
    base_url = f"{'https' if ssl_context else 'http'}://{url_host(host)}:{actual_port}"
    on_bound(base_url)

    stop = threading.Event()

    def _on_signal(signum, _frame):
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        sys.stdout.write(f"READY {base_url}\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        pass
    log.info("serving on %s (pid %d)", base_url, os.getpid())

    parent = os.getppid()
    while not stop.wait(0.25):
        if exit_with_parent and os.getppid() != parent:
            log.info("parent %d went away: stopping", parent)
            break
        if not thread.is_alive():
            log.error("server thread died")
            return 1
    server.shutdown()
    server.server_close()
    log.info("stopped")
    return 0


def hook(fn):
    """A /_test/ hook: a HookError becomes a JSON error answer with its status."""
    from flask import jsonify

    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except HookError as e:
            return jsonify(error=e.message), e.status

    wrapper.__name__ = fn.__name__
    return wrapper


def register_common_hooks(app, st, endpoint_names: tuple[str, ...]) -> None:
    """The /_test/ hooks both OAuth servers share: deny and expire a device code, list the device
    codes, read the settings, inject and clear faults, read the counters, reset. `st` provides
    `lock`, `decide`, `find_device`, `device_view`, `devices`, `config`, `faults`, `stats` and
    `reset()`. Each server adds its own (approve, config changes, token tricks)."""
    import copy

    from flask import jsonify, request

    @app.post("/_test/deny")
    @hook
    def t_deny():
        body = hook_body(request)
        return jsonify(st.decide(want_str(body, "user_code"), False))

    @app.post("/_test/expire")
    @hook
    def t_expire():
        body = hook_body(request)
        with st.lock:
            device = st.find_device(want_str(body, "user_code"))
            device["expires_at"] = time.time() - 1
            return jsonify(st.device_view(device))

    @app.get("/_test/devices")
    def t_devices():
        with st.lock:
            return jsonify(devices=[st.device_view(d) for d in st.devices.values()])

    @app.get("/_test/config")
    def t_config_get():
        with st.lock:
            return jsonify(st.config)

    @app.post("/_test/fault")
    @hook
    def t_fault():
        endpoint, spec, count = validate_fault(hook_body(request), endpoint_names)
        st.faults.add(endpoint, spec, count)
        return jsonify(endpoint=endpoint, count=count, fault=spec)

    @app.post("/_test/release")
    @hook
    def t_release():
        st.faults.release()
        return jsonify(released=True)

    @app.get("/_test/faults")
    def t_faults():
        return jsonify(st.faults.pending())

    @app.get("/_test/faults/streamed")
    def t_faults_streamed():
        return jsonify(st.faults.streamed())

    @app.post("/_test/faults/clear")
    @hook
    def t_faults_clear():
        body = hook_body(request)
        st.faults.clear(want_str(body, "endpoint"))
        return jsonify(st.faults.pending())

    @app.get("/_test/stats")
    def t_stats():
        with st.lock:
            return jsonify(copy.deepcopy(st.stats))

    @app.post("/_test/reset")
    def t_reset():
        st.reset()
        return jsonify(ok=True)
