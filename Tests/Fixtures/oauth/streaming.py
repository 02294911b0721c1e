"""Streaming Responses endpoint of the ChatGPT emulator (test fixture only).

``/backend-api/codex/responses`` over two transports on the emulator's host and port:

* WebSocket (flask-sock / simple-websocket): ``GET`` with ``Upgrade: websocket``; the client
  sends one ``{"type": "response.create", ...}`` text frame, the server answers one text frame
  per event and then a normal close frame.
* HTTP SSE: ``POST`` with the same JSON body (``"stream": true``); ``text/event-stream``, one
  ``event:``/``data:`` block per event, written and flushed as it is produced.

Both check the bearer token and the scripted usage limit exactly as the usage endpoint does
(State.authorize / State.take_usage_limit). ``/_test/stream`` scripts per-connection faults
(refused upgrades, HTTP errors, dropped connections, slow drip, malformed / unknown / oversize /
binary events, held connections); counters live under ``stats.stream``. See README.md.

Connection teardown works below Flask: the WebSocket view marks the WSGI environ and the small
middleware installed here then raises a ConnectionError subclass, so werkzeug writes nothing
after the WebSocket session (flask-sock would otherwise append an HTTP 200 to the socket) and
closes the connection (FIN, or RST for ``drop_mode: "rst"``).
"""

from __future__ import annotations

import copy
import json
import logging
import select
import socket
import threading
import time

from flask import Response, g, jsonify, request
from flask_sock import Sock
from simple_websocket import ConnectionClosed
from wsproto.events import BytesMessage, TextMessage
from wsproto.utilities import LocalProtocolError

from fixture_common import HookError, InjectedReset, hook_body

log = logging.getLogger("chatgpt-emulator.stream")

PATH = "/backend-api/codex/responses"
TRANSPORTS = ("websocket", "sse", "any")
DEFAULT_CHUNK = 5
OVERSIZE_DEFAULT = 11 * 1024 * 1024
REQUEST_FRAME_TIMEOUT = 60.0  # seconds a WebSocket client has to send its response.create
CLOSE_REPLY_TIMEOUT = 2.0  # seconds to wait for the client's close frame after ours
POLL = 0.02  # seconds between checks for a client that went away

UNKNOWN_EVENT = {"type": "response.future_thing", "x": 1}
MALFORMED_SSE = b"event: response.output_text.delta\ndata: {not json\n\n"
MALFORMED_WS = "{not json"
BINARY_FRAME = b"\x00\x01binary"
SSE_PRELUDE = b": stream start\n\nretry: 1000\n\n"

END_MARK = "lanyard.stream_end"  # environ key: how the WebSocket view wants the socket ended

INT_STEP_KEYS = {
    # key -> minimum
    "drop_after": 0,
    "chunk": 1,
    "malformed_after": 0,
    "unknown_after": 0,
    "oversize_after": 0,
    "oversize_bytes": 1,
    "binary_after": 0,
    "gate_after": 0,
}
STEP_KEYS = set(INT_STEP_KEYS) | {
    "transport", "refuse_upgrade", "status", "body", "retry_after", "text", "delay_ms", "hold",
    "drop_mode",
}


class StreamEnded(ConnectionAbortedError):
    """Raised to werkzeug: the connection is finished, write nothing more and close it (FIN)."""


class ClientGone(Exception):
    """The client closed or reset the connection before the server was done."""


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Script (/_test/stream)


def _int(value, key: str, minimum: int, lo_hi: tuple[int, int] | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HookError(f"'{key}' must be an integer")
    if value < minimum:
        raise HookError(f"'{key}' must be >= {minimum}")
    if lo_hi and not lo_hi[0] <= value <= lo_hi[1]:
        raise HookError(f"'{key}' must be {lo_hi[0]}..{lo_hi[1]}")
    return value


def validate_step(raw, where: str) -> dict:
    if not isinstance(raw, dict):
        raise HookError(f"{where}: a step must be an object")
    unknown = set(raw) - STEP_KEYS
    if unknown:
        raise HookError(f"{where}: unknown key(s): {', '.join(sorted(unknown))}")
    step = {}
    for key, value in raw.items():
        if value is None:
            continue
        k = f"{where}.{key}"
        if key == "transport":
            if value not in TRANSPORTS:
                raise HookError(f"'{k}' must be one of: {', '.join(TRANSPORTS)}")
        elif key == "refuse_upgrade":
            value = _int(value, k, 100, (100, 599))
            if value == 101:
                raise HookError(f"'{k}' cannot be 101")
        elif key == "status":
            value = _int(value, k, 100, (100, 599))
        elif key == "retry_after":
            if not isinstance(value, str):
                value = str(_int(value, k, 0))
        elif key == "text":
            if not isinstance(value, str):
                raise HookError(f"'{k}' must be a string")
        elif key == "delay_ms":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise HookError(f"'{k}' must be a number >= 0")
        elif key == "hold":
            if not isinstance(value, bool):
                raise HookError(f"'{k}' must be true or false")
        elif key == "drop_mode":
            if value not in ("fin", "rst"):
                raise HookError(f"'{k}' must be \"fin\" or \"rst\"")
        elif key in INT_STEP_KEYS:
            value = _int(value, k, INT_STEP_KEYS[key])
        step[key] = value  # "body": any JSON value
    step.setdefault("transport", "any")
    return step


class StreamState:
    """Script, settings, counters and open connections of the streaming endpoint (guarded by
    the emulator's st.lock). Counters live in st.stats["stream"] so /_test/stats shows them."""

    def __init__(self, st):
        self.st = st
        self.open: dict[int, dict] = {}  # connection id -> {"transport", "since"}; survives reset
        self.next_conn = 0
        self.reset()

    def reset(self) -> None:
        with self.st.lock:
            self.script: list[dict] = []
            self.default_text: str | None = None
            self.default_chunk: int | None = None
            self.seq = 0
            # `gate_after: N` stops a stream after N regular events until /_test/stream
            # {"release": true}: a test sees an event while the server is known not to be done.
            self.gate = threading.Event()
            self.st.stats["stream"] = {
                "ws_upgrade_attempts": 0,
                "ws_upgrades_refused": 0,
                "ws_connections": 0,
                "ws_client_closed": 0,
                "sse_requests": 0,
                "sse_client_closed": 0,
                "unauthorized": 0,
                "usage_limited": 0,
                "bad_requests": 0,
                "scripted_steps_used": 0,
                "dropped": 0,
                "completed": 0,
                "requests_by_transport": {"websocket": 0, "sse": 0},
                "open_connections": len(self.open),
                "last_request": None,
            }

    @property
    def stats(self) -> dict:
        return self.st.stats["stream"]

    def count(self, key: str, n: int = 1) -> None:
        with self.st.lock:
            self.stats[key] += n

    def take_step(self, transport: str) -> dict:
        """Pops the first step whose transport matches ({} when none)."""
        with self.st.lock:
            for i, step in enumerate(self.script):
                if step["transport"] in (transport, "any"):
                    del self.script[i]
                    self.stats["scripted_steps_used"] += 1
                    return step
            return {}

    def opened(self, transport: str) -> int:
        with self.st.lock:
            self.next_conn += 1
            self.open[self.next_conn] = {"transport": transport, "since": time.time()}
            self.stats["open_connections"] = len(self.open)
            return self.next_conn

    def closed(self, conn_id: int) -> None:
        with self.st.lock:
            self.open.pop(conn_id, None)
            self.stats["open_connections"] = len(self.open)

    def view(self) -> dict:
        with self.st.lock:
            return {
                "script": copy.deepcopy(self.script),
                "default_text": self.default_text,
                "default_chunk": self.default_chunk,
                "open_connections": len(self.open),
                "open": [dict(v, id=k) for k, v in self.open.items()],
            }


# ---------------------------------------------------------------------------------------------
# Requests and events


def parse_request(raw, transport: str) -> tuple[dict | None, str | None]:
    """(body, None) or (None or the parsed object, error message) for a response.create."""
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, "body is not UTF-8"
    try:
        body = json.loads(raw)
    except ValueError as e:
        return None, f"body is not JSON: {e}"
    if not isinstance(body, dict):
        return None, "body must be a JSON object"
    if transport == "websocket" and body.get("type") != "response.create":
        return body, "the request frame must have \"type\": \"response.create\""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return body, "'model' is required (a non-empty string)"
    if not isinstance(body.get("input"), list):
        return body, "'input' is required (a list of input items)"
    if not all(isinstance(item, dict) for item in body["input"]):
        return body, "every 'input' item must be an object"
    if transport == "sse" and body.get("stream") is not True:
        return body, "'stream' must be true"
    if "instructions" in body and body["instructions"] is not None and not isinstance(body["instructions"], str):
        return body, "'instructions' must be a string"
    return body, None


def prompt_of(body: dict) -> str:
    parts = []
    for item in body["input"]:
        if item.get("role") != "user" or not isinstance(item.get("content"), list):
            continue
        for part in item["content"]:
            if isinstance(part, dict) and part.get("type") == "input_text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
    return "".join(parts)


def build_events(n: int, model: str, text: str, prompt: str, chunk: int) -> list[dict]:
    resp_id, msg_id = f"resp_{n}", f"msg_{n}"
    deltas = [text[i:i + chunk] for i in range(0, len(text), chunk)]
    where = {"item_id": msg_id, "output_index": 0, "content_index": 0}
    events = [{"type": "response.created", "response": {"id": resp_id, "status": "in_progress", "model": model}}]
    events += [dict({"type": "response.output_text.delta"}, **where, delta=d) for d in deltas]
    events.append(dict({"type": "response.output_text.done"}, **where, text=text))
    in_tokens, out_tokens = len(prompt.split()), len(deltas)
    events.append({
        "type": "response.completed",
        "response": {
            "id": resp_id,
            "status": "completed",
            "model": model,
            "output": [{"type": "message", "id": msg_id, "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]}],
            "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens,
                      "total_tokens": in_tokens + out_tokens},
        },
    })
    return events


def plan(step: dict, events: list[dict], n: int) -> list[tuple[str, object]]:
    """The actions of one stream: ("event", obj), ("malformed", None), ("binary", None), then
    at most one final ("drop" | "hold", None). `*_after: N` counts regular events only; the
    injections due after N regular events go out before `drop_after: N` cuts."""
    actions: list[tuple[str, object]] = []
    for k in range(len(events) + 1):
        if step.get("malformed_after") == k:
            actions.append(("malformed", None))
        if step.get("unknown_after") == k:
            actions.append(("event", UNKNOWN_EVENT))
        if step.get("oversize_after") == k:
            size = step.get("oversize_bytes", OVERSIZE_DEFAULT)
            actions.append(("event", {"type": "response.output_text.delta", "item_id": f"msg_{n}",
                                      "output_index": 0, "content_index": 0, "delta": "a" * size}))
        if step.get("binary_after") == k:
            actions.append(("binary", None))
        if step.get("gate_after") == k:
            actions.append(("gate", None))
        if step.get("drop_after") == k:
            actions.append(("hold" if step.get("hold") else "drop", None))
            return actions
        if k < len(events):
            actions.append(("event", events[k]))
    if step.get("hold"):
        actions.append(("hold", None))
    return actions


def _nodelay(sock) -> None:
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass


def _socket_gone(sock, timeout: float) -> bool:
    """Waits up to `timeout` s; True when the peer closed or reset the connection."""
    try:
        readable, _, _ = select.select([sock], [], [], timeout)
    except (OSError, ValueError):
        return True
    if not readable:
        return False
    try:
        data = sock.recv(65536, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False
    except OSError:
        return True
    if data:
        sock.recv(len(data))  # stray bytes after the request: discard, keep waiting
        return False
    return True


def _shutdown(sock, how=socket.SHUT_RDWR) -> None:
    try:
        sock.shutdown(how)
    except OSError:
        pass


def _linger0(sock) -> None:
    import struct

    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


class _EndMiddleware:
    """Ends WebSocket connections the view marked in the environ (see the module docstring)."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        result = self.app(environ, start_response)
        end = environ.get(END_MARK)
        if end is None:
            return result
        if hasattr(result, "close"):
            result.close()
        log.info('%s "GET %s" 101 websocket ended: %s', environ.get("REMOTE_ADDR"), environ.get("PATH_INFO"), end)
        if end == "rst":
            raise InjectedReset("scripted websocket drop (RST)")
        raise StreamEnded(f"websocket ended: {end}")


# ---------------------------------------------------------------------------------------------
# Registration


def register(app, st) -> StreamState:
    """Adds the endpoint and /_test/stream to the emulator's Flask app; resets with st."""
    ss = StreamState(st)
    st.reset_hooks.append(ss.reset)
    sock = Sock(app)
    app.wsgi_app = _EndMiddleware(app.wsgi_app)

    def answer(status: int, body, headers: dict | None = None):
        resp = jsonify(body)
        resp.status_code = status
        resp.headers.update(headers or {})
        return resp

    def scripted_answer(step: dict, status: int, default_body):
        headers = {"Retry-After": step["retry_after"]} if "retry_after" in step else {}
        return answer(status, step.get("body", default_body), headers)

    def reply_text(step: dict, acct: dict, prompt: str) -> str:
        if "text" in step:
            return step["text"]
        if ss.default_text is not None:
            return ss.default_text
        return "Hello " + acct["email"] + ". You said: " + prompt

    def admit(transport: str):
        """Shared checks before streaming. Returns (ctx, None) or (None, HTTP response)."""
        step = ss.take_step(transport)
        if transport == "websocket" and "refuse_upgrade" in step:
            code = step["refuse_upgrade"]
            return None, scripted_answer(step, code, {"error": {
                "code": "upgrade_refused", "message": f"WebSocket upgrade refused ({code}, scripted)"}})
        if "status" in step:
            code = step["status"]
            return None, scripted_answer(step, code, {"error": {
                "code": "injected_fault", "message": f"scripted status {code}"}})
        with st.lock:
            acct, failure = st.authorize(request.headers)
            if failure is not None:
                ss.stats["unauthorized"] += 1
                return None, answer(*failure)
            limited = st.take_usage_limit(acct)
            if limited is not None:
                ss.stats["usage_limited"] += 1
            acct = dict(acct)
        return {"step": step, "account": acct, "limited": limited, "transport": transport}, None

    def accept_body(ctx: dict, raw) -> tuple[dict | None, str | None]:
        body, error = parse_request(raw, ctx["transport"])
        with st.lock:
            if isinstance(body, dict):
                ss.stats["last_request"] = {
                    "transport": ctx["transport"],
                    "account_id": ctx["account"]["account_id"],
                    "headers": {k.lower(): v for k, v in request.headers.items()
                                if k.lower() not in ("authorization", "cookie")},
                    "body": copy.deepcopy(body),
                }
            if error is not None:
                ss.stats["bad_requests"] += 1
        return body, error

    def actions_for(ctx: dict, body: dict) -> list:
        step = ctx["step"]
        prompt = prompt_of(body)
        with st.lock:
            ss.seq += 1
            n = ss.seq
            chunk = step.get("chunk") or ss.default_chunk or DEFAULT_CHUNK
            ss.stats["requests_by_transport"][ctx["transport"]] += 1
        events = build_events(n, body["model"], reply_text(step, ctx["account"], prompt), prompt, chunk)
        return plan(step, events, n)

    # -- WebSocket ---------------------------------------------------------------------------

    @app.before_request
    def before_stream():
        if request.path != PATH or request.method != "GET":
            return None
        if request.headers.get("Upgrade", "").strip().lower() != "websocket":
            return None
        ss.count("ws_upgrade_attempts")
        connection = {v.strip().lower() for v in request.headers.get("Connection", "").split(",")}
        if ("upgrade" not in connection or not request.headers.get("Sec-WebSocket-Key")
                or request.headers.get("Sec-WebSocket-Version", "").strip() != "13"):
            ss.count("ws_upgrades_refused")
            return answer(400, {"error": {"code": "bad_handshake", "message":
                                          "need Connection: Upgrade, Sec-WebSocket-Key and Sec-WebSocket-Version: 13"}})
        ctx, refusal = admit("websocket")
        if refusal is not None:
            ss.count("ws_upgrades_refused")
            return refusal
        g.lanyard_stream = ctx
        return None

    @sock.route(PATH)
    def responses_ws(ws):
        ctx = g.lanyard_stream
        environ = request.environ
        raw_sock = ws.sock
        _nodelay(raw_sock)
        conn_id = ss.opened("websocket")
        ss.count("ws_connections")
        step = ctx["step"]
        delay = step.get("delay_ms", 0) / 1000.0
        end = "close"

        def send(data) -> None:
            if not ws.connected:
                raise ClientGone()
            message = BytesMessage(data=data) if isinstance(data, bytes) else TextMessage(data=data)
            try:
                raw_sock.sendall(ws.ws.send(message))
            except (OSError, LocalProtocolError) as e:
                raise ClientGone() from e

        def wait(seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while True:
                if not ws.connected:
                    raise ClientGone()
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                time.sleep(min(POLL, left))

        try:
            try:
                raw = ws.receive(timeout=REQUEST_FRAME_TIMEOUT)
            except ConnectionClosed as e:
                raise ClientGone() from e
            if raw is None:
                send(_json({"type": "error", "status": 400, "error": {
                    "code": "invalid_request", "message": f"no request frame within {REQUEST_FRAME_TIMEOUT:g} s"}}))
            elif ctx["limited"] is not None:
                accept_body(ctx, raw)
                send(_json({"type": "error", "status": 429, "error": ctx["limited"][0]["error"]}))
            else:
                body, error = accept_body(ctx, raw)
                if error is not None:
                    send(_json({"type": "error", "status": 400,
                                "error": {"code": "invalid_request", "message": error}}))
                else:
                    for kind, obj in actions_for(ctx, body):
                        if kind == "drop":
                            end = "rst" if step.get("drop_mode") == "rst" else "drop"
                            ss.count("dropped")
                            break
                        if kind == "hold":
                            wait(float("inf"))
                        if kind == "gate":
                            while not ss.gate.wait(POLL):
                                if not ws.connected:
                                    raise ClientGone()
                            continue
                        wait(delay)
                        if kind == "malformed":
                            send(MALFORMED_WS)
                        elif kind == "binary":
                            send(BINARY_FRAME)
                        else:
                            send(_json(obj))
                            if obj["type"] == "response.completed":
                                ss.count("completed")
        except ClientGone:
            end = "client closed"
            ss.count("ws_client_closed")
        finally:
            try:
                if end == "close":
                    try:
                        ws.close()  # normal closure (1000)
                    except (ConnectionClosed, OSError, LocalProtocolError):
                        pass
                    ws.thread.join(CLOSE_REPLY_TIMEOUT)  # the client's close frame ends it
                    _shutdown(raw_sock)
                elif end == "rst":
                    ws.connected = False
                    _linger0(raw_sock)
                    _shutdown(raw_sock, socket.SHUT_RD)  # wakes simple-websocket's reader thread
                else:  # "drop" (FIN without a close frame) or the client went away
                    ws.connected = False
                    _shutdown(raw_sock)
                environ[END_MARK] = end
            finally:
                ss.closed(conn_id)

    # -- SSE ---------------------------------------------------------------------------------

    @app.post(PATH)
    def responses_sse():
        ss.count("sse_requests")
        ctx, refusal = admit("sse")
        if refusal is not None:
            return refusal
        if ctx["limited"] is not None:
            accept_body(ctx, request.get_data())
            return answer(429, *ctx["limited"])
        body, error = accept_body(ctx, request.get_data())
        if error is not None:
            return answer(400, {"error": {"code": "invalid_request", "message": error}})
        actions = actions_for(ctx, body)
        raw_sock = request.environ.get("werkzeug.socket")
        step = ctx["step"]
        delay = step.get("delay_ms", 0) / 1000.0

        def generate():
            conn_id = ss.opened("sse")
            done = False

            def wait(seconds: float) -> None:
                if seconds > 0 and raw_sock is not None:
                    deadline = time.monotonic() + seconds
                    while (left := deadline - time.monotonic()) > 0:
                        if _socket_gone(raw_sock, min(0.2, left)):
                            raise ClientGone()
                elif seconds > 0:
                    time.sleep(seconds)

            try:
                if raw_sock is not None:
                    _nodelay(raw_sock)
                yield SSE_PRELUDE
                for kind, obj in actions:
                    if kind == "drop":
                        done = True
                        ss.count("dropped")
                        if raw_sock is not None:
                            if step.get("drop_mode") == "rst":
                                _linger0(raw_sock)
                                raise InjectedReset("scripted SSE drop (RST)")
                            _shutdown(raw_sock)
                        raise StreamEnded("scripted SSE drop")
                    if kind == "hold":
                        while raw_sock is not None and not _socket_gone(raw_sock, 0.2):
                            pass
                        raise ClientGone()
                    if kind == "gate":
                        while not ss.gate.is_set():
                            if raw_sock is not None and _socket_gone(raw_sock, POLL):
                                raise ClientGone()
                            ss.gate.wait(POLL if raw_sock is None else 0)
                        continue
                    if kind == "binary":
                        continue  # WebSocket only
                    wait(delay)
                    if kind == "malformed":
                        yield MALFORMED_SSE
                    else:
                        yield f"event: {obj['type']}\ndata: {_json(obj)}\n\n".encode("utf-8")
                        if obj["type"] == "response.completed":
                            ss.count("completed")
                done = True
            except ClientGone:
                done = True
                ss.count("sse_client_closed")
                if raw_sock is not None:
                    _shutdown(raw_sock)
                raise StreamEnded("SSE client went away")
            except GeneratorExit:  # werkzeug's write failed: the client is gone
                if not done:
                    ss.count("sse_client_closed")
                raise
            finally:
                ss.closed(conn_id)

        return Response(generate(), status=200, content_type="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    # -- test hooks --------------------------------------------------------------------------

    @app.route("/_test/stream", methods=["GET", "POST"])
    def t_stream():
        if request.method == "GET":
            return jsonify(ss.view())
        try:
            body = hook_body(request)
            unknown = set(body) - {"script", "default_text", "default_chunk", "release"}
            if unknown:
                raise HookError(f"unknown field(s): {', '.join(sorted(unknown))}")
            script = None
            if "script" in body:
                if not isinstance(body["script"], list):
                    raise HookError("'script' must be a list of steps")
                script = [validate_step(s, f"script[{i}]") for i, s in enumerate(body["script"])]
            text = body.get("default_text")
            if text is not None and not isinstance(text, str):
                raise HookError("'default_text' must be a string or null")
            chunk = body.get("default_chunk")
            if chunk is not None:
                chunk = _int(chunk, "default_chunk", 1)
        except HookError as e:
            return jsonify(error=e.message), e.status
        with st.lock:
            if script is not None:
                ss.script = script
                ss.gate.clear()
            if body.get("release") is True:
                ss.gate.set()
            if "default_text" in body:
                ss.default_text = text
            if "default_chunk" in body:
                ss.default_chunk = chunk
        return jsonify(ss.view())

    return ss
