#!/usr/bin/env python3
"""The kill -9 driver of scripts/soak/crash.sh (issue 17 §1): read crash.sh's header first.

  crash.py WORKDIR KILLS     # run by crash.sh, which sets HOME/XDG_*, LANYARD_BIN, CRASH_KEYRING

Each round starts one Lanyard operation, SIGKILLs it after a random delay, waits until every
process of the run has ended, then checks the invariants and brings the slots back to the
baseline for the next round. Tokens are compared inside this process only: nothing here prints
or stores a token (logs keep output lengths and stderr, which carries none).
"""
import collections
import ctypes
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORK = sys.argv[1]
KILLS = int(sys.argv[2])
BIN = os.environ["LANYARD_BIN"]
KEYRING = os.environ.get("CRASH_KEYRING") == "1"
# Where slots are stored: the file store, or (CRASH_BACKEND=secret-service) the keyring.
PRIMARY = os.environ.get("CRASH_BACKEND", "file")
if PRIMARY not in ("file", "secret-service") or (PRIMARY == "secret-service" and not KEYRING):
    sys.exit(f"crash: CRASH_BACKEND={PRIMARY} needs " + ("gnome-keyring" if PRIMARY == "secret-service" else "file or secret-service"))
SEED = int(os.environ.get("CRASH_SEED") or random.SystemRandom().randrange(1 << 31))
rng = random.Random(SEED)
ENV = dict(os.environ)
for k in ("CRASH_SEED", "LANYARD_PASSPHRASE_FILE", "LANYARD_ASKPASS", "LANYARD_ACCOUNT"):
    ENV.pop(k, None)
DATA = ENV["XDG_DATA_HOME"] + "/lanyard"
STATE = ENV["XDG_STATE_HOME"] + "/lanyard"
RECOVERY = STATE + "/recovery"
LOGS = WORK + "/logs"
BUNDLES = WORK + "/bundles"
DUE_CONFIG = WORK + "/config-due"   # XDG_CONFIG_HOME for agent rounds: every slot is due
MAX_WINDOW = 0.150                  # kill delays are drawn from 0 .. min(150 ms, the op's length)
CMD_TIMEOUT = 60

# Slots: a1, a2 refreshed and switched; r1 <-> r2 renamed; x1 logged out/in; e1 (and everything)
# exported/imported; m1 migrated between the file store and the Secret Service (keyring only).
BASE = ["a1", "a2", "x1", "e1"] + (["m1"] if KEYRING else [])
RENAMED = ("r1", "r2")
ALL_NAMES = BASE + list(RENAMED)
EMAIL = {s: f"{s}@crash.test" for s in BASE} | {"r1": "r@crash.test", "r2": "r@crash.test"}

OPS = {"refresh": 4, "agent-once": 1, "agent": 1, "rename": 2, "switch": 1, "export": 1, "import": 1,
       "logout": 1, "login": 1, "remove": 1, "codex-export": 1} | ({"migrate": 2} if KEYRING else {})
CODEX_HOME = WORK + "/codex"

os.makedirs(LOGS, exist_ok=True)
os.makedirs(BUNDLES, exist_ok=True)
os.makedirs(CODEX_HOME, exist_ok=True)


# --- helpers -------------------------------------------------------------------------------------
class Result:
    def __init__(self, args, rc, out, err, secs):
        self.args, self.rc, self.out, self.err, self.secs = args, rc, out, err, secs

    def brief(self):
        e = " | ".join(line for line in self.err.strip().splitlines()[:3])[:240]
        return f"`lanyard {' '.join(self.args)}` exit {self.rc}" + (f" ({e})" if e else "")


def run(args, env=None, timeout=CMD_TIMEOUT):
    t0 = time.monotonic()
    try:
        p = subprocess.run([BIN] + args, env=env or ENV, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return Result(args, p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"), time.monotonic() - t0)
    except subprocess.TimeoutExpired as e:
        return Result(args, "timeout", "", (e.stderr or b"").decode(errors="replace"), time.monotonic() - t0)


def jrun(args, env=None):
    r = run(args + ["--json"], env)
    try:
        r.json = json.loads(r.out) if r.out.strip() else None
    except ValueError:
        r.json = None
    return r


BASE_URL = None


def http(path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE_URL + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def stats():
    return http("/_test/stats")


def login(slot, kill_after=None, code_delay=None):
    """`lanyard login SLOT`, approved through the hook. With kill_after (seconds), SIGKILLs it that
    long after the approval (with a `code_delay` s delay injected on the code exchange) and returns
    the kill record; otherwise waits and returns the Result."""
    errf = f"{LOGS}/login-{slot}.err"
    t0 = time.monotonic()
    with open(errf, "w") as ef:
        p = subprocess.Popen([BIN, "login", slot], stdout=subprocess.DEVNULL, stderr=ef, stdin=subprocess.DEVNULL, env=ENV)
    code = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with open(errf) as f:
            txt = f.read()
        # The code line is complete once the line after it is there.
        m = re.search(r"^    ([A-Z0-9-]+)$", txt, re.M) if "Waiting for approval" in txt else None
        if m:
            code = m.group(1)
            break
        if p.poll() is not None:
            break
        time.sleep(0.005)
    approved = None
    if code:
        if code_delay is not None:
            http("/_test/fault", {"endpoint": "oauth_token", "type": "delay", "seconds": round(code_delay, 3)})
        http("/_test/approve", {"user_code": code, "email": EMAIL[slot]})
        approved = time.monotonic()
    if kill_after is not None:
        time.sleep(kill_after)
        alive = p.poll() is None
        if alive:
            os.kill(p.pid, signal.SIGKILL)
        p.wait()
        return {"alive": alive, "delay": kill_after, "rc": p.returncode, "workers_killed": 0}
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = "timeout"
    with open(errf) as f:
        err = f.read()
    r = Result(["login", slot], rc, "", "" if rc == 0 else err[-400:], time.monotonic() - t0)
    r.after_approval = time.monotonic() - approved if approved else None
    return r


# --- processes of this run -----------------------------------------------------------------------
REAPER = os.environ.get("SOAK_REAPER_PID", str(os.getpid()))


def descends_from_reaper(pid):
    """Whether pid is a descendant of this run's subreaper (reaper.py), which adopts every orphan.
    Lanyard's processes are not dumpable, so their environment cannot tell whose they are.
    An ancestor that exits during the walk (a killed agent reaped while its refresh workers run
    on) is not the end: the walk starts again from pid, which has been reparented by then. Giving
    up there let wait_quiet miss a killed agent's workers and check stores they were still
    writing (a make check under two CPU hogs saw a refresh token "rotated" that way)."""
    for _ in range(10):
        p = str(pid)
        for _ in range(64):
            if p == REAPER:
                return True
            try:
                with open(f"/proc/{p}/status") as f:
                    p = re.search(r"^PPid:\s*(\d+)", f.read(), re.M).group(1)
            except (OSError, AttributeError):
                break  # pid itself, or an ancestor, has just exited
            if int(p) <= 1:
                return False
        else:
            return False
        if not os.path.exists(f"/proc/{pid}"):
            return False
    return False


def our_procs():
    """lanyard* processes of this run: descendants of the subreaper, zombies included."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
            if not comm.startswith("lanyard"):
                continue
            with open(f"/proc/{d}/status") as f:
                status = f.read()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        state = re.search(r"^State:\s*(\S)", status, re.M).group(1)
        ppid = int(re.search(r"^PPid:\s*(\d+)", status, re.M).group(1))
        if descends_from_reaper(d):
            found.append({"pid": int(d), "comm": comm, "state": state, "ppid": ppid, "cmd": cmd or comm})
    return found


def kill_workers(slot=None):
    n = 0
    for p in our_procs():
        words = p["cmd"].split()
        if p["state"] != "Z" and "refresh-worker" in words and (slot is None or slot in words):
            try:
                os.kill(p["pid"], signal.SIGKILL)
                n += 1
            except ProcessLookupError:
                pass
    return n


def wait_quiet(timeout=20.0):
    """Waits until no process of this run is alive (seen twice in a row, 50 ms apart); returns the
    ones still alive after timeout."""
    deadline = time.monotonic() + timeout
    quiet = 0
    while True:
        alive = [p for p in our_procs() if p["state"] != "Z"]
        quiet = 0 if alive else quiet + 1
        if quiet >= 2 or time.monotonic() > deadline:
            return alive
        time.sleep(0.05 if not alive else 0.01)


def spawn_kill(args, window, env=None, workers=False, worker_slot=None):
    """Starts `lanyard ARGS`, SIGKILLs it after uniform(0, window) s (and, with workers, the
    refresh workers of worker_slot, or all). Returns the kill record."""
    delay = rng.uniform(0, window)
    with open(f"{LOGS}/cur.out", "wb") as out, open(f"{LOGS}/cur.err", "wb") as err:
        p = subprocess.Popen([BIN] + args, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env or ENV)
        time.sleep(delay)
        alive = p.poll() is None
        killed_workers = 0
        if alive:
            os.kill(p.pid, signal.SIGKILL)
            if workers:
                killed_workers = kill_workers(worker_slot)
        p.wait()
    return {"alive": alive, "delay": delay, "rc": p.returncode, "workers_killed": killed_workers}


# --- recovery files and the kernel keyring -------------------------------------------------------
AGE_HEADER = b"age-encryption.org/v1\n"


def read_recovery_file(path):
    """A recovery file's credential document: an age file encrypted to the store's recipients
    (opened with stock age and the store's identity.txt), or clear JSON from before."""
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.startswith(AGE_HEADER):
        return json.loads(raw)
    p = subprocess.run(["age", "-d", "-i", DATA + "/identity.txt", path], capture_output=True)
    if p.returncode != 0:
        raise ValueError("age -d: " + p.stderr.decode(errors="replace")[:200])
    return json.loads(p.stdout)


_keyutils = None
last_families = None   # the server's token families as token_view last read them


def escrowed(slot):
    """What waits for `slot` in the kernel user keyring (RefreshEscrow: key `lanyard-refreshed:DATA:SLOT`), or None."""
    global _keyutils
    if _keyutils is None:
        try:
            _keyutils = ctypes.CDLL("libkeyutils.so.1")
            _keyutils.keyctl_search.restype = ctypes.c_long
            _keyutils.keyctl_read_alloc.restype = ctypes.c_long
        except OSError:
            _keyutils = False
    if not _keyutils:
        return None
    serial = _keyutils.keyctl_search(ctypes.c_int(-4), b"user", f"lanyard-refreshed:{DATA}:{slot}".encode(), ctypes.c_int(0))
    if serial < 0:
        return None
    buf = ctypes.c_void_p()
    n = _keyutils.keyctl_read_alloc(ctypes.c_int32(serial), ctypes.byref(buf))
    if n < 0 or not buf.value:
        return None
    data = ctypes.string_at(buf.value, n)
    ctypes.CDLL(None).free(buf)
    return data


def tokens_in_clear(families=None):
    """Files under Lanyard's folders of the home that hold a refresh token the server issued, in
    clear (exec folders aside: `lanyard exec` hands its command an auth.json by design)."""
    families = families if families is not None else http("/_test/tokens")["families"]
    issued = [rt["refresh_token"] for fam in families for rt in fam["refresh_tokens"]]
    base_dir = os.path.dirname(ENV["XDG_DATA_HOME"])
    found = []
    for top in ("data/lanyard", "state/lanyard", "run/lanyard", "config/lanyard"):
        for dirpath, _dirs, files in os.walk(f"{base_dir}/{top}"):
            if "/run/lanyard/exec" in dirpath:
                continue
            for n in files:
                path = os.path.join(dirpath, n)
                try:
                    with open(path, "rb") as f:
                        raw = f.read()
                except OSError:
                    continue
                if any(t.encode() in raw for t in issued if t):
                    found.append(os.path.relpath(path, base_dir))
    return found


# --- what the stores hold, against what the server considers current ----------------------------
def read_copies():
    """Every stored refresh token: [(where, slot, token)], where = file | secret-service | recovery."""
    copies, notes = [], []
    store = DATA + "/store.age"
    if os.path.exists(store):
        p = subprocess.run(["age", "-d", "-i", DATA + "/identity.txt", store], capture_output=True)
        if p.returncode == 0:
            for slot, cred in json.loads(p.stdout)["slots"].items():
                copies.append(("file", slot, (cred.get("tokens") or {}).get("refresh_token")))
        else:
            notes.append("store.age did not decrypt: " + p.stderr.decode(errors="replace")[:200])
    if KEYRING:
        for slot in ALL_NAMES:
            p = subprocess.run(["secret-tool", "lookup", "xdg:schema", "dev.lanyard.Credential", "slot", slot],
                               capture_output=True, env=ENV)
            if p.returncode == 0 and p.stdout.strip():
                try:
                    copies.append(("secret-service", slot, (json.loads(p.stdout).get("tokens") or {}).get("refresh_token")))
                except ValueError:
                    notes.append(f"keyring item {slot} is not JSON")
    if os.path.isdir(RECOVERY):
        for name in sorted(os.listdir(RECOVERY)):
            if name.endswith(".json"):
                try:
                    doc = read_recovery_file(f"{RECOVERY}/{name}")
                    copies.append(("recovery", name[:-5], (doc.get("tokens") or {}).get("refresh_token")))
                except (OSError, ValueError) as e:
                    notes.append(f"recovery/{name} unreadable: {e}")
    # Refreshed tokens that no file took (a slot in the keyring: no recipient to encrypt to) wait
    # in the kernel keyring: they count as the slot's recovery copy.
    for slot in ALL_NAMES:
        held = escrowed(slot)
        if held is not None:
            try:
                copies.append(("recovery", slot, (json.loads(held).get("tokens") or {}).get("refresh_token")))
            except ValueError as e:
                notes.append(f"kernel keyring's copy of {slot} unreadable: {e}")
    return copies, notes


def token_view():
    """[(where, slot, family, server state)] for every stored copy (never the token itself)."""
    server = {}
    global last_families
    families = last_families = http("/_test/tokens")["families"]
    for fam in families:
        for rt in fam["refresh_tokens"]:
            server[rt["refresh_token"]] = (fam["family"], "revoked" if fam["revoked"] else rt["state"])
    copies, notes = read_copies()
    return [(w, s, *server.get(t, (None, "none" if not t else "unknown"))) for w, s, t in copies], notes


def fmt_copies(view, slot=None):
    return ", ".join(f"{w}:{s}={st}" for w, s, _f, st in view if slot is None or s == slot) or "no copy"


# --- registry ------------------------------------------------------------------------------------
def listing():
    r = jrun(["list"])
    if r.rc != 0 or not isinstance(r.json, dict) or "slots" not in r.json:
        return None, r
    return {s["slot"]: s for s in r.json["slots"]}, r


def active_slot():
    r = jrun(["list"])
    return (r.json or {}).get("active")


# --- bookkeeping ---------------------------------------------------------------------------------
per_op = collections.defaultdict(collections.Counter)
repair_said = collections.Counter()
doctor_said = collections.Counter()
failures = []          # dicts: round, op, invariant, detail, round record
notes = collections.Counter()
cur = {}               # the current round's record


def fail(invariant, detail):
    failures.append({"round": cur.get("round"), "op": cur.get("op"), "invariant": invariant, "detail": detail,
                     "record": {k: v for k, v in cur.items() if k not in ("round", "op")}})
    with open(WORK + "/failures.jsonl", "a") as f:
        f.write(json.dumps(failures[-1]) + "\n")


def token_backlog(s):
    """Requests that reached the token endpoint minus those its handlers counted."""
    return s["requests"]["oauth_token"] - (s["refresh_requests"] + s["code_exchanges"] + s["code_exchange_errors"])


def wait_server_idle(backlog, timeout=2.0):
    """Waits until the token endpoint has handled every request that reached it: a killed client's
    request sleeping in an injected delay (at most 0.3 s) still rotates the token when the delay
    ends. Two consecutive quiet polls, so bytes still in the socket get counted first. A request
    cut off before its body was read is never counted by a handler: after `timeout` the new
    backlog is accepted (and counted in the notes). Returns the backlog to start the next round."""
    deadline = time.monotonic() + timeout
    quiet = 0
    while True:
        now = token_backlog(stats())
        quiet = quiet + 1 if now == backlog else 0
        if quiet >= 2:
            return backlog
        if time.monotonic() > deadline:
            notes["token requests cut off before a handler counted them"] += now - backlog
            return now
        time.sleep(0.03)


def clear_faults():
    http("/_test/faults/clear", {})


# --- set-up --------------------------------------------------------------------------------------
def setup():
    global BASE_URL, server, PUB, KEY, PASSFILE
    out = open(WORK + "/server.out", "w")
    server = subprocess.Popen([ROOT + "/.venv/bin/python", ROOT + "/Tests/Fixtures/oauth/chatgpt_emulator.py", "--port", "0",
                               "--exit-with-parent", "--log-level", "WARNING"], stdout=out, stderr=open(WORK + "/server.err", "w"))
    deadline = time.monotonic() + 20
    while True:
        with open(WORK + "/server.out") as f:
            line = f.read()
        if line.startswith("READY "):
            BASE_URL = line.split()[1]
            break
        if server.poll() is not None or time.monotonic() > deadline:
            sys.exit("crash: the emulator did not start: " + open(WORK + "/server.err").read()[-500:])
        time.sleep(0.05)
    common = (f"[store]\nbackend = {PRIMARY}\n[agent]\nnotify = false\njitter = 0\n[events]\nmax-bytes = 1073741824\n"
              f"[provider.openai]\nissuer = {BASE_URL}\nusage-base-url = {BASE_URL}\n")
    os.makedirs(ENV["XDG_CONFIG_HOME"] + "/lanyard", exist_ok=True)
    with open(ENV["XDG_CONFIG_HOME"] + "/lanyard/config.ini", "w") as f:
        f.write(common)
    os.makedirs(DUE_CONFIG + "/lanyard", exist_ok=True)
    with open(DUE_CONFIG + "/lanyard/config.ini", "w") as f:
        f.write(common + "[refresh]\nlead = 100000000\nlead-share = 1\n")   # every access token is within the lead
    r = run(["store", "init", "--no-passphrase"])
    if r.rc != 0:
        sys.exit("crash: store init failed: " + r.brief())
    http("/_test/config", {"interval": 0})
    for s in BASE + ["r1"]:
        r = login(s)
        if r.rc != 0:
            sys.exit("crash: set-up login failed: " + r.brief())
    run(["switch", "a1"])
    KEY = WORK + "/bundle-key.txt"
    subprocess.run(["age-keygen", "-o", KEY], capture_output=True, check=True)
    PUB = subprocess.run(["age-keygen", "-y", KEY], capture_output=True, check=True, text=True).stdout.strip()
    PASSFILE = WORK + "/passphrase"
    with open(PASSFILE, "w") as f:
        f.write("crash-soak-bundle\n")
    os.chmod(PASSFILE, 0o600)


def timed(args, env=None, expect=0):
    r = run(args, env)
    if r.rc != expect:
        sys.exit("crash: calibration: " + r.brief())
    return r.secs


def calibrate():
    """How long each operation takes un-killed (median of 3), so kills land inside it; also checks
    that each works at all."""
    due = dict(ENV, XDG_CONFIG_HOME=DUE_CONFIG)
    pp = dict(ENV, LANYARD_PASSPHRASE_FILE=PASSFILE)
    cal = collections.defaultdict(list)
    for i in range(3):
        cal["refresh"].append(timed(["refresh", "a1"]))
        cal["rename"].append(timed(["rename", "r1", "r2"]))
        cal["rename"].append(timed(["rename", "r2", "r1"]))
        cal["switch"].append(timed(["switch", "a2"]))
        cal["switch"].append(timed(["switch", "a1"]))
        b = f"{BUNDLES}/cal{i}.age"
        cal["export-recipient"].append(timed(["export", "--to", b, "--recipient", PUB]))
        cal["import-recipient"].append(timed(["import", b, "--yes", "--identity", KEY]))
        cal["logout"].append(timed(["logout", "x1"]))
        r = login("x1")
        if r.rc != 0:
            sys.exit("crash: calibration: " + r.brief())
        cal["remove"].append(timed(["remove", "x1", "--yes"]))
        cal["codex-export"].append(timed(["codex", "export", "a1"], dict(ENV, CODEX_HOME=CODEX_HOME)))
        r = login("x1")
        if r.rc != 0:
            sys.exit("crash: calibration: " + r.brief())
        cal["login"].append(r.after_approval)
        cal["agent-once"].append(timed(["agent", "--once"], due))
        if KEYRING:
            cal["migrate"].append(timed(["store", "migrate", "--to", "secret-service", "m1"]))
            cal["migrate"].append(timed(["store", "migrate", "--to", "file", "m1"]))
    b = f"{BUNDLES}/cal-pass.age"
    cal["export-passphrase"].append(timed(["export", "--to", b], pp))
    cal["import-passphrase"].append(timed(["import", b, "--yes"], pp))
    # login: from the approval to the end
    for _ in range(2):
        r = login("x1")
        if r.rc != 0 or r.after_approval is None:
            sys.exit("crash: calibration: " + r.brief())
        cal["login"].append(r.after_approval)
    if KEYRING:
        run(["store", "migrate", "--to", "secret-service", "m1"])   # m1 starts in the keyring
    return {k: statistics.median(v) for k, v in cal.items()}


# --- operations ----------------------------------------------------------------------------------
def signed_in(reg):
    return sorted(s for s, r in reg.items() if r.get("state") == "signed-in")


def window(name, extra=0.0):
    return min(MAX_WINDOW, CAL[name] * 1.2 + extra)


def op_refresh(reg):
    slot = rng.choice(signed_in(reg))
    delay = rng.uniform(0, 0.3)
    http("/_test/fault", {"endpoint": "oauth_token", "type": "delay", "seconds": round(delay, 3)})
    kw = rng.random() < 0.5
    cur.update(args=f"refresh {slot}", server_delay=round(delay, 3), kill_worker=kw)
    return spawn_kill(["refresh", slot], window("refresh", delay), workers=kw, worker_slot=slot)


def op_agent(reg, once):
    delays = [round(rng.uniform(0, 0.3), 3) for _ in signed_in(reg)]
    for d in delays:
        http("/_test/fault", {"endpoint": "oauth_token", "type": "delay", "seconds": d})
    kw = rng.random() < 0.5
    cur.update(args="agent --once" if once else "agent", server_delays=delays, kill_worker=kw)
    env = dict(ENV, XDG_CONFIG_HOME=DUE_CONFIG)
    return spawn_kill(["agent", "--once"] if once else ["agent"], window("agent-once", 0.3) if once else MAX_WINDOW,
                      env=env, workers=kw)


def op_rename(reg):
    old = next((n for n in RENAMED if n in reg), "r1")
    new = RENAMED[1] if old == RENAMED[0] else RENAMED[0]
    cur.update(args=f"rename {old} {new}")
    return spawn_kill(["rename", old, new], window("rename"))


def op_switch(reg):
    active = active_slot()
    target = rng.choice([s for s in signed_in(reg) if s != active] or signed_in(reg))
    cur.update(args=f"switch {target}")
    return spawn_kill(["switch", target], window("switch"))


def bundle_args(kind, path, importing):
    if kind == "recipient":
        return (["import", path, "--yes", "--identity", KEY] if importing else ["export", "--to", path, "--recipient", PUB]), ENV
    return (["import", path, "--yes"] if importing else ["export", "--to", path]), dict(ENV, LANYARD_PASSPHRASE_FILE=PASSFILE)


def op_export(reg, kill_import):
    kind = "passphrase" if rng.random() < 0.25 else "recipient"
    path = f"{BUNDLES}/r{cur['round']}.age"
    exp, env = bundle_args(kind, path, False)
    imp, _ = bundle_args(kind, path, True)
    cur.update(args=f"{'import' if kill_import else 'export'} ({kind} bundle, every slot)")
    if not kill_import:
        rec = spawn_kill(exp, window("export-" + kind), env=env)
        wait_quiet()
        if os.path.exists(path):
            # A bundle the killed export left must be whole: importing it back must work.
            r = run(imp, env)
            cur["import_after"] = r.rc
            if r.rc != 0:
                fail("export", "the bundle a killed export left does not import: " + r.brief())
        return rec
    r = run(exp, env)
    if r.rc != 0:
        fail("export", "un-killed export before the import failed: " + r.brief())
        return {"alive": False, "delay": 0, "rc": None, "workers_killed": 0}
    return spawn_kill(imp, window("import-" + kind), env=env)


def op_logout(reg):
    cur.update(args="logout x1")
    return spawn_kill(["logout", "x1"], window("logout"))


def op_login(reg):
    delay = rng.uniform(0, 0.3)
    kill = rng.uniform(0, min(MAX_WINDOW, CAL["login"] * 1.2 + delay))
    cur.update(args="login x1 (signed in; killed after the approval)", server_delay=round(delay, 3))
    return login("x1", kill_after=kill, code_delay=delay)


def op_remove(reg):
    cur.update(args="remove x1 --yes")
    return spawn_kill(["remove", "x1", "--yes"], window("remove"))


def op_codex_export(reg):
    slot = rng.choice(signed_in(reg))
    cur.update(args=f"codex export {slot}")
    rec = spawn_kill(["codex", "export", slot], window("codex-export"), env=dict(ENV, CODEX_HOME=CODEX_HOME))
    wait_quiet()
    # Codex's auth.json is written whole or not at all, and private.
    path = CODEX_HOME + "/auth.json"
    if os.path.exists(path):
        try:
            with open(path) as f:
                tokens = json.load(f).get("tokens") or {}
            if not tokens.get("refresh_token"):
                fail("codex", "auth.json holds no refresh token")
        except ValueError as e:
            fail("codex", f"auth.json a killed export left does not parse: {e}")
        if os.stat(path).st_mode & 0o077:
            fail("codex", f"auth.json is {oct(os.stat(path).st_mode & 0o777)}")
    return rec


def op_migrate(reg):
    backend = (reg.get("m1") or {}).get("backend", "file")
    target = "file" if backend == "secret-service" else "secret-service"
    cur.update(args=f"store migrate --to {target} m1")
    return spawn_kill(["store", "migrate", "--to", target, "m1"], window("migrate"))


def run_op(op, reg):
    return {"refresh": op_refresh, "rename": op_rename, "switch": op_switch, "logout": op_logout, "login": op_login,
            "migrate": op_migrate, "agent-once": lambda r: op_agent(r, True), "agent": lambda r: op_agent(r, False),
            "export": lambda r: op_export(r, False), "import": lambda r: op_export(r, True), "remove": op_remove,
            "codex-export": op_codex_export}[op](reg)


# --- invariants ----------------------------------------------------------------------------------
reported_leftovers = set()


def generic(text):
    """A doctor message with slot names and GLib's random temporary-file suffixes left out, so the
    summary counts kinds of problem, not instances."""
    text = re.sub(r"\b(a1|a2|r1|r2|x1|e1|m1)\b", "SLOT", text)
    return re.sub(r"\b(registry\.json|store\.age)\.[A-Za-z0-9]{6}\b", r"\1.XXXXXX", text)


def check(rec, delta):
    """Invariants 1-3 and the recovery folder after one round. Returns slots to sign in again."""
    relogin = set()
    # 1. the registry parses
    reg, r = listing()
    if reg is None:
        fail("1 list", r.brief())
        return relogin | set(BASE)
    # Tokens held vs. the server's view, before any command touches them.
    view, vnotes = token_view()
    for n in vnotes:
        fail("3 tokens", n)
    # Right after the kill, recovery files included: no refresh token in clear at rest.
    clear = tokens_in_clear(last_families)
    if clear:
        fail("4 at rest", f"files holding a refresh token in clear: {clear}")
    cur["copies"] = fmt_copies(view)
    expected_loss = set()
    for slot in signed_in(reg):
        backend = reg[slot].get("backend")
        live = [c for c in view if c[1] == slot and c[0] in (backend, "recovery")]
        if not live or any(c[3] == "active" for c in live):
            continue  # no copy at all: a registry entry without its item, which doctor reports
        if rec["workers_killed"] and delta > 0 and all(c[3] == "rotated" for c in live):
            # The worker died after its request reached the server and before the recovery file
            # was written: the new token existed only in the answer in flight, no client can keep it.
            expected_loss.add(slot)
            per_op[cur["op"]]["lost in flight (worker killed)"] += 1
        else:
            fail("3 tokens", f"{slot} ({reg[slot].get('state')}) holds no current refresh token: {fmt_copies(view, slot)}")
    # 2. doctor, or doctor --repair
    d = jrun(["doctor"])
    problems = (d.json or {}).get("problems") if isinstance(d.json, dict) else None
    if problems is None:
        fail("2 doctor", d.brief())
    elif problems:
        per_op[cur["op"]]["repairs"] += 1
        for p in problems:
            doctor_said[generic(p)] += 1
        rep = jrun(["doctor", "--repair"])
        said = (rep.json or {}).get("repaired") or []
        cur["doctor"] = problems
        cur["repaired"] = said
        for s in said:
            repair_said[generic(str(s))] += 1
        if rep.rc != 0 or (rep.json or {}).get("problems") != []:
            fail("2 doctor", f"doctor --repair: exit {rep.rc}, problems {(rep.json or {}).get('problems')}")
        again = jrun(["doctor"])
        if (again.json or {}).get("problems") != []:
            fail("2 doctor", f"doctor reported {problems}; --repair said {said} (exit {rep.rc}); "
                             f"a second doctor still reports {(again.json or {}).get('problems')}")
        reg, r = listing()
        if reg is None:
            fail("1 list", "after repair: " + r.brief())
            return relogin | set(BASE)
        view, _ = token_view()
    # Registered slots that share a token family would present each other's rotated token.
    fams = collections.defaultdict(set)
    for w, s, fam, st in view:
        if fam is not None and s in reg and reg[s].get("state") == "signed-in" and w in (reg[s].get("backend"), "recovery"):
            fams[fam].add(s)
    for fam, slots in fams.items():
        if len(slots) > 1:
            fail("3 tokens", f"registered slots {sorted(slots)} hold the same token family ({fmt_copies(view)}; "
                             f"doctor said {cur.get('doctor')}, repair {cur.get('repaired')})")
    # Rename: either name, never both or neither.
    names = [n for n in RENAMED if n in reg]
    if len(names) != 1:
        states = ", ".join(f"{n}={reg[n].get('state')}" for n in names)
        fail("2 rename", f"registry has {names or 'neither r1 nor r2'} ({states}); "
                         f"doctor said {cur.get('doctor')}, repair {cur.get('repaired')}")
    for s in BASE:
        # A removal of x1 may have happened or not; either way doctor found nothing left of half of it.
        if s not in reg and not (s == "x1" and cur.get("op") == "remove"):
            fail("2 registry", f"{s} is gone from the registry")
    # Sessions lost in flight are signed in again before the checks (no refresh of a dead token).
    for s in expected_loss:
        r = login(s)
        if r.rc != 0:
            fail("heal", "login after a loss in flight: " + r.brief())
    # 3. every signed-in slot: token, then refresh
    targets = signed_in(reg)

    def probe(slot):
        t = run(["token", slot])
        ok_t = t.rc == 0 and t.out.strip() != ""
        f = run(["refresh", slot]) if ok_t else None
        return slot, t, f

    with ThreadPoolExecutor(max_workers=4) as pool:
        for slot, t, f in pool.map(probe, targets):
            if t.rc != 0 or not t.out.strip():
                fail("3 token", t.brief())
                relogin.add(slot)
            elif f.rc != 0:
                fail("3 refresh", f.brief())
                relogin.add(slot)
    for s, rr in reg.items():
        if rr.get("state") not in ("signed-in", "signed-out") and s not in expected_loss:
            fail("3 state", f"{s} is {rr.get('state')} ({rr.get('last_error')})")
            relogin.add(s)
    # The recovery folder is empty once every slot has been refreshed.
    left = sorted(os.listdir(RECOVERY)) if os.path.isdir(RECOVERY) else []
    new = [n for n in left if n not in reported_leftovers]
    if new:
        reported_leftovers.update(new)
        fail("4 recovery", f"recovery folder holds {new} after doctor --repair and a refresh of every slot")
    esc = [s for s in ALL_NAMES if escrowed(s) is not None and "escrow:" + s not in reported_leftovers]
    if esc:
        reported_leftovers.update("escrow:" + s for s in esc)
        fail("4 recovery", f"refreshed tokens of {esc} still wait in the kernel keyring after doctor --repair and a refresh of every slot")
    return relogin


def heal(relogin):
    """Back to the baseline: one of r1/r2, every base slot signed in, an active slot, m1 in one
    backend only."""
    reg, _ = listing()
    if reg is None:
        r = jrun(["doctor", "--repair"])
        reg, r2 = listing()
        if reg is None:
            fail("heal", "registry unreadable even after doctor --repair: " + r2.brief())
            return
    names = [n for n in RENAMED if n in reg]
    if len(names) == 2:
        keep = next((n for n in names if reg[n].get("state") == "signed-in" and n not in relogin), names[0])
        for n in names:
            if n != keep:
                r = run(["remove", n, "--yes"])
                notes["heal: removed a second rename slot"] += 1
                if r.rc != 0:
                    fail("heal", r.brief())
        names = [keep]
    want = set(BASE) | set(names or ["r1"])
    # A slot whose family the server revoked after a check passed (another slot's reuse) is dead too.
    view, _ = token_view()
    for s in signed_in(reg):
        if not any(c[3] == "active" for c in view if c[1] == s and c[0] in (reg[s].get("backend"), "recovery")):
            relogin.add(s)
    for s in sorted(want):
        if s not in reg or reg[s].get("state") != "signed-in" or s in relogin:
            if s == "x1" and cur.get("op") in ("logout", "login") and s not in relogin:
                notes["re-login after logout"] += 1
            r = login(s)
            if r.rc != 0:
                fail("heal", r.brief())
    act = active_slot()
    if act is None or act not in want:
        run(["switch", "a1"])
    if KEYRING:
        view, _ = token_view()
        reg, _ = listing()
        where = {w for w, s, _f, _st in view if s == "m1" and w != "recovery"}
        if reg and "m1" in reg and len(where) > 1:
            other = next(w for w in where if w != reg["m1"]["backend"])
            notes["heal: migrated m1 over its stray copy"] += 1
            r = run(["store", "migrate", "--to", other, "m1"])
            if r.rc != 0:
                fail("heal", r.brief())


# --- main ----------------------------------------------------------------------------------------
def main():
    global CAL
    t_start = time.monotonic()
    setup()
    CAL = calibrate()
    clear_faults()
    print(f"crash: {KILLS} kills, seed {SEED}, against {BASE_URL}; slots {' '.join(BASE)} r1 in the {PRIMARY} store; "
          f"Secret Service: {'gnome-keyring (migrate on)' if KEYRING else 'none (migrate skipped)'}")
    print("crash: un-killed ms: " + ", ".join(f"{k} {v * 1000:.0f}" for k, v in sorted(CAL.items())))
    ops = list(OPS)
    weights = [OPS[o] for o in ops]
    kills = rounds = 0
    backlog = token_backlog(stats())
    t_loop = time.monotonic()
    while kills < KILLS and rounds < KILLS * 4:
        rounds += 1
        op = rng.choices(ops, weights)[0]
        cur.clear()
        cur.update(round=rounds, op=op)
        reg, r = listing()
        if reg is None:
            fail("1 list", "at the start of the round: " + r.brief())
            heal(set(BASE))
            continue
        before = stats()["refreshes_succeeded"]
        rec = run_op(op, reg)
        stuck = wait_quiet()
        if stuck:
            fail("4 processes", f"still running 20 s after the kill: {[p['cmd'] for p in stuck]}")
            for p in stuck:
                os.kill(p["pid"], signal.SIGKILL)
        backlog = wait_server_idle(backlog)
        clear_faults()
        delta = stats()["refreshes_succeeded"] - before
        cur.update(kill_ms=round(rec["delay"] * 1000, 1), alive_at_kill=rec["alive"], exit=rec["rc"],
                   workers_killed=rec["workers_killed"], server_refreshes=delta)
        per_op[op]["rounds"] += 1
        if rec["alive"]:
            kills += 1
            per_op[op]["kills"] += 1
            if delta > 0:
                per_op[op]["server completed a refresh"] += 1
            if rec["workers_killed"]:
                per_op[op]["worker killed too"] += 1
        else:
            per_op[op]["finished before the kill"] += 1
        with open(LOGS + "/rounds.jsonl", "a") as f:
            f.write(json.dumps(dict(cur)) + "\n")
        relogin = check(rec, delta)
        heal(relogin)
    loop_secs = time.monotonic() - t_loop

    # --- end: server counters, processes, files ---
    time.sleep(0.2)
    s1 = stats()
    cur.clear()
    cur.update(round="end", op="-")
    if s1["refresh_reused"] != 0:
        fail("4 reuse", f"server refresh_reused = {s1['refresh_reused']} (refresh_invalidated {s1['refresh_invalidated']})")
    left = []
    deadline = time.monotonic() + 3
    while True:
        left = our_procs()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if left:
        fail("4 processes", "left at the end: " + "; ".join(f"{p['pid']} {p['state']} {p['cmd']}" for p in left[:5]))
        for p in left:
            try:
                os.kill(p["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
    orphans = []
    if os.environ.get("SOAK_ORPHANS_LOG"):
        with open(os.environ["SOAK_ORPHANS_LOG"]) as f:
            orphans = [line.split() for line in f if line.strip()]
        with open(WORK + "/orphans-at-check", "w") as f:
            f.write(str(len(orphans)))
    rec_left = sorted(os.listdir(RECOVERY)) if os.path.isdir(RECOVERY) else []
    if rec_left:
        fail("4 recovery", f"recovery folder at the end: {rec_left}")
    esc_left = [s for s in ALL_NAMES if escrowed(s) is not None]
    if esc_left:
        fail("4 recovery", f"refreshed tokens left in the kernel keyring at the end: {esc_left}")
    # No refresh token in clear at rest: recovery files are age files.
    clear = tokens_in_clear()
    if clear:
        fail("4 at rest", f"files holding a refresh token in clear: {clear}")
    # Files a killed write left behind (GLib's temp files NAME.XXXXXX), for information.
    expected = re.compile(r"^(data/lanyard(/(registry\.json(\.prev|\.lock)?|store\.age(\.prev|\.lock)?|identity\.txt|locks(/[a-z0-9._-]+\.lock)?))?"
                          r"|state/lanyard(/(events\.jsonl(\.lock|\.1)?|recovery))?|run/lanyard(/exec)?)$")
    stray = []
    base_dir = os.path.dirname(ENV["XDG_DATA_HOME"])
    for top in ("data/lanyard", "state/lanyard", "run/lanyard"):
        for dirpath, dirs, files in os.walk(f"{base_dir}/{top}"):
            for n in dirs + files:
                rel = os.path.relpath(os.path.join(dirpath, n), base_dir)
                if not expected.match(rel):
                    stray.append(rel)

    # --- summary ---
    total = time.monotonic() - t_start
    print(f"crash: {kills} kills in {rounds} rounds, {loop_secs:.1f} s of rounds ({total:.1f} s in all)")
    cols = ["rounds", "kills", "finished before the kill", "worker killed too", "server completed a refresh",
            "lost in flight (worker killed)", "repairs"]
    short = ["rounds", "kills", "missed", "+worker", "srv-done", "lost-ok", "repairs"]
    print(f"  {'operation':<11}" + "".join(f"{c:>9}" for c in short))
    for op in ops:
        c = per_op[op]
        print(f"  {op:<11}" + "".join(f"{c[k]:>9}" for k in cols))
    tot = collections.Counter()
    for c in per_op.values():
        tot.update(c)
    print(f"  {'total':<11}" + "".join(f"{tot[k]:>9}" for k in cols))
    print(f"  (missed: the operation ended before the kill; srv-done: kills during which the server completed a "
          f"refresh; lost-ok: slots whose refresh token was lost because the refresh worker itself was killed after its "
          f"request reached the server and before the recovery file was written; signed in again, not counted as failures)")
    print(f"server: refreshes_succeeded {s1['refreshes_succeeded']}, refresh_reused {s1['refresh_reused']}, "
          f"refresh_invalidated {s1['refresh_invalidated']}, code_exchanges {s1['code_exchanges']}")
    print(f"repairs needed: {tot['repairs']}" + ("; doctor said: " + "; ".join(f"{k} x{v}" for k, v in doctor_said.most_common()) if doctor_said else ""))
    if repair_said:
        print("  repair did: " + "; ".join(f"{k} x{v}" for k, v in repair_said.most_common()))
    for k, v in sorted(notes.items()):
        print(f"note: {k}: {v}")
    lanyard_orphans = [o for o in orphans if len(o) > 1 and o[1].startswith("lanyard")]
    print(f"processes: {len(left)} left at the end; {len(lanyard_orphans)} lanyard processes outlived a killed parent "
          f"(reaped by the subreaper, as designed for refresh workers)")
    if stray:
        print(f"note: files a killed write left ({len(stray)}): " + ", ".join(stray[:8]) + (" …" if len(stray) > 8 else ""))
    by_inv = collections.Counter(f["invariant"] for f in failures)
    print("invariant failures: " + (", ".join(f"{k} x{v}" for k, v in sorted(by_inv.items())) if failures else "none"))
    for f in failures[:12]:
        r = f["record"]
        print(f"FAILED round {f['round']} {f['op']} [{f['invariant']}]: {f['detail']}")
        if r:
            print("    round: " + ", ".join(f"{k}={v}" for k, v in r.items() if k not in ("copies", "doctor", "repaired"))
                  + (f", copies before checks: {r['copies']}" if r.get("copies") else ""))
    if len(failures) > 12:
        print(f"… {len(failures) - 12} more in {WORK}/failures.jsonl")
    server.terminate()
    try:
        server.wait(5)
    except subprocess.TimeoutExpired:
        server.kill()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
