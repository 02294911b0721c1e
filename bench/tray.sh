#!/bin/sh
# `lanyard tray` with 20 slots on a private session bus beside a real StatusNotifierWatcher: its
# resident memory and the CPU it uses while idle (issue 34's budgets: RSS <= 40 MB, no CPU between
# polls and events), and how long a `lanyard switch` in a terminal takes to show in the menu as
# libdbusmenu's own client reads it (the issue asks for under 1 s). No reference tool runs a tray
# of its own here, so the figures are printed against those budgets; exits 1 when one is missed.
set -eu
bin=${LANYARD_BIN:-.build/release/lanyard}
case $bin in /*) ;; *) bin="$PWD/$bin" ;; esac
# A session bus of the bench's own (dbus-run-session), so the tray never shows on a real desktop.
if [ -z "${LANYARD_BENCH_TRAY_BUS:-}" ]; then
  LANYARD_BENCH_TRAY_BUS=1 LANYARD_BIN="$bin" exec dbus-run-session -- sh "$0"
fi
tool=$(dirname "$bin")/lanyard-test-tool
[ -x "$tool" ] || tool=.build/debug/lanyard-test-tool
watcher=/usr/bin/status-notifier-watcher dumper=/usr/libexec/dbusmenu-dumper
for t in "$watcher" "$dumper" "$tool"; do [ -x "$t" ] || { echo "tray: $t is missing (scripts/deps.sh, swift build)" >&2; exit 1; }; done
tmp=$(mktemp -d)
export HOME="$tmp/home" XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_RUNTIME_DIR="$tmp/run" XDG_STATE_HOME="$tmp/state"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" "$XDG_CONFIG_HOME/lanyard" && chmod 700 "$XDG_RUNTIME_DIR"
# Usage requests fail at once (nothing listens on port 1): the figures are the tray's own.
printf '[store]\nbackend = file\n[provider.openai]\nusage-base-url = http://127.0.0.1:1/\n' > "$XDG_CONFIG_HOME/lanyard/config.ini"
printf 'bench passphrase\n' > "$tmp/pass"; chmod 600 "$tmp/pass"
export LANYARD_PASSPHRASE_FILE="$tmp/pass"
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; "$bin" store lock >/dev/null 2>&1; rm -rf "$tmp"' EXIT
# Set-up without the bus: doctor would start a keyring on it.
DBUS_SESSION_BUS_ADDRESS=disabled: "$bin" store init >/dev/null
DBUS_SESSION_BUS_ADDRESS=disabled: "$tool" file-put bench 20 >/dev/null
DBUS_SESSION_BUS_ADDRESS=disabled: "$bin" doctor --repair >/dev/null || true
DBUS_SESSION_BUS_ADDRESS=disabled: "$bin" switch bench-0 >/dev/null
"$watcher" >/dev/null 2>&1 & pids="$pids $!"
"$bin" tray 2>"$tmp/tray.log" & tray=$!; pids="$pids $tray"
name="org.kde.StatusNotifierItem-$tray-1"
i=0
until gdbus call --session --dest org.kde.StatusNotifierWatcher --object-path /StatusNotifierWatcher \
      --method org.freedesktop.DBus.Properties.Get org.kde.StatusNotifierWatcher RegisteredStatusNotifierItems 2>/dev/null | grep -q "$name"; do
  i=$((i + 1)); [ $i -lt 200 ] || { echo "tray: the item never registered" >&2; cat "$tmp/tray.log" >&2; exit 1; }
  sleep 0.05
done
# Let the first round of usage requests end and the idle worker threads exit (libdispatch ends
# them after a few idle seconds), then count: ticks of utime + stime over 10 s.
sleep 10
ticks() { awk '{ print $14 + $15 }' "/proc/$tray/stat"; }
# CPU time in ns (schedstat) and wake-ups (voluntary context switches), summed over the threads.
cpu_ns() { cat /proc/"$tray"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { print s }'; }
wakeups() { cat /proc/"$tray"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s }'; }
if [ -n "${LANYARD_BENCH_STRACE:-}" ]; then  # where idle time goes, when there is any
  timeout 10 strace -f -tt -p "$tray" -o "$LANYARD_BENCH_STRACE" 2>/dev/null || true
fi
t0=$(ticks); n0=$(cpu_ns); w0=$(wakeups); sleep 10; t1=$(ticks); n1=$(cpu_ns); w1=$(wakeups)
rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$tray/status")
# Switch latency: `lanyard switch` to the dump showing the slot checked, 10 times.
: > "$tmp/latency"
for k in 1 2 3 4 5 6 7 8 9 10; do
  python3 - "$bin" "bench-$k" "$dumper" "$name" >> "$tmp/latency" <<'PY'
import subprocess, sys, time
binary, slot, dumper, name = sys.argv[1:]
start = time.monotonic()
subprocess.run([binary, "switch", slot], check=True, stdout=subprocess.DEVNULL)
while True:
    out = subprocess.run([dumper, f"--dbus-name={name}", "--dbus-object=/MenuBar"], capture_output=True, text=True).stdout
    entry = out.split(f"'{slot} ", 1)
    if len(entry) == 2 and '"toggle-state": 1' in entry[1].split('"id"', 1)[0]:
        break
    if time.monotonic() - start > 10:
        sys.exit(f"tray: the switch to {slot} never showed")
print(f"{(time.monotonic() - start) * 1000:.0f}")
PY
done
python3 - "$rss" "$t0" "$t1" "$tmp/latency" "$n0" "$n1" "$w0" "$w1" <<'PY'
import statistics, sys
rss_kb, t0, t1, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
n0, n1, w0, w1 = (int(x) for x in sys.argv[5:9])
latencies = [int(x) for x in open(path).read().split()]
rss_mb, idle = rss_kb / 1024, t1 - t0
print(f"tray, 20 slots: RSS {rss_mb:.1f} MB (budget 40); CPU while idle: {idle} ticks in 10 s (budget 0), "
      f"{(n1 - n0) / 10 / 1000:.0f} us/s in {(w1 - w0) / 10:.1f} wake-ups/s (libdispatch's 1 Hz workqueue monitor)")
print(f"switch in a terminal -> in the dumped menu: median {statistics.median(latencies):.0f} ms, "
      f"max {max(latencies)} ms over {len(latencies)} (a dump itself included; the issue asks under 1000 ms)")
sys.exit(0 if rss_mb <= 40 and idle == 0 and max(latencies) < 1000 else 1)
PY
