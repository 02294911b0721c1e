#!/bin/sh
# First-event latency of `lanyard ask` over WebSocket and over HTTP/SSE against the same ChatGPT
# emulator, in one run: ms from spawning `lanyard ask --json --transport T hi` to its first
# `text_delta` line and to `completed` (median and p90 of 30 runs per transport, alternating;
# bench/stream_first_event.py), then 10 more each with a slow drip (information). Every run must
# have used the transport it asked for (its `connected` event, and the emulator's counts) and
# completed. Target: ws/sse first-event median <= 1.5 (WebSocket is usually the faster); exits 1
# when it is missed or when a run fails.
set -eu
bin=${LANYARD_BIN:-.build/release/lanyard}
[ -x "$(dirname "$bin")/lanyard-net" ] || { echo "stream: no lanyard-net beside $bin (make release builds both)" >&2; exit 1; }
tmp=$(mktemp -d)
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
. scripts/lib/emulator.sh
emu_home
unset DBUS_SESSION_BUS_ADDRESS
scripts/venv.sh
emu_start || exit 1
emu_file_store || exit 1
post /_test/config '{"interval": 0}'
post /_test/stream '{"script": [], "default_text": null, "default_chunk": null}'   # the default reply, 5-character deltas
emu_login bench "$tmp/login.err" || { echo "stream: login failed:" >&2; cat "$tmp/login.err" >&2; exit 1; }

status=0
python3 bench/stream_first_event.py "$bin" 30 2 "first event" 1.5 || status=$?
# The same with a slow drip (20 ms before each of the ~12 events): the gap between the first
# text_delta and completed shows the deltas are passed on as they arrive, not buffered. Information.
steps=$(python3 -c 'import json; print(json.dumps({"script": [{"delay_ms": 20}] * 22}))')
post /_test/stream "$steps"
python3 bench/stream_first_event.py "$bin" 10 1 "slow drip, 20 ms per event" || status=$?
# The server's side: every stream came over the transport asked for, and each one completed.
curl -fsS "$base/_test/stats" > "$tmp/stats.json"
python3 - "$tmp/stats.json" $(( 2 * (30 + 2 + 10 + 1) )) <<'PY' || status=1
import json, sys
s, want = json.load(open(sys.argv[1]))["stream"], int(sys.argv[2])
ws, sse = s["requests_by_transport"].get("websocket", 0), s["requests_by_transport"].get("sse", 0)
ok = ws == sse == want // 2 and s["completed"] == want and s["scripted_steps_used"] == 22
print(f"emulator saw: {ws} websocket, {sse} sse, {s['completed']} completed (expected {want // 2}, {want // 2}, {want})"
      + ("" if ok else "  MISSED"))
sys.exit(0 if ok else 1)
PY
exit $status
