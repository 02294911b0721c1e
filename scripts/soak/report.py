#!/usr/bin/env python3
"""The summary and invariant checks of scripts/soak/concurrency.sh (see its header for what each
invariant means and which exit statuses are allowed). Reads the work folder the soak filled:

  report.py WORKDIR SECONDS LOCK_TIMEOUT HUNG_LOOPS ELAPSED_MS

Prints a table of every command kind (runs, exit statuses, bad output, max and p95 duration), the
server's and the event log's refresh counts, then one line per invariant; exits 1 when one failed.
Never prints a token (the logs hold only output lengths).
"""
import collections
import glob
import json
import os
import sys

work, secs, lock_timeout, hung, elapsed_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
logs = os.path.join(work, "logs")

# Allowed exit statuses per command kind (the soak's header explains why only 0).
ALLOWED = collections.defaultdict(lambda: {0}, {"xstatus": {3}})

# kind -> list of (status, microseconds, check)
runs = collections.defaultdict(list)
for path in sorted(glob.glob(os.path.join(logs, "*"))):
    name = os.path.basename(path)
    if "." in name or name.startswith("setup-"):
        continue
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 6:
                continue
            kind, _slot, status, us, _length, check = parts
            runs[kind].append((int(status), int(us), check))


def load(name, default=None):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def lines(name):
    try:
        with open(os.path.join(work, name)) as f:
            return [line.rstrip("\n") for line in f if line.strip()]
    except OSError:
        return []


failures = []
notes = []

# --- 5. statuses (and the table) ----------------------------------------------------------------
order = ["token", "git-credential", "exec", "usage", "status", "switch", "pin", "unpin",
         "rename", "rtoken", "rlogin", "logout", "xstatus", "login", "xtoken", "agent", "list", "final-token", "doctor", "events"]
kinds = sorted(runs, key=lambda k: (order.index(k) if k in order else len(order), k))
print(f"{'command':<15} {'runs':>6} {'exit statuses':<24} {'bad out':>7} {'p95 ms':>7} {'max ms':>7}")
unexpected = []
bad_output = []
slow = []
for kind in kinds:
    rs = runs[kind]
    statuses = collections.Counter(s for s, _, _ in rs)
    durations = sorted(us for _, us, _ in rs)
    p95 = durations[min(len(durations) - 1, int(0.95 * len(durations)))] / 1000
    worst = durations[-1] / 1000
    bad = sum(1 for _, _, c in rs if c == "0")
    st = " ".join(f"{s}:{n}" for s, n in sorted(statuses.items()))
    flag = ""
    wrong = {s: n for s, n in statuses.items() if s not in ALLOWED[kind]}
    if wrong:
        unexpected.append(f"{kind} " + ", ".join(f"exit {s} x{n}" for s, n in sorted(wrong.items())))
        flag += " !status"
    if bad:
        bad_output.append(f"{kind} x{bad}")
        flag += " !output"
    if worst > lock_timeout * 1000:
        slow.append(f"{kind} {worst / 1000:.1f} s")
        flag += " !slow"
    print(f"{kind:<15} {len(rs):>6} {st:<24} {bad:>7} {p95:>7.0f} {worst:>7.0f}{flag}")
total = sum(len(r) for r in runs.values())
print(f"{'total':<15} {total:>6}   in {elapsed_ms / 1000:.1f} s of load")

# Excerpts of unexpected stderr (never secrets: stderr carries none).
if unexpected or bad_output:
    shown = 0
    for path in sorted(glob.glob(os.path.join(logs, "*.err"))):
        if path.endswith("login-err") or path.endswith(".cur-err"):
            continue
        with open(path, errors="replace") as f:
            blocks = f.read().split("--- ")[1:]
        for b in blocks:
            if shown >= 6:
                break
            head = b.splitlines()
            words = head[0].split() if head else []
            if len(words) >= 4 and words[2] == "exit" and words[3].isdigit() and int(words[3]) in ALLOWED[words[0]]:
                continue  # an allowed status (e.g. xstatus 3)
            print("  stderr " + os.path.basename(path)[:-4] + ": " + " | ".join(x for x in head[:4] if x.strip())[:300])
            shown += 1

# --- 1. reuse -----------------------------------------------------------------------------------
stats = load("stats.json", {})
reused = stats.get("refresh_reused")
invalid = stats.get("refresh_invalidated")
print(f"server: refresh_requests {stats.get('refresh_requests')}, refreshes_succeeded {stats.get('refreshes_succeeded')}, "
      f"refresh_errors {stats.get('refresh_errors')}, refresh_reused {reused}, refresh_invalidated {invalid}, "
      f"usage_ok {stats.get('usage_ok')}, usage_unauthorized {stats.get('usage_unauthorized')}, code_exchanges {stats.get('code_exchanges')}")
if reused != 0 or invalid != 0:
    failures.append(f"1 reuse: server saw refresh_reused={reused}, refresh_invalidated={invalid}")

# --- 2. registry --------------------------------------------------------------------------------
listing = load("list.json")
list_status = [s for s, _, _ in runs.get("list", [])]
if list_status != [0] or not isinstance(listing, dict) or "slots" not in listing:
    failures.append(f"2 registry: `lanyard list --json` exit {list_status} or did not parse")
else:
    slots = listing["slots"]
    names = set(slots) if isinstance(slots, dict) else {s.get("slot") for s in slots}
    records = slots if isinstance(slots, dict) else {s.get("slot"): s for s in slots}
    base = {"s1", "s2", "s3", "s4", "s5", "x1"}
    renamed = names & {"r1", "r2"}
    if len(renamed) != 1:
        failures.append(f"2 registry: rename slot present as {sorted(renamed) or 'neither r1 nor r2'}")
    if names - renamed != base:
        failures.append(f"2 registry: slots are {sorted(names)}, expected s1..s5, x1 and r1|r2")
    states = {n: (r.get("state") if isinstance(r, dict) else None) for n, r in records.items()}
    not_in = {n: s for n, s in states.items() if s != "signed-in"}
    if not_in:
        failures.append("2 registry: slots not signed in: " + ", ".join(f"{n}={s}" for n, s in sorted(not_in.items())))
    final = runs.get("final-token", [])
    if len(final) != len(names) or any(s != 0 or c != "1" for s, _, c in final):
        failures.append(f"2 registry: final `lanyard token SLOT`: {len(final)} of {len(names)} slots, "
                        f"statuses {sorted(collections.Counter(s for s, _, _ in final).items())}")
    print(f"registry: {len(names)} slots ({', '.join(sorted(names))}), states {dict(collections.Counter(states.values()))}")

# --- 3. latency ---------------------------------------------------------------------------------
if slow or hung:
    failures.append(f"3 latency: over {lock_timeout:.0f} s: {', '.join(slow) or '-'}; loops hung at the end: {hung}")

# --- 4. leftovers -------------------------------------------------------------------------------
slot_names = {"s1", "s2", "s3", "s4", "s5", "r1", "r2", "x1"}
allowed = {
    "data/lanyard", "data/lanyard/registry.json", "data/lanyard/registry.json.prev", "data/lanyard/registry.json.lock",
    "data/lanyard/store.age", "data/lanyard/store.age.prev", "data/lanyard/store.age.lock", "data/lanyard/identity.txt",
    "data/lanyard/locks", "data/lanyard/locks/agent.lock",
    "state/lanyard", "state/lanyard/events.jsonl", "state/lanyard/events.jsonl.lock", "state/lanyard/events.jsonl.1",
    # The last usage every program saw, per slot (what the tray and `status` read), and its lock.
    "state/lanyard/usage.json", "state/lanyard/usage.json.lock",
    "state/lanyard/recovery",
    "run/lanyard", "run/lanyard/exec",
} | {f"data/lanyard/locks/{s}.lock" for s in slot_names} | {f"data/lanyard/locks/{s}.signin.lock" for s in slot_names}
files = lines("files.txt")
# Only Lanyard's own folders are checked; other entries in the XDG folders are reported as a note
# (lanyard-net's Foundation makes $XDG_DATA_HOME/<folder of the binary>, e.g. data/debug).
ours = ("data/lanyard", "state/lanyard", "run/lanyard")
stray = [f for f in files if f not in allowed and f.split("/")[:2] == f.split("/")[:2] and "/".join(f.split("/")[:2]) in ours]
outside = [f for f in files if "/".join(f.split("/")[:2]) not in ours]
if outside:
    notes.append("outside Lanyard's folders (not checked): " + ", ".join(outside[:5]))
if stray:
    failures.append("4 leftovers: unexpected files: " + ", ".join(stray[:10]) + (" …" if len(stray) > 10 else ""))
locks = sorted(os.path.basename(f) for f in files if f.startswith("data/lanyard/locks/"))
doctor = load("doctor.json")
doctor_status = [s for s, _, _ in runs.get("doctor", [])]
problems = doctor.get("problems") if isinstance(doctor, dict) else None
if doctor_status != [0] or problems != []:
    failures.append(f"4 leftovers: `lanyard doctor --json` exit {doctor_status}, problems {problems}")
procs = lines("leftover-procs.txt")
orphans = lines("orphans-at-check.txt")
lanyard_orphans = [o for o in orphans if o.split()[1:2] and o.split()[1].startswith("lanyard")]
if procs:
    failures.append("4 leftovers: processes after the stop: " + "; ".join(procs[:5]))
if lanyard_orphans:
    failures.append("4 leftovers: lanyard processes outlived their parent (reaped by the subreaper): " + "; ".join(lanyard_orphans[:5]))
print(f"files: locks/ {' '.join(locks)}; stray {len(stray)}; doctor problems {problems}; "
      f"processes left {len(procs)}; orphans reaped {len(orphans)} ({len(lanyard_orphans)} lanyard)")

# --- 5. statuses --------------------------------------------------------------------------------
if unexpected:
    failures.append("5 statuses: " + "; ".join(unexpected))
if bad_output:
    failures.append("5 statuses: exit 0 with bad output: " + "; ".join(bad_output))

# --- 6. events ----------------------------------------------------------------------------------
events = []
for line in lines("events.jsonl"):
    try:
        events.append(json.loads(line))
    except ValueError:
        failures.append("6 events: a line of `lanyard events --json` does not parse")
        break
kinds_seen = collections.Counter(e.get("event") for e in events)
refresh_events = kinds_seen.get("refresh", 0)
by_source = collections.Counter(e.get("source") for e in events if e.get("event") == "refresh")
succeeded = stats.get("refreshes_succeeded")
print(f"events: {refresh_events} refresh ({', '.join(f'{k} {v}' for k, v in sorted(by_source.items()))}), "
      f"{kinds_seen.get('transition', 0)} transition, {kinds_seen.get('error', 0)} error; server refreshes_succeeded {succeeded}")
if refresh_events != succeeded:
    failures.append(f"6 events: {refresh_events} refresh events vs {succeeded} refreshes at the server")
transitions = [e for e in events if e.get("event") in ("transition", "error")]
for e in transitions[:4]:
    print(f"  {e.get('event')} {e.get('slot')}: " + ", ".join(f"{k}={e.get(k)}" for k in ("from", "to", "reason", "code", "message") if e.get(k) is not None)[:200])

for n in notes:
    print("note: " + n)
names = ["1 reuse", "2 registry", "3 latency", "4 leftovers", "5 statuses", "6 events"]
print("invariants: " + "  ".join(f"{n} {'FAIL' if any(f.startswith(n) for f in failures) else 'ok'}" for n in names))
for f in failures:
    print("FAILED " + f)
sys.exit(1 if failures else 0)
