"""First-event latency of `lanyard ask --json` over WebSocket and over SSE (run by bench/stream.sh).

usage: stream_first_event.py BIN RUNS WARMUP TITLE [TARGET]

Runs `BIN ask --json --transport T hi` RUNS times per transport, alternating websocket and sse so
both share the machine's noise, after WARMUP untimed runs of each. Each run is timed with
time.monotonic_ns() from just before the spawn to the arrival of the first `text_delta` line and of
the `completed` line on its stdout (read unbuffered, line by line). A run fails loudly unless it
exits 0 within 10 s, its first event is `connected` over the requested transport (reconnection 0), no later
event reconnects, and it completes with text. Prints the table under TITLE and the ws/sse ratio of the medians; with
TARGET, exits 1 when that first-event ratio is above it (and always when a run fails).
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time


def run_once(binary, transport):
    start = time.monotonic_ns()
    proc = subprocess.Popen([binary, "ask", "--json", "--transport", transport, "hi"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    watchdog = threading.Timer(10, proc.kill)  # a hung stream fails the run instead of the bench
    watchdog.start()
    first_delta = completed = None
    events, errors = [], []
    buf = b""
    fd = proc.stdout.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            now = time.monotonic_ns()
            try:
                event = json.loads(line)
            except ValueError:
                errors.append(f"not JSON: {line[:200]!r}")
                continue
            events.append(event)
            kind = event.get("type")
            if kind == "text_delta" and first_delta is None:
                first_delta = now
            elif kind == "completed" and completed is None:
                completed = now
    stderr = proc.stderr.read().decode(errors="replace")
    status = proc.wait()
    watchdog.cancel()
    connected = [e for e in events if e.get("type") == "connected"]
    if status != 0:
        errors.append(f"exit status {status}")
    if not events or events[0].get("type") != "connected":
        errors.append(f"first event is not connected: {events[:1]}")
    elif events[0].get("transport") != transport or events[0].get("reconnection") != 0:
        errors.append(f"asked for {transport}, first connected event is {events[0]}")
    if len(connected) > 1:
        errors.append(f"reconnected: {connected}")
    if first_delta is None:
        errors.append("no text_delta event")
    if completed is None:
        errors.append("no completed event")
    else:
        response = next(e for e in events if e.get("type") == "completed").get("response", {})
        if response.get("status") != "completed" or not response.get("output_text"):
            errors.append(f"completed without text: {response}")
    if errors:
        sys.exit(f"stream: `lanyard ask --json --transport {transport} hi` failed: {'; '.join(errors)}\n"
                 f"  events: {events}\n  stderr: {stderr.strip()}")
    return (first_delta - start) / 1e6, (completed - start) / 1e6


def p90(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def main():
    binary, runs, warmup, title = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    target = float(sys.argv[5]) if len(sys.argv) > 5 else None
    transports = ["websocket", "sse"]
    for _ in range(warmup):
        for t in transports:
            run_once(binary, t)
    results = {t: ([], []) for t in transports}
    for i in range(runs):
        # Alternate which goes first so neither always follows the other.
        for t in (transports if i % 2 == 0 else transports[::-1]):
            delta, done = run_once(binary, t)
            results[t][0].append(delta)
            results[t][1].append(done)
    print(f"== {title}: ms from spawning `lanyard ask --json hi`, {runs} runs per transport "
          f"(alternating, after {warmup} warm-up run{'s' if warmup != 1 else ''} each) ==")
    print(f"{'transport':<11}{'first text_delta':>20}{'completed':>22}")
    print(f"{'':<11}{'median':>10}{'p90':>10}{'median':>11}{'p90':>11}")
    medians = {}
    for t in transports:
        first, done = results[t]
        medians[t] = (statistics.median(first), statistics.median(done))
        print(f"{t:<11}{medians[t][0]:10.2f}{p90(first):10.2f}{medians[t][1]:11.2f}{p90(done):11.2f}")
    ratio = medians["websocket"][0] / medians["sse"][0]
    done_ratio = medians["websocket"][1] / medians["sse"][1]
    missed = target is not None and ratio > target
    goal = f"target <= {target}" if target is not None else "information"
    print(f"ws/sse first text_delta (median): {ratio:.2f} ({goal}){'  MISSED' if missed else ''}")
    print(f"ws/sse completed (median): {done_ratio:.2f} (information)")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
