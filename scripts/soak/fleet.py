#!/usr/bin/env python3
"""The fleet soak's driver: scripts/soak/fleet.sh runs it (under reaper.py, with the venv's python)
and its header says what it does and checks. Tokens are never printed: they are compared by
SHA-256 digest, and only digests are kept in memory.

  fleet.py SECONDS      # environment: FLEET_TMP, LANYARD_BIN, SOAK_REAPER_PID, SOAK_ORPHANS_LOG,
                        # FLEET_SEED, FLEET_CALLERS
"""
import base64
import collections
import hashlib
import json
import os
import random
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SECS = int(sys.argv[1])
TMP = os.environ["FLEET_TMP"]
BIN = os.environ["LANYARD_BIN"]
REAPER = int(os.environ.get("SOAK_REAPER_PID") or os.getpid())
ORPHANS = os.environ.get("SOAK_ORPHANS_LOG")
SEED = int(os.environ.get("FLEET_SEED") or random.randrange(1 << 30))
CALLERS = int(os.environ.get("FLEET_CALLERS") or 2)  # token loops per machine
MACHINES = ["m1", "m2", "m3", "m4"]
FLEET, SLOT, EMAIL = "soak", "work", "fleet-soak@example.com"
LIFETIME = 60           # seconds an access token lives
CALL_TIMEOUT = 150      # a command still running after this is hung (a killed lock holder's lease is 70 s)
CUT_SECONDS = 30
# [http] timeout: the fleet lock's lease is twice this plus 10 s, 20 s here, in proportion to the
# 60-second tokens (the default, 70 s, outlasts a token: one killed lock holder would stop every
# refresh for longer than a token lives).
HTTP_TIMEOUT = 5
CONVERGE_LIMIT = 30     # seconds allowed for convergence (10 s asked, with margin for a loaded machine)
ETCD = f"{TMP}/etcd"
# The removed-machine attacker: a fifth machine d joins, is removed with `fleet remove`
# during the run, and the attacker keeps d's age identity (and so its signing key). 0 turns it off.
REMOVED = os.environ.get("FLEET_REMOVED_ATTACKER", "1") != "0"
# What a person runs on every machine once the log is restored after a fork (words; empty: nothing).
RESOLVE = os.environ.get("FLEET_RESOLVE", "").split()
FORGE = os.path.abspath("Tests/Fixtures/fleet/forge.py")
rng = random.Random(SEED)

START = time.time()
LOAD_START = START  # set when the load starts; times printed are relative to it
DEADLINE = START + SECS
print_lock = threading.Lock()
fault_log = open(f"{TMP}/faults.log", "a")


def now():
    return time.time()


def rel(t):
    return t - LOAD_START


def note(text):
    with print_lock:
        line = f"[{rel(now()):6.1f} s] {text}"
        print(line, flush=True)
        fault_log.write(line + "\n")
        fault_log.flush()


def digest(text):
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()[:16]


def first_line(text, limit=240):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


# --- the emulator ---------------------------------------------------------------------------------
BASE = None


def http(path, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    for attempt in range(3):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"null")
        except OSError:
            if attempt == 2:
                raise
            time.sleep(1)


def stats():
    return http("/_test/stats")


# --- etcd: the cluster script and a reader through the JSON gateway ------------------------------
def cluster(*args, timeout=120):
    return subprocess.run(["scripts/etcd-cluster.sh", args[0], ETCD, *args[1:]], capture_output=True, text=True,
                          timeout=timeout)


ENV_ETCD = {}


def load_etcd_env():
    with open(f"{ETCD}/env") as f:
        for line in f:
            m = re.match(r"^(LANYARD_TEST_ETCD_\w+)='(.*)'$", line.strip())
            if m:
                ENV_ETCD[m.group(1)] = m.group(2)


def etcd_range(key, prefix=False, keys_only=False):
    """A serializable range read (answers without a quorum too) from the first member that answers;
    None when none does."""
    ctx = ssl.create_default_context(cafile=ENV_ETCD["LANYARD_TEST_ETCD_CA"])
    ctx.load_cert_chain(ENV_ETCD["LANYARD_TEST_ETCD_CERT"], ENV_ETCD["LANYARD_TEST_ETCD_KEY"])
    body = {"key": base64.b64encode(key.encode()).decode(), "serializable": True, "keys_only": keys_only}
    if prefix:
        end = key[:-1] + chr(ord(key[-1]) + 1)
        body["range_end"] = base64.b64encode(end.encode()).decode()
    for url in ENV_ETCD["LANYARD_TEST_ETCD_ENDPOINTS"].split(","):
        try:
            req = urllib.request.Request(url + "/v3/kv/range", data=json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(req, timeout=3, context=ctx) as r:
                answer = json.loads(r.read())
            return [(base64.b64decode(kv["key"]).decode(), base64.b64decode(kv.get("value", "")), int(kv.get("create_revision", 0)))
                    for kv in answer.get("kvs", [])]
        except (OSError, ValueError, KeyError):
            continue
    return None


def etcdctl_base():
    return ["etcdctl", "--endpoints", ENV_ETCD["LANYARD_TEST_ETCD_ENDPOINTS"], "--cacert", ENV_ETCD["LANYARD_TEST_ETCD_CA"],
            "--cert", ENV_ETCD["LANYARD_TEST_ETCD_CERT"], "--key", ENV_ETCD["LANYARD_TEST_ETCD_KEY"], "--dial-timeout=2s"]


class History:
    """Every change in etcd, in revision order, from a watch of every key (`etcdctl watch --rev`,
    started again from the next revision whenever it ends: etcd keeps every revision here, nothing
    is compacted, so nothing is missed). Each event carries when it may have happened: [t_lo, t_hi], the time it
    arrived, or for events replayed after the watch was down, from when it went down to then.
    What the exits, secrecy and recovery checks judge by (with the attacker's own log)."""

    def __init__(self):
        self.events = []        # dicts: rev, t_lo, t_hi, key, value (bytes; None for a delete)
        self.last_rev = 0
        self.restarts = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.proc = None
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    LAG = 1.0   # how late a live event may arrive (a loaded machine)

    def run(self):
        down_since = START
        while not self.stop.is_set():
            cmd = etcdctl_base() + ["watch", "--prefix", "", "-w", "json", f"--rev={self.last_rev + 1}"]
            started = now()
            try:
                self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                             env={**os.environ, "ETCDCTL_API": "3"})
                for line in self.proc.stdout:
                    t = now()
                    try:
                        answer = json.loads(line)
                    except ValueError:
                        continue
                    with self.lock:
                        for ev in answer.get("Events") or []:
                            kv = ev.get("kv") or {}
                            rev = int(kv.get("mod_revision", 0))
                            if rev <= self.last_rev:
                                continue
                            # What arrives in the first seconds of a watch may be a replay of
                            # what happened while none ran.
                            lo = down_since if t - started < 2 else t - self.LAG
                            self.events.append({"rev": rev, "t_lo": min(lo, t), "t_hi": t,
                                                "key": base64.b64decode(kv.get("key", "")).decode(errors="replace"),
                                                "value": None if ev.get("type") == 1 else base64.b64decode(kv.get("value", ""))})
                            self.last_rev = rev
                self.proc.wait()
            except OSError:
                pass
            down_since = now()
            if self.stop.wait(0.5):
                return
            self.restarts += 1

    def close(self):
        self.stop.set()
        for _ in range(3):   # (a watch started just as it was told to stop is stopped too)
            p = self.proc
            if p and p.poll() is None:
                p.kill()
                p.wait()
            self.thread.join(1)
            if not self.thread.is_alive():
                return

    def caught_up(self, limit=30):
        """Waits until the watch has delivered every revision etcd has now."""
        r = subprocess.run(etcdctl_base() + ["get", "--prefix", "", "--keys-only", "--limit=1", "-w", "json"],
                           capture_output=True, timeout=30, env={**os.environ, "ETCDCTL_API": "3"})
        try:
            head = int(json.loads(r.stdout)["header"]["revision"])
        except (ValueError, KeyError):
            return False
        end = now() + limit
        while self.last_rev < head and now() < end:
            time.sleep(0.2)
        return self.last_rev >= head

    def of(self, key):
        with self.lock:
            return [e for e in self.events if e["key"] == key]

    def under(self, prefix):
        with self.lock:
            return [e for e in self.events if e["key"].startswith(prefix)]

    def during(self, key, t0, t1, earliest=None):
        """The states (events) `key` may have had at some moment in [t0, t1]: each from its
        earliest moment (`earliest(event)` when that knows better, else t_lo) to the latest moment
        of the next."""
        events = self.of(key)
        out = []
        for i, e in enumerate(events):
            start = (earliest(e) if earliest else None) or e["t_lo"]
            end = events[i + 1]["t_hi"] if i + 1 < len(events) else now()
            if start <= t1 and end >= t0:
                out.append(e)
        return out


history = None


# --- age decryption (X25519 recipients), to read the stores and etcd's copy without a process each --
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def age_identity(text):
    data = text.strip().lower().rsplit("1", 1)[1][:-6]
    acc = bits = 0
    out = bytearray()
    for c in data:
        acc = (acc << 5) | BECH32.index(c)
        bits += 5
        while bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
    return bytes(out[:32])


def b64raw(s):
    return base64.b64decode(s + b"=" * (-len(s) % 4))


def hkdf(ikm, salt, info):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(ikm)


def age_decrypt(data, identity):
    end = data.index(b"\n---")
    payload = data[data.index(b"\n", end + 1) + 1:]
    lines = data[:end].split(b"\n")
    if lines[0] != b"age-encryption.org/v1":
        raise ValueError("not an age file")
    key = X25519PrivateKey.from_private_bytes(identity)
    mine = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    i, file_key = 1, None
    while i < len(lines) and file_key is None:
        args = lines[i].split(b" ")
        i += 1
        body = b""
        while i < len(lines) and not lines[i].startswith(b"->"):
            body += lines[i]
            i += 1
        if len(args) < 3 or args[1] != b"X25519":
            continue
        share = b64raw(args[2])
        wrap = hkdf(key.exchange(X25519PublicKey.from_public_bytes(share)), share + mine, b"age-encryption.org/v1/X25519")
        try:
            file_key = ChaCha20Poly1305(wrap).decrypt(b"\0" * 12, b64raw(body), None)
        except InvalidTag:
            continue
    if file_key is None:
        raise ValueError("no stanza for this identity")
    aead = ChaCha20Poly1305(hkdf(file_key, payload[:16], b"payload"))
    rest, out, counter = payload[16:], b"", 0
    while True:
        chunk, rest = rest[:65536 + 16], rest[65536 + 16:]
        out += aead.decrypt(counter.to_bytes(11, "big") + (b"\x00" if rest else b"\x01"), chunk, None)
        counter += 1
        if not rest:
            return out


# --- machines -------------------------------------------------------------------------------------
class Machine:
    def __init__(self, name):
        self.name = name
        self.root = f"{TMP}/{name}"
        self.env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
        self.env.update(HOME=f"{self.root}/home", XDG_CONFIG_HOME=f"{self.root}/config", XDG_DATA_HOME=f"{self.root}/data",
                        XDG_STATE_HOME=f"{self.root}/state", XDG_RUNTIME_DIR=f"{self.root}/run", XDG_CACHE_HOME=f"{self.root}/cache")
        for d in ("home", "config/lanyard", "data", "state", "run", "cache"):
            os.makedirs(f"{self.root}/{d}", mode=0o700, exist_ok=True)
        self.agent = None
        self.agent_lock = threading.Lock()
        self.running = {}     # pid -> (Popen, kind): commands of the loops, for the caller kills
        self.cut = False

    def write_config(self, endpoints):
        text = (f"[store]\nbackend = file\n[provider.openai]\nissuer = {BASE}\nusage-base-url = {BASE}\n"
                f"[http]\ntimeout = {HTTP_TIMEOUT}\n[agent]\nnotify = false\n[events]\nmax-bytes = 1073741824\n"
                f"[fleet]\nname = {FLEET}\nmachine = {self.name}\nendpoints = {endpoints}\n"
                f"ca = {ENV_ETCD['LANYARD_TEST_ETCD_CA']}\ncert = {ENV_ETCD['LANYARD_TEST_ETCD_CERT']}\n"
                f"key = {ENV_ETCD['LANYARD_TEST_ETCD_KEY']}\n")
        path = f"{self.root}/config/lanyard/config.ini"
        with open(path + ".new", "w") as f:
            f.write(text)
        os.replace(path + ".new", path)  # commands starting meanwhile read the old file or the new one

    def run(self, *args, timeout=CALL_TIMEOUT):
        t0 = now()
        try:
            p = subprocess.run([BIN, *args], env=self.env, cwd=self.root, capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=timeout)
            return p.returncode, p.stdout, p.stderr, now() - t0
        except subprocess.TimeoutExpired as e:
            return None, e.stdout or "", e.stderr or "", now() - t0

    def must(self, *args):
        rc, out, err, _ = self.run(*args)
        if rc != 0:
            raise SystemExit(f"fleet: set-up: {self.name}: lanyard {' '.join(args)} exited {rc}: {first_line(err)}")
        return out

    def start_agent(self):
        with self.agent_lock:
            out = open(f"{self.root}/agent.log", "a")
            out.write(f"--- started at {rel(now()):.1f} s\n")
            out.flush()
            self.agent = subprocess.Popen([BIN, "agent"], env=self.env, cwd=self.root, stdin=subprocess.DEVNULL,
                                          stdout=out, stderr=out)
            out.close()

    def stop_agent(self, timeout=15):
        """SIGTERM, then SIGKILL after `timeout` s. Returns the exit status (None: it had to be killed)."""
        with self.agent_lock:
            p, self.agent = self.agent, None
        if p is None:
            return 0
        p.terminate()
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return None

    # What this machine holds: every refresh token in its store and recovery files (digests).
    def held(self):
        found, identity, key = [], None, None
        try:
            with open(f"{self.root}/data/lanyard/identity.txt") as f:
                key = age_identity(next(l for l in f if l.startswith("AGE-SECRET-KEY-")))
            with open(f"{self.root}/data/lanyard/store.age", "rb") as f:
                slots = json.loads(age_decrypt(f.read(), key))["slots"]
            rt = ((slots.get(SLOT) or {}).get("tokens") or {}).get("refresh_token")
            if rt:
                found.append(("store", digest(rt)))
            identity = ((slots.get("lanyard-fleet-identity") or {}).get("tokens") or {}).get("access_token")
        except (OSError, ValueError, KeyError, StopIteration, InvalidTag):
            pass  # mid-write or not there yet: the next sample sees it
        rec = f"{self.root}/state/lanyard/recovery"
        for name in (os.listdir(rec) if os.path.isdir(rec) else []):
            try:
                with open(f"{rec}/{name}", "rb") as f:
                    raw = f.read()
                # An age file encrypted to the store's recipients, or clear JSON from before.
                if raw.startswith(b"age-encryption.org/v1\n"):
                    if key is None:
                        continue
                    raw = age_decrypt(raw, key)
                rt = (json.loads(raw).get("tokens") or {}).get("refresh_token")
                if rt:
                    found.append(("recovery", digest(rt)))
            except (OSError, ValueError, InvalidTag):
                pass
        return found, identity


machines = {n: Machine(n) for n in MACHINES}
# d: a member until it is removed; no loops, no agent (a decommissioned runner), never in `machines`.
removed_machine = Machine("d") if REMOVED else None


# --- processes of this run --------------------------------------------------------------------------
def parent(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except OSError:
        return None


def ours(pid):
    """Whether `pid` descends from this run's subreaper (Lanyard's processes are not dumpable, so
    their environment cannot tell)."""
    hops = 0
    while pid and pid > 1 and hops < 64:
        if pid == REAPER:
            return True
        pid = parent(pid)
        hops += 1
    return False


def proc_info(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return comm, cmd, state
    except OSError:
        return None


def machine_of(pid):
    """The machine a process works for: its working folder (each machine's commands start in its own)."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return "?"
    for n, m in machines.items():
        if cwd == m.root or cwd.startswith(m.root + "/"):
            return n
    return "?"


def lanyard_procs():
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        info = proc_info(pid)
        if info and info[0].startswith("lanyard") and ours(pid):
            out.append((pid, *info))
    return out


class WorkerWatch:
    """Finds `lanyard-net refresh-worker` processes quickly: only new pids are read."""

    def __init__(self):
        self.known = {}

    def workers(self):
        found = []
        pids = {int(e) for e in os.listdir("/proc") if e.isdigit()}
        for pid in list(self.known):
            if pid not in pids:
                del self.known[pid]
        for pid in pids:
            if pid not in self.known:
                info = proc_info(pid)
                self.known[pid] = bool(info and info[0].startswith("lanyard") and "refresh-worker" in info[1] and ours(pid))
            if self.known[pid]:
                found.append(pid)
        return found


# --- bookkeeping ------------------------------------------------------------------------------------
calls = []              # one dict per command of the loops
killed_pids = set()     # processes this run sent SIGKILL
kills = collections.Counter()
worker_kills = []       # (time, machine)
count_history = []      # (time, the server's refreshes_succeeded), every 0.5 s
worker_kill_counts = [] # per worker kill: the server's refresh count when the worker was seen and 1.5 s after the kill
windows = collections.defaultdict(list)   # kind -> [(start, end, machine or None)]
members_down = set()
etcd_lock = threading.Lock()
reuses = []             # one dict per reuse the server saw
failures = []           # (invariant, text)
stop_load = threading.Event()
stop_faults = threading.Event()
stop_watch = threading.Event()    # the sampler and the reuse monitor run until convergence is checked
recovering = threading.Event()    # set while m1 signs the slot in again after a reuse
held_seen = collections.defaultdict(set)  # refresh-token digest -> where it was seen
cutoff = {}


def fail(invariant, text):
    failures.append((invariant, text))
    note(f"FAILURE ({invariant}): {text}")


def jwt_exp(token):
    try:
        part = token.strip().split(".")[1]
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))["exp"]
    except (IndexError, ValueError, KeyError):
        return None


def command(m, kind, args):
    """Runs one command of a loop, killable by the fault thread, and records it."""
    t0 = now()
    # --json: a failure is {"error": {"code", "message"}} on stdout, so it is judged by its code.
    p = subprocess.Popen([BIN, *args, "--json"], env=m.env, cwd=m.root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    m.running[p.pid] = (p, kind)
    hung = False
    try:
        out, err = p.communicate(timeout=CALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        hung = True
        p.kill()
        out, err = p.communicate()
    finally:
        m.running.pop(p.pid, None)
    t1 = now()
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    error = doc.get("error") if isinstance(doc, dict) and isinstance(doc.get("error"), dict) else {}
    rec = {"m": m.name, "kind": kind, "t0": t0, "t1": t1, "rc": p.returncode, "hung": hung,
           "killed": p.pid in killed_pids, "code": error.get("code"), "err": first_line(error.get("message") or err)}
    if p.returncode == 0 and kind == "token":
        tok = doc.get("access_token") if isinstance(doc, dict) else None
        tok = tok if isinstance(tok, str) else ""
        rec["ok_output"] = bool(tok) and tok.isprintable() and "\n" not in tok
        rec["digest"] = digest(tok)
        rec["exp"] = jwt_exp(tok)
    calls.append(rec)
    return rec


def token_loop(m):
    while now() < DEADLINE and not stop_load.is_set():
        command(m, "token", ["token", SLOT])
        stop_load.wait(rng.uniform(0.2, 1.0))


def refresh_loop():
    while True:
        if stop_load.wait(rng.uniform(4, 12)) or now() >= DEADLINE:
            return
        command(machines[rng.choice(MACHINES)], "refresh", ["refresh", SLOT])


# --- faults ---------------------------------------------------------------------------------------
watch = WorkerWatch()


def kill_pid(pid):
    killed_pids.add(pid)
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def fault_caller():
    running = [(m, pid, p, kind) for m in machines.values() for pid, (p, kind) in list(m.running.items())]
    if not running:
        return False
    m, pid, p, kind = rng.choice(running)
    if p.returncode is None:
        killed_pids.add(pid)
        p.send_signal(signal.SIGKILL)  # does nothing once the loop's thread has reaped it
        kills[f"{kind} caller"] += 1
        note(f"kill -9 `lanyard {kind}` on {m.name}")
        return True
    return False


def fault_worker():
    """Waits (up to 20 s) for a refresh worker, then kills it 0-250 ms after it appeared, so the kill
    lands before, during or after its request to the server."""
    end = now() + 20
    while now() < end and not stop_faults.is_set():
        found = watch.workers()
        if found:
            pid = rng.choice(found)
            # The count a second ago (the reuse monitor samples it): a worker seen just after its
            # answer is still counted as answered.
            before = next((c for t, c in reversed(count_history) if t <= now() - 1), count_history[0][1] if count_history else None)
            time.sleep(rng.uniform(0, 0.25))
            where = machine_of(pid)
            info = proc_info(pid)
            if info and info[2] != "Z" and kill_pid(pid):
                kills["refresh worker"] += 1
                worker_kills.append((now(), where))
                record = {"t": now(), "m": where, "before": before, "after": None}
                worker_kill_counts.append(record)
                note(f"kill -9 refresh worker on {where}")

                def after():
                    time.sleep(1.5)
                    record["after"] = refreshes_counted()

                threading.Thread(target=after, daemon=True).start()
                return True
            continue
        time.sleep(0.01)
    return False


def refreshes_counted():
    try:
        return stats()["refreshes_succeeded"]
    except Exception:
        return None


def fault_agent():
    m = machines[rng.choice(MACHINES)]
    with m.agent_lock:
        p = m.agent
        if p is None or p.poll() is not None:
            return False
        kill_pid(p.pid)
        m.agent = None
    p.wait()
    kills["agent"] += 1
    delay = rng.uniform(0.5, 3)
    note(f"kill -9 agent on {m.name} (restarted in {delay:.1f} s)")
    time.sleep(delay)
    if m.agent is None:
        m.start_agent()
    return True


def leader():
    r = cluster("leader", "3", timeout=60)
    return r.stdout.strip() if r.returncode == 0 else None


def kill_member(name, why):
    r = cluster("kill", name)
    if r.returncode != 0:
        fail("harness", f"etcd-cluster.sh kill {name}: {first_line(r.stderr)}")
        return False
    with etcd_lock:
        members_down.add(name)
    kills["etcd member"] += 1
    note(f"kill -9 etcd {name}{why}")
    return True


def restart_member(name):
    for attempt in range(3):
        r = cluster("restart", name, timeout=180)
        if r.returncode != 0:
            with open(f"{TMP}/etcd-restart-failures.log", "a") as f:
                f.write(f"--- {name} at {rel(now()):.1f} s:\n{r.stderr}\n")
            # The script can give up on a member that is in fact up (it checks from outside):
            # the member answering a linearizable read says it is.
            if cluster("health", "20", name, timeout=60).returncode == 0:
                note(f"etcd {name}: restart said {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}, "
                     "but it is healthy")
                r = None
        if r is None or r.returncode == 0:
            with etcd_lock:
                members_down.discard(name)
            note(f"etcd {name} restarted")
            return True
        note(f"etcd {name} did not restart (try {attempt + 1}): {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
        time.sleep(2)
    fail("harness", f"etcd member {name} could not be restarted")
    return False


def fault_member():
    with etcd_lock:
        if members_down:
            return False
    lead = leader()
    name = rng.choice(["m1", "m2", "m3"])
    t = now()
    if not kill_member(name, " (the leader)" if name == lead else ""):
        return False
    if name == lead:
        kills["etcd leader"] += 1
        windows["election"].append((t, t + 15, None))
    else:
        windows["member down"].append((t, None, None))
    down = rng.uniform(2, 8)

    def later():
        time.sleep(down)
        restart_member(name)
        if name != lead:
            windows["member down"][-1] = (t, now(), None)

    threading.Thread(target=later, daemon=True).start()
    return True


def fault_quorum():
    with etcd_lock:
        if members_down:
            return False
    # Never more than a fifth of the run without a quorum.
    if sum(e - s for s, e, _ in windows["no quorum"]) > 0.2 * max(1, now() - (DEADLINE - SECS)):
        return False
    hold = min(rng.uniform(5, 15), DEADLINE - now() - 2)
    if hold < 3:
        return False
    pair = rng.sample(["m1", "m2", "m3"], 2)
    if not kill_member(pair[0], " (1 of 2: no quorum)"):
        return False
    t = now()
    if not kill_member(pair[1], f" (2 of 2: no quorum for {hold:.0f} s)"):
        restart_member(pair[0])
        return False
    kills["quorum loss"] += 1
    time.sleep(hold)
    restart_member(pair[0])
    windows["no quorum"].append((t, now(), None))
    note(f"quorum back after {now() - t:.1f} s")
    restart_member(pair[1])
    return True


def dead_endpoints():
    ports = []
    socks = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        ports.append(s.getsockname()[1])
        socks.append(s)
    for s in socks:
        s.close()
    return ",".join(f"https://127.0.0.1:{p}" for p in ports)


def restart_agent(m):
    rc = m.stop_agent()
    if rc not in (0, None):
        fail("agents", f"{m.name}'s agent exited {rc} after SIGTERM")
    m.start_agent()


def cut_off(at, length):
    if stop_faults.wait(max(0, at - now())):
        return
    m = machines[rng.choice(MACHINES)]
    m.write_config(dead_endpoints())
    m.cut = True
    t = now()
    note(f"{m.name} cut off from etcd for {length:.0f} s (config.ini endpoints -> dead ports, agent restarted)")
    restart_agent(m)
    time.sleep(max(0, length - (now() - t)))
    m.write_config(ENV_ETCD["LANYARD_TEST_ETCD_ENDPOINTS"])
    m.cut = False
    restart_agent(m)
    cutoff.update(machine=m.name, start=t, end=now())
    windows["cut off"].append((t, now(), m.name))
    note(f"{m.name} reconnected after {now() - t:.1f} s")


def fault_loop():
    kinds = [(fault_caller, 3), (fault_worker, 2), (fault_agent, 1), (fault_member, 1.5), (fault_quorum, 0.5)]
    while not stop_faults.wait(rng.uniform(2, 6)):
        if now() >= DEADLINE - 1:
            return
        fn = rng.choices([k for k, _ in kinds], weights=[w for _, w in kinds])[0]
        try:
            fn()
        except Exception as e:  # a fault that could not be made is noted, not fatal
            note(f"fault {fn.__name__} failed: {e!r}")


# --- what the machines hold, and refresh-token reuse at the server ---------------------------------
identity_key = {}


def sample():
    """Every refresh-token digest held now: in each machine's store and recovery files, and etcd's copy."""
    now_held = collections.defaultdict(set)
    for m in machines.values():
        found, ident = m.held()
        for where, d in found:
            now_held[d].add(f"{m.name} {where}")
        if ident and "key" not in identity_key:
            identity_key["key"] = age_identity(ident)
    if "key" in identity_key:
        kvs = etcd_range(f"/lanyard/{FLEET}/slots/{SLOT}")
        for _, value, _ in kvs or []:
            try:
                doc = json.loads(age_decrypt(value, identity_key["key"]))
                rt = doc["credential"]["tokens"].get("refresh_token")
                if rt:
                    now_held[digest(rt)].add("etcd")
            except (ValueError, KeyError, InvalidTag):
                pass
    for d, where in now_held.items():
        held_seen[d] |= where
    return now_held


lock_heads = []   # [key, first seen, last seen]: which key owned the fleet lock, over time


def sample_lock():
    kvs = etcd_range(f"/lanyard/{FLEET}/locks/{SLOT}/", prefix=True, keys_only=True)
    if kvs is None:
        return
    t = now()
    head = min(kvs, key=lambda kv: kv[2])[0] if kvs else None
    if lock_heads and lock_heads[-1][0] == head:
        lock_heads[-1][2] = t
    else:
        lock_heads.append([head, t, t])


def sampler():
    while not stop_watch.wait(1.0):
        try:
            sample()
            sample_lock()
        except Exception as e:
            note(f"sampler: {e!r}")


def killed_worker_before(rec, window=90):
    """Whether a refresh worker was killed while the call waited or up to `window` s before: its
    lock key (held, or queued for the lock) outlives it by the lease's 20 s, and by more when
    etcd elects a leader meanwhile (every lease's time to live starts again then)."""
    return any(rec["t0"] - window <= t <= rec["t1"] for t, _ in worker_kills)


def examine_reuse(known_families):
    """Called when the server's refresh_reused went up: finds the revoked family and decides whether
    the reuse is the accepted loss ("lost-ok")."""
    held_now = sample()
    t = now()
    families = http("/_test/tokens")["families"]
    found = []
    for fam in families:
        if not fam["revoked"] or fam["family"] in known_families:
            continue
        known_families.add(fam["family"])
        last = fam["refresh_tokens"][-1]
        d = digest(last["refresh_token"])
        seen = sorted(held_seen.get(d, set()) | held_now.get(d, set()))
        end = now() + 5
        while any(w["after"] is None and w["t"] <= t for w in worker_kill_counts) and now() < end:
            time.sleep(0.1)
        # Kills that may have come after the server's answer: it counted a refresh between the
        # worker's start and just after the kill. Each explains one reuse at most.
        answered = [w for w in worker_kill_counts if w["t"] <= t and not w.get("explains")
                    and w["before"] is not None and w["after"] is not None and w["after"] > w["before"]]
        rec = {"t": t, "family": fam["family"], "successor_state": last["state"], "seen": seen,
               "worker_kills": sum(1 for w in worker_kill_counts if w["t"] <= t), "answered_kills": len(answered)}
        # The successor of the token presented twice is the family's newest refresh token: no
        # refresh spent it (it was active when the reuse revoked the family). Lost in flight when
        # nothing ever held it and a refresh worker had been killed after the server counted a refresh.
        rec["lost_ok"] = last["state"] == "invalidated" and not seen and bool(answered)
        if rec["lost_ok"]:
            answered[0]["explains"] = fam["family"]
            rec["kill"] = answered[0]
        found.append(rec)
    return found


def recover():
    """Signs the slot in again on m1 (login writes it to the fleet), then refreshes it once under the lock."""
    m1 = machines["m1"]
    end = now() + 240
    while now() < end:
        if m1.cut:
            time.sleep(1)
            continue
        m1.run("fleet", "sync")  # so m1's copy is the fleet's newest revision before it signs in
        with signin_lock:
            rc, err = login(m1)
        if rc != 0:
            note(f"recovery: login on m1 exited {rc}: {err}")
            time.sleep(2)
            continue
        for _ in range(60):
            rc, _, err, _ = m1.run("refresh", SLOT)
            if rc == 0:
                return True
            note(f"recovery: refresh on m1 exited {rc}: {first_line(err)}")
            if rc == 4:
                break  # signed out again meanwhile: sign in again
            time.sleep(2)
    return False


def reuse_monitor():
    handled = 0
    known_families = set()
    while not stop_watch.wait(0.5):
        try:
            counts = stats()
        except Exception:
            continue
        count_history.append((now(), counts["refreshes_succeeded"]))
        n = counts["refresh_reused"]
        if n <= handled:
            continue
        handled = n
        recovering.set()  # until examined and signed in again (convergence waits for it)
        found = examine_reuse(known_families)
        if not found:
            recovering.clear()
            note(f"the server counted a reuse ({n} in all) but no newly revoked family")
        for rec in found:
            reuses.append(rec)
            if rec["lost_ok"]:
                note(f"refresh token reused ({rec['family']}): lost in flight (its successor was never held anywhere; the "
                     f"refresh worker killed on {rec['kill']['m']} at {rel(rec['kill']['t']):.1f} s was answered); signing in again on m1")
            else:
                fail("reuse", f"refresh token reused ({rec['family']}): its successor ({rec['successor_state']}) was held by "
                              f"{', '.join(rec['seen']) or 'nothing'}; {rec['answered_kills']} of {rec['worker_kills']} "
                              f"worker kills so far came after the server counted a refresh and explain no other reuse")
            recovering.set()
            try:
                ok = recover()
            finally:
                recovering.clear()
            rec["recovered"] = now()
            windows["signed out"].append((rec["t"] - 5, now(), None))
            note("recovery: " + ("m1 signed in again and wrote the slot to the fleet" if ok else "FAILED"))
            if not ok:
                fail("reuse", "the slot could not be signed in again after a reuse")


def login(m):
    p = subprocess.Popen([BIN, "login", SLOT], env=m.env, cwd=m.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    err = []
    approved = False
    for line in p.stderr:
        err.append(line)
        code = re.match(r"^    ([A-Z0-9-]+)$", line)
        if code and not approved:
            http("/_test/approve", {"user_code": code.group(1), "email": EMAIL})
            approved = True
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    return p.returncode, first_line("".join(err[-3:]))


# --- the attacker (issue 31): writes the prefix with the machines' own TLS client certificate -------
# It holds an age key of its own (stock `age-keygen`) and an Ed25519 key of its own, never a
# member's; every operation is made with stock `etcdctl` (and `age` to seal). It must achieve
# nothing but denial of service: no value under the prefix opens with its key, no machine serves a
# token that is not the victim's, no refresh token is spent twice.
ATTACK_QUIET = max(10, min(30, SECS // 4))   # the last seconds of the load run without the attacker
arng = random.Random(SEED ^ 0x31A77AC)         # its own choices, so the faults' sequence stays the seed's
ATTACK_ERRORS = ("is missing from fleet", "refused slot work's credential", "expired during the refresh",
                 "presented slot work's refresh token")
signin_lock = threading.Lock()    # one sign-in on m1 at a time (after a reuse, or to undo an attack)
restoring = threading.Event()     # set while the guardian signs the slot in again (convergence waits)


class Attacker:
    def __init__(self):
        self.dir = f"{TMP}/attacker"
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        self.key = f"{self.dir}/attacker.key"
        r = subprocess.run(["age-keygen", "-o", self.key], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"fleet: age-keygen: {r.stderr.strip()}")
        self.recipient = subprocess.run(["age-keygen", "-y", self.key], capture_output=True, text=True, check=True).stdout.strip()
        self.signing = Ed25519PrivateKey.generate()   # its own signing key: signs, but is no member's
        self.signing_pub = base64.b64encode(self.signing.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
        self.prefix = f"/lanyard/{FLEET}/"
        self.victim = None               # the victim's account id (the attacker is assumed to know it)
        self.ops = collections.Counter()         # kind -> operations etcd accepted
        self.refused = collections.Counter()     # kind -> operations etcd refused (no quorum, member down)
        self.targets = collections.Counter()     # "del slots/work", "put intents/work", ...
        self.history = []                # values of slots/work read, oldest first (for replays)
        self.own = set()                 # every value it put (its log entries are not members' recipients)
        self.scans = 0
        self.tried = 0                   # sealed values `age -d` was run on
        self.readable = []               # (key, when): values that opened with its key
        self.tmp_n = 0
        self.label = None                # the operation under way (ATTACKS)
        self.members = []                # the members' recipients it read in the log
        self.removal = None              # d's removal, once made (it then holds d's identity)
        self.d_key = None
        self.before_removal = 0          # how many values of slots/work it had seen before the removal
        self.next_log_move = 0
        self.log = []                    # every write it made (record())
        self.revs = {}                   # revision -> its log entry
        self.log_lock = threading.Lock()

    def etcdctl(self, *args, stdin=None):
        base = ["etcdctl", "--endpoints", ENV_ETCD["LANYARD_TEST_ETCD_ENDPOINTS"], "--cacert", ENV_ETCD["LANYARD_TEST_ETCD_CA"],
                "--cert", ENV_ETCD["LANYARD_TEST_ETCD_CERT"], "--key", ENV_ETCD["LANYARD_TEST_ETCD_KEY"],
                "--dial-timeout=2s", "--command-timeout=4s"]
        try:
            r = subprocess.run(base + list(args), input=stdin, capture_output=True, timeout=20,
                               env={**os.environ, "ETCDCTL_API": "3"})
            return r.returncode, r.stdout
        except subprocess.TimeoutExpired:
            return None, b""

    def everything(self):
        """Every key and value under the prefix (a list of (key, value)), None when etcd did not answer."""
        rc, out = self.etcdctl("get", self.prefix, "--prefix", "-w", "json")
        if rc != 0:
            return None
        try:
            kvs = json.loads(out).get("kvs") or []
            return [(base64.b64decode(kv["key"]).decode(errors="replace"), base64.b64decode(kv.get("value", ""))) for kv in kvs]
        except (ValueError, KeyError):
            return None

    def put(self, kind, path, value):
        self.own.add(value)
        t0 = now()
        rc, out = self.etcdctl("put", self.prefix + path, "-w", "json", stdin=value)
        self.record(kind, "put", path, t0, rc, out, value)

    def delete(self, path):
        t0 = now()
        rc, out = self.etcdctl("del", self.prefix + path, "-w", "json")
        self.record("delete", "del", path, t0, rc, out)

    def record(self, kind, verb, path, t0, rc, out=b"", value=None):
        # Its own log: what it wrote where and when, at which revision (etcd's answer), and for a
        # credential which generation. A write whose answer was lost (rc not 0) may still have
        # landed: kept without a revision, matched in the history by key, bytes and time.
        try:
            rev = int(json.loads(out)["header"]["revision"]) if rc == 0 else None
        except (ValueError, KeyError, TypeError):
            rev = None
        _, b = self.body(value) if value else (None, None)
        entry = {"t0": t0, "t1": now(), "verb": verb, "key": self.prefix + path, "rev": rev, "ok": rc == 0,
                 "label": self.label or kind, "value": value, "generation": (b or {}).get("generation"),
                 "writer": (b or {}).get("writer")}
        with self.log_lock:
            self.log.append(entry)
            if rev is not None:
                self.revs[rev] = entry
        (self.ops if rc == 0 else self.refused)[self.label or kind] += 1
        if rc == 0:
            target = path if path in (f"slots/{SLOT}", f"intents/{SLOT}") or path.split("/")[0] in ("refreshed", "created") \
                else path.split("/")[0] + "/*"
            self.targets[f"{verb} {target}"] += 1
        if path in (f"slots/{SLOT}", f"intents/{SLOT}"):
            windows["attack"].append((t0, now(), None))

    @staticmethod
    def body(value):
        """A signed document's envelope and parsed body (both JSON objects), else (None, None)."""
        try:
            doc = json.loads(value)
            body = json.loads(doc["body"])
            return (doc, body) if isinstance(doc, dict) and isinstance(body, dict) else (None, None)
        except (ValueError, KeyError, TypeError):
            return None, None

    def recipients(self, kvs):
        """The members' recipients, as anyone reading the log finds them (its own entries left out),
        remembered: its deletes do not make it forget them."""
        for k, v in kvs:
            if k.startswith(self.prefix + "log/") and v not in self.own:
                _, b = self.body(v)
                r = (b or {}).get("recipient")
                if r and r != self.recipient and r not in self.members:
                    self.members.append(r)
        return self.members

    def seal(self, plain, recipients):
        args = ["age", "-e"]
        for r in recipients:
            args += ["-r", r]
        r = subprocess.run(args, input=plain, capture_output=True, timeout=20)
        return r.stdout if r.returncode == 0 else None

    def opens(self, data):
        """Whether `age -d -i attacker.key` opens `data`."""
        self.tmp_n += 1
        path = f"{self.dir}/candidate-{self.tmp_n % 4}.age"
        with open(path, "wb") as f:
            f.write(data)
        r = subprocess.run(["age", "-d", "-i", self.key, "-o", "/dev/null", path], capture_output=True, timeout=20)
        return r.returncode == 0

    def scan(self):
        """Tries its key on every value under the prefix: the value itself when it is an age file, and
        the sealed credential inside a signed value. Returns the number tried, None when etcd did not answer."""
        kvs = self.everything()
        if kvs is None:
            return None
        tried = 0
        for k, v in kvs:
            candidates = [v]
            _, b = self.body(v)
            if isinstance(b, dict) and isinstance(b.get("sealed"), str):
                try:
                    candidates.append(base64.b64decode(b["sealed"]))
                except ValueError:
                    pass
            for c in candidates:
                if c.startswith(b"age-encryption.org"):
                    tried += 1
                    if self.opens(c):
                        self.readable.append((k, now()))
                        fail("secrecy", f"{k} opens with the attacker's key (age -d -i attacker.key)")
        self.scans += 1
        self.tried += tried
        return tried

    # The operations. Each reads the prefix first, as an attacker would, and remembers slots/work.
    def junk(self, kvs, on_slot=False):
        name = arng.choice(["evil", "work2", "lanyard-fleet-identity", "x" * 70, "WORK", "w%d" % arng.randrange(100)])
        path = f"slots/{SLOT}" if on_slot else arng.choice([
            f"slots/{name}", f"intents/{SLOT}", f"intents/{SLOT}", f"intents/{name}", f"log/{arng.randrange(1, 12):010d}",
            f"log/{name}", f"pending/{arng.choice(['evil', 'm2', name])}"])
        value = arng.choice([
            arng.randbytes(arng.randrange(1, 300)), b"", b"{}", b"null", b"[1,2,3]",
            b'{"body": "{}", "signature": "AAAA"}',
            json.dumps({"body": json.dumps({"type": "lanyard-fleet-credential", "fleet": FLEET, "slot": SLOT,
                                            "generation": "-1", "sealed": "!!"}), "signature": "x"}).encode(),
            b"age-encryption.org/v1\n-> X25519 AAAA\nBBBB\n--- CCCC\n" + arng.randbytes(64),
            b"{" * 5000,
        ])
        self.put("junk", path, value)

    def log_forgery(self, kvs):
        entries = sorted((k, v) for k, v in kvs if k.startswith(self.prefix + "log/") and v not in self.own)
        if not entries:
            return self.junk(kvs)
        src_key, src = next(((k, v) for k, v in entries if k.endswith("/0000000002")), entries[-1])
        doc, body = self.body(src)
        if body is None:
            return self.junk(kvs)
        numbered = [int(k.rsplit("/", 1)[1]) for k, _ in entries if k.rsplit("/", 1)[1].isdigit()]
        next_seq = max(numbered or [1]) + 1
        variant = arng.choice(["new member", "impostor", "rewrite", "remove", "self-signed", "join request"])
        body = dict(body)
        signature = doc.get("signature", "")
        path = f"log/{next_seq:010d}"
        if variant == "join request":
            req = {"type": "lanyard-fleet-join", "fleet": FLEET, "machine": arng.choice(["evil", "m1", "m5"]),
                   "recipient": self.recipient, "signing_key": self.signing_pub, "at": "2026-12-04T00:00:00Z"}
            text = json.dumps(req)
            value = json.dumps({"body": text, "signature": base64.b64encode(self.signing.sign(text.encode())).decode()}).encode()
            return self.put("log forgery", f"pending/{req['machine']}", value)
        if variant in ("new member", "impostor", "self-signed"):
            body.update(op="add", seq=str(next_seq), recipient=self.recipient,
                        machine="evil" if variant != "impostor" else arng.choice(["m1", "m2"]))
        if variant == "self-signed":
            body.update(signing_key=self.signing_pub, signer="evil")
        if variant == "rewrite":   # history rewritten in place: the copied entry now admits the attacker's key
            body.update(recipient=self.recipient)
            path = src_key[len(self.prefix):]
        if variant == "remove":
            body.update(op="remove", machine="m1", seq=str(next_seq))
            for k in ("recipient", "signing_key"):
                body.pop(k, None)
        text = json.dumps(body)
        if variant == "self-signed":
            signature = base64.b64encode(self.signing.sign(text.encode())).decode()
        self.put("log forgery", path, json.dumps({"body": text, "signature": signature}).encode())

    def forged_credential(self, kvs, on_slot=False):
        recipients = self.recipients(kvs)
        current = dict(kvs).get(self.prefix + f"slots/{SLOT}")
        cdoc, cbody = self.body(current) if current else (None, None)
        if not recipients:
            return self.junk(kvs)
        slot = SLOT if on_slot else arng.choice(["evil", "lanyard-fleet-identity", "work2"])
        try:
            generation = int((cbody or {}).get("generation", "1")) + arng.choice([1, 1, 2, 10, 1000000])
        except ValueError:
            generation = 2
        variant = arng.choice(["zero signature", "copied signature", "own signature", "tombstone"]
                              + (["removed member's signature"] if self.removal else []))
        credential = {"version": 1, "provider": "openai",
                      "tokens": {"access_token": "at-attacker", "refresh_token": "rt-attacker", "token_type": "Bearer"},
                      "account": {"email": EMAIL, "account_id": self.victim}}
        body = {"type": "lanyard-fleet-credential", "fleet": FLEET, "slot": slot, "generation": str(generation),
                "head_seq": (cbody or {}).get("head_seq", "1"), "head": (cbody or {}).get("head", "0" * 64),
                "writer": "m1"}
        if variant == "removed member's signature":
            body["writer"] = "d"
        if variant == "tombstone":
            body["tombstone"] = True
        else:
            plain = json.dumps({"fleet": FLEET, "slot": slot, "generation": str(generation), "credential": credential}).encode()
            sealed = self.seal(plain, recipients)   # to the members only: its own key cannot open it either
            if sealed is None:
                return self.junk(kvs)
            body["sealed"] = base64.b64encode(sealed).decode()
            body["digest"] = hashlib.sha256(plain).hexdigest()
        text = json.dumps(body)
        if variant == "removed member's signature":
            value = self.sign_as_removed(body)
            return self.put("forged credential", f"slots/{slot}", value) if value else self.junk(kvs)
        signature = {"zero signature": base64.b64encode(bytes(64)).decode(),
                     "copied signature": (cdoc or {}).get("signature") or base64.b64encode(bytes(64)).decode(),
                     "own signature": base64.b64encode(self.signing.sign(text.encode())).decode(),
                     "tombstone": base64.b64encode(bytes(64)).decode()}[variant]
        self.put("forged credential", f"slots/{slot}", json.dumps({"body": text, "signature": signature}).encode())

    def delete_some(self, kvs, on_slot=False):
        if on_slot:
            return self.delete(f"slots/{SLOT}")
        keys = [k[len(self.prefix):] for k, _ in kvs if k.startswith(self.prefix)]
        # Never the lock or the leader keys: whoever deletes the lock's key breaks mutual exclusion,
        # which no signature can restore (docs/reliability.md).
        keys = [k for k in keys if not k.startswith(("locks/", "leader/")) and k != f"slots/{SLOT}"]
        weighted = [(k, 5 if k == f"intents/{SLOT}" else 1) for k in keys]
        if not weighted:
            return
        path = arng.choices([k for k, _ in weighted], weights=[w for _, w in weighted])[0]
        self.delete(path)

    def replay(self, kvs, mode="older"):
        current = dict(kvs).get(self.prefix + f"slots/{SLOT}")
        older = [v for v in self.history if v != current]
        if mode == "current" and current is not None:
            value, path = current, f"slots/{SLOT}"          # the newest put back: a new revision, same bytes
        elif mode == "elsewhere" and self.history:
            value, path = arng.choice(self.history), "slots/evil"   # a member's value under another slot's name
        elif mode == "older" and older:
            value, path = arng.choice(older[-5:]), f"slots/{SLOT}"  # one of the last few generations
        elif mode == "before removal" and self.removal and [v for v in self.history[:self.before_removal] if v != current]:
            # a value from before d's removal, sealed to d too
            value, path = arng.choice([v for v in self.history[:self.before_removal] if v != current][-3:]), f"slots/{SLOT}"
        else:
            return self.junk(kvs)
        self.put("replay", path, value)

    # The removed machine's moves: once d is removed, the attacker holds d's age identity
    # and signs with the key derived from it, through Tests/Fixtures/fleet/forge.py (never
    # Lanyard's code). Moves on the log's known numbers (the removal's entry hidden, a fork) at
    # most one every 20-40 s: each stops fleet writes until a person restores the log.
    def become_removed(self, removal, identity):
        self.d_key = f"{self.dir}/d.key"
        fd = os.open(self.d_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(identity.strip() + "\n")
        self.before_removal = len(self.history)
        self.removal = removal

    def sign_as_removed(self, body):
        r = subprocess.run([sys.executable, FORGE, "sign", "--identity", self.d_key], input=json.dumps(body).encode(),
                           capture_output=True, timeout=20)
        return r.stdout if r.returncode == 0 and r.stdout else None

    def log_move_allowed(self):
        if not self.removal or now() < self.next_log_move:
            return False
        self.next_log_move = now() + arng.uniform(20, 40)
        return True

    def entry(self, seq, prev, **change):
        body = {"type": "lanyard-fleet-membership", "fleet": FLEET, "seq": str(seq), "prev": prev, "signer": "d",
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        body.update(change)
        return self.sign_as_removed(body)

    def fallback(self, kvs):
        """Junk elsewhere, counted as such, when a removed-machine move cannot be made (yet)."""
        self.label = "junk elsewhere"
        return self.junk(kvs)

    def hide_removal(self, kvs):
        """Deletes the removal's entry (and with it everything after it; a third of the time the
        entry before it too), so a member that has not read it yet still counts d."""
        if not self.log_move_allowed():
            return self.fallback(kvs)
        first = self.removal["seq"] - (1 if arng.random() < 1 / 3 else 0)
        for k, _ in kvs:
            n = k[len(self.prefix) + 4:] if k.startswith(self.prefix + "log/") else ""
            if n.isdigit() and int(n) >= first:
                self.delete(k[len(self.prefix):])

    def fork(self, kvs):
        """An entry signed with d's key at the removal's number, following the entry before it: a
        fork of the log (adding `evil`, the attacker's own keys, or removing m1)."""
        if not self.log_move_allowed():
            return self.fallback(kvs)
        seq, prev = self.removal["seq"], self.removal["body"]["prev"]
        change = arng.choice([dict(op="add", machine="evil", recipient=self.recipient, signing_key=self.signing_pub),
                              dict(op="remove", machine="m1")])
        value = self.entry(seq, prev, **change)
        return self.put("fork", f"log/{seq:010d}", value) if value else self.fallback(kvs)

    def entry_after_removal(self, kvs):
        """An entry signed by d after its removal, at the next number (never valid: d is no member)."""
        if not self.removal:
            return self.fallback(kvs)
        entries = {int(k[len(self.prefix) + 4:]): v for k, v in kvs
                   if k.startswith(self.prefix + "log/") and k[len(self.prefix) + 4:].isdigit() and v not in self.own}
        if not entries:
            return self.fallback(kvs)
        seq = max(entries)
        try:
            prev = hashlib.sha256(json.loads(entries[seq])["body"].encode()).hexdigest()
        except (ValueError, KeyError, TypeError):
            return self.fallback(kvs)
        value = self.entry(seq + 1, prev, op="add", machine="evil", recipient=self.recipient, signing_key=self.signing_pub)
        return self.put("entry by d", f"log/{seq + 1:010d}", value) if value else self.fallback(kvs)

    def remember(self, kvs):
        v = dict(kvs).get(self.prefix + f"slots/{SLOT}")
        if v is not None and v not in self.own and v not in self.history:
            self.history.append(v)


attacker = None


# What it does, with weights. The operations that leave the shared slot's value of no use to the
# machines (deleted, junk, forged, an older generation put back) are a fifteenth of them, about
# one every 12-15 s: each denies refreshes until a sign-in, and more would leave the fleet little
# to refresh. The rest hit every other key (intents/work above all), or put the slot's newest value
# back at a new revision, which moves it under a refresh's fenced write.
ATTACKS = [
    ("junk elsewhere", lambda a, kvs: a.junk(kvs), 2),
    ("log forgery", lambda a, kvs: a.log_forgery(kvs), 2),
    ("forgery elsewhere", lambda a, kvs: a.forged_credential(kvs), 0.5),
    ("delete elsewhere", lambda a, kvs: a.delete_some(kvs), 1.5),
    ("replay newest", lambda a, kvs: a.replay(kvs, "current"), 0.7),
    ("replay elsewhere", lambda a, kvs: a.replay(kvs, "elsewhere"), 0.3),
    ("delete slot", lambda a, kvs: a.delete_some(kvs, on_slot=True), 0.1),
    ("junk slot", lambda a, kvs: a.junk(kvs, on_slot=True), 0.1),
    ("forge slot", lambda a, kvs: a.forged_credential(kvs, on_slot=True), 0.1),
    ("replay older", lambda a, kvs: a.replay(kvs, "older"), 0.2),
    # The removed machine's (weights 0 when FLEET_REMOVED_ATTACKER=0, which keeps the choices above
    # as they were for a seed); until the removal each falls back to junk elsewhere.
    ("hide removal", lambda a, kvs: a.hide_removal(kvs), 0.15 * REMOVED),
    ("fork", lambda a, kvs: a.fork(kvs), 0.15 * REMOVED),
    ("entry by d", lambda a, kvs: a.entry_after_removal(kvs), 0.3 * REMOVED),
    ("replay before removal", lambda a, kvs: a.replay(kvs, "before removal"), 0.1 * REMOVED),
]


def attack_loop(until):
    last_scan = now()
    while not stop_faults.wait(arng.uniform(0.2, 1.0)) and now() < until:
        try:
            kvs = attacker.everything()
            if kvs is None:
                attacker.refused["read"] += 1
                continue
            attacker.remember(kvs)
            label, fn, _ = arng.choices(ATTACKS, weights=[w for _, _, w in ATTACKS])[0]
            attacker.label = label
            fn(attacker, kvs)
            if now() - last_scan >= 5:
                attacker.scan()
                last_scan = now()
        except Exception as e:  # an operation that could not be made is noted, not fatal
            note(f"attacker: {e!r}")
    # Its last operation puts an older generation back, so every run sees a rollback
    # outlive the attacker: the machines that saw newer refuse it until a sign-in lands.
    last = "nothing"
    for _ in range(20):
        if stop_faults.is_set():
            break
        kvs = attacker.everything()
        if kvs is not None:
            attacker.remember(kvs)
            attacker.label = "replay older"
            n = len(attacker.log)
            attacker.replay(kvs, "older")
            put = attacker.log[n:] and attacker.log[-1]
            if put and put["ok"] and put["key"] == SLOT_KEY and put["verb"] == "put" and put["value"] in attacker.history:
                last = f"generation {put['generation']} put back"
                break
        time.sleep(0.5)
    after_attack["stopped"] = now()
    note(f"the attacker stops ({sum(attacker.ops.values())} operations; the last: {last})")


# --- the guardian: a person who notices that the slot no longer refreshes and signs in again ----------
def members_keys():
    """The members' Ed25519 keys, from m1's verified membership."""
    try:
        with open(f"{machines['m1'].root}/data/lanyard/fleet/membership.json") as f:
            doc = json.load(f)
        return {m["machine"]: m["signing_key"] for m in doc["members"]}
    except (OSError, ValueError, KeyError):
        return {}


def seen_generation():
    """The highest generation of the slot any machine has seen."""
    best = 0
    for m in machines.values():
        try:
            with open(f"{m.root}/data/lanyard/fleet/{SLOT}.json") as f:
                best = max(best, int(json.load(f).get("generation", "0")))
        except (OSError, ValueError):
            pass
    return best


def slot_damage():
    """Why the fleet's value of the slot is no use to the machines (missing, not a member's, older
    than one a machine has seen), None when it is fine or etcd did not answer."""
    kvs = etcd_range(f"/lanyard/{FLEET}/slots/{SLOT}")
    if kvs is None:
        return None
    if not kvs:
        return "missing"
    doc, body = Attacker.body(kvs[0][1])
    if body is None or body.get("type") != "lanyard-fleet-credential" or body.get("slot") != SLOT:
        return "not a credential"
    key = members_keys().get(body.get("writer"))
    try:
        Ed25519PublicKey.from_public_bytes(base64.b64decode(key)).verify(base64.b64decode(doc["signature"]), doc["body"].encode())
    except (InvalidSignature, ValueError, TypeError, KeyError):
        return "not signed by a member"
    try:
        generation = int(body.get("generation"))
    except (TypeError, ValueError):
        return "no generation"
    if body.get("tombstone"):
        return "a tombstone"
    if generation < seen_generation():
        return f"generation {generation}, older than {seen_generation()}"
    return None


guard_stats = {"damaged": 0, "signins": 0, "longest": 0.0, "total": 0.0, "why": collections.Counter()}
# What the attacker left when it stopped: the slot's damage then, when the slot was of use again
# (a sign-in landed), and when every machine held the fleet's value again.
after_attack = {"stopped": None, "damage": None, "usable": None, "adopted": None}


def machine_generations():
    out = {}
    for m in machines.values():
        try:
            with open(f"{m.root}/data/lanyard/fleet/{SLOT}.json") as f:
                out[m.name] = int(json.load(f).get("generation", "0"))
        except (OSError, ValueError):
            out[m.name] = None
    return out


def follow_recovery(damage):
    """Called by the guardian each round once the attacker has stopped."""
    a = after_attack
    if a["damage"] is None:
        a["damage"] = damage or "none"
        if damage is None:
            a["usable"] = a["stopped"]   # nothing it left was in the way
    if a["usable"] is None and damage is None:
        a["usable"] = now()
    if a["usable"] is not None and a["adopted"] is None and damage is None:
        kvs = etcd_range(SLOT_KEY)
        fleet_gen = generation_of(kvs[0][1]) if kvs else None
        gens = machine_generations()
        if fleet_gen is not None and all(g is not None and g >= fleet_gen for g in gens.values()):
            a["adopted"] = now()


def guardian():
    since = why = None
    notice = 0
    while not stop_watch.wait(0.5):
        try:
            damage = slot_damage()
            if after_attack["stopped"] is not None:
                follow_recovery(damage)
        except Exception as e:
            note(f"guardian: {e!r}")
            continue
        if damage is None:
            if since is not None:
                windows["damaged"].append((since, now(), None))
                guard_stats["total"] += now() - since
                guard_stats["longest"] = max(guard_stats["longest"], now() - since)
                since = None
            continue
        if since is None:
            since, why, notice = now(), damage, arng.uniform(1, 4)
            guard_stats["damaged"] += 1
            guard_stats["why"]["an older generation" if damage.startswith("generation") else damage] += 1
        with etcd_lock:
            no_quorum = len(members_down) >= 2
        if now() - since < notice or no_quorum:
            continue  # (without a quorum a sign-in could not reach the fleet: it waits for etcd)
        restoring.set()
        try:
            rc, err = sign_in_again(f"the fleet's {SLOT} is {why} (for {now() - since:.1f} s)")
            if rc == 0:
                guard_stats["signins"] += 1
            else:
                note(f"guardian: login exited {rc}: {err}")
        finally:
            restoring.clear()
        # Give the sign-in time to land (a machine writes a pending one within 5 s) before another.
        notice = now() - since + 6


def sign_in_again(why):
    """`fleet sync` then `login` on m1, or on the first machine not cut off (login writes the new
    sign-in over whatever the fleet holds)."""
    with signin_lock:
        m = next((m for m in machines.values() if not m.cut), machines["m1"])
        note(f"sign-in on {m.name}: {why}")
        m.run("fleet", "sync", timeout=60)
        return login(m)


# --- the removed machine ------------------------------------------------------------------
LOG_PREFIX = f"/lanyard/{FLEET}/log/"
removal = {}        # d's removal: when, by whom, its entry (seq, rev, value, body)
log_stats = {"damaged": 0, "restored": 0, "total": 0.0, "longest": 0.0, "failed": 0}
restoring_log = threading.Event()   # set while the log keeper restores the log (convergence waits)


def remove_d(at):
    """`fleet remove d` on m1 (m2 while m1 is cut off), tried again until it succeeds; then the
    attacker takes d's identity from d's store (stock age opens the file store with its identity
    file) and starts its removed-machine moves."""
    if stop_faults.wait(max(0, at - now())):
        return
    def entry():
        for e in history.under(LOG_PREFIX):
            _, b = Attacker.body(e["value"]) if e["value"] else (None, None)
            if b and b.get("op") == "remove" and b.get("machine") == "d" and attacker_event(e) is None:
                return e, b
        return None

    end = now() + 120
    failed = []
    while True:
        m = next((m for m in machines.values() if not m.cut), machines["m1"])
        rc, out, err, took = m.run("fleet", "remove", "d", timeout=120)
        if rc == 0:
            break
        failed.append(f"exit {rc} on {m.name}: {first_line(err)}")
        note(f"fleet remove d on {m.name} exited {rc}: {first_line(err)}")
        # A remove that wrote the removal's entry and failed after it (re-sealing, rotating) is
        # not made again (d is no member any more): what it left is judged by the invariants.
        history.caught_up(10)
        if entry() is not None:
            break
        if now() > end or stop_faults.wait(2):
            fail("harness", f"fleet remove d did not succeed: {first_line(err)}")
            return
    t = now()
    while entry() is None and now() < t + 30:
        time.sleep(0.2)
    if entry() is None:
        fail("harness", "the removal's log entry never reached the history")
        return
    e, b = entry()
    removal.update(t=t, by=m.name, seq=int(e["key"][len(LOG_PREFIX):]), rev=e["rev"], value=e["value"], body=b, took=took,
                   rc=rc, failed=failed)
    r = subprocess.run(["age", "-d", "-i", f"{removed_machine.root}/data/lanyard/identity.txt",
                        f"{removed_machine.root}/data/lanyard/store.age"], capture_output=True, timeout=30)
    try:
        identity = json.loads(r.stdout)["slots"]["lanyard-fleet-identity"]["tokens"]["access_token"]
    except (ValueError, KeyError, TypeError):
        fail("harness", f"d's identity could not be read from its store: {r.stderr.decode(errors='replace')[:200]}")
        return
    attacker.become_removed(removal, identity)
    note(f"fleet remove d on {m.name} ({took:.1f} s; log entry {removal['seq']}, revision {removal['rev']}): "
         f"{' '.join((out or err).split())[:200]}; the attacker now holds d's identity")


def real_log():
    """The log as members wrote it (from etcd's history): each key's last value not the attacker's."""
    real = {}
    for e in history.under(LOG_PREFIX):
        if e["value"] is not None and attacker_event(e) is None:
            real[e["key"]] = e["value"]
    return real


def log_damage():
    """The log's known entries that etcd does not hold as members wrote them; None when etcd did not answer."""
    kvs = etcd_range(LOG_PREFIX, prefix=True)
    if kvs is None:
        return None
    held = {k: v for k, v, _ in kvs}
    return sorted(k for k, v in real_log().items() if held.get(k) != v)


def log_keeper():
    """A person who notices the log was tampered with (fleet status and doctor say so) and puts the
    entries back as the members wrote them, with etcdctl, from a backup or a member's verified copy,
    1-4 s after; then runs FLEET_RESOLVE on every machine when set."""
    since = None
    notice = 0
    while not stop_watch.wait(0.5):
        try:
            bad = log_damage()
        except Exception as e:
            note(f"log keeper: {e!r}")
            continue
        if bad is None:
            continue
        if not bad:
            if since is not None:
                windows["log damaged"].append((since - 1, now(), None))
                log_stats["total"] += now() - since
                log_stats["longest"] = max(log_stats["longest"], now() - since)
                since = None
            continue
        if since is None:
            since, notice = now(), arng.uniform(1, 4)
            log_stats["damaged"] += 1
        with etcd_lock:
            no_quorum = len(members_down) >= 2
        if now() - since < notice or no_quorum:
            continue
        restoring_log.set()
        try:
            real = real_log()
            done = []
            for k in bad:
                r = subprocess.run(etcdctl_base() + ["--command-timeout=4s", "put", k], input=real[k], capture_output=True,
                                   timeout=20, env={**os.environ, "ETCDCTL_API": "3"})
                if r.returncode == 0:
                    done.append(k[len(LOG_PREFIX):].lstrip("0"))
            if RESOLVE:
                for m in machines.values():
                    rc, _, err, _ = m.run(*RESOLVE, timeout=60)
                    if rc != 0:
                        note(f"log keeper: lanyard {' '.join(RESOLVE)} on {m.name} exited {rc}: {first_line(err)}")
            log_stats["restored" if len(done) == len(bad) else "failed"] += 1
            note(f"log keeper: entries {', '.join(done) or 'none'} of {len(bad)} put back as the members wrote them "
                 f"(tampered with for {now() - since:.1f} s)")
        finally:
            restoring_log.clear()
        notice = now() - since + 3


def removed_secrecy():
    """Tries d's key (stock `age -d -i d.key`) on every value under slots/ and intents/ that a
    member first wrote after the removal: the value itself when it is an age file, the sealed
    credential inside a signed value. Returns (tried, opened: [(key, rev)])."""
    if not removal or not attacker.d_key:
        return 0, []
    before = {e["value"] for e in history.events if e["rev"] < removal["rev"] and e["value"] is not None}
    tried, opened, seen = 0, [], set()
    for e in history.events:
        if e["rev"] <= removal["rev"] or e["value"] is None or e["value"] in before or e["value"] in seen:
            continue
        if not e["key"].startswith((f"/lanyard/{FLEET}/slots/", f"/lanyard/{FLEET}/intents/")) or attacker_event(e) is not None:
            continue
        seen.add(e["value"])
        candidates = [e["value"]]
        _, b = Attacker.body(e["value"])
        if isinstance(b, dict) and isinstance(b.get("sealed"), str):
            try:
                candidates.append(base64.b64decode(b["sealed"]))
            except ValueError:
                pass
        for c in candidates:
            if c.startswith(b"age-encryption.org"):
                tried += 1
                path = f"{attacker.dir}/d-candidate.age"
                with open(path, "wb") as f:
                    f.write(c)
                if subprocess.run(["age", "-d", "-i", attacker.d_key, "-o", "/dev/null", path], capture_output=True,
                                  timeout=20).returncode == 0:
                    opened.append((e["key"], e["rev"]))
    return tried, opened


# --- the run ----------------------------------------------------------------------------------------
def setup():
    global BASE
    r = cluster("start")
    if r.returncode != 0:
        raise SystemExit(f"fleet: the etcd cluster did not start: {r.stderr[-2000:]}")
    load_etcd_env()
    out = open(f"{TMP}/server.out", "w")
    server = subprocess.Popen([".venv/bin/python", "Tests/Fixtures/oauth/chatgpt_emulator.py", "--port", "0", "--exit-with-parent",
                               "--log-level", "WARNING"], stdout=out, stderr=open(f"{TMP}/server.err", "w"))
    end = now() + 60
    while True:
        with open(f"{TMP}/server.out") as f:
            m = re.search(r"^READY (\S+)", f.read(), re.M)
        if m:
            BASE = m.group(1)
            break
        if server.poll() is not None or now() > end:
            raise SystemExit("fleet: the emulator did not start: " + open(f"{TMP}/server.err").read()[-2000:])
        time.sleep(0.05)
    http("/_test/config", {"interval": 0, "access_token_lifetime": LIFETIME})
    for m in machines.values():
        m.write_config(ENV_ETCD["LANYARD_TEST_ETCD_ENDPOINTS"])
        m.must("store", "init", "--no-passphrase")
    m1 = machines["m1"]
    rc, err = login(m1)
    if rc != 0:
        raise SystemExit(f"fleet: set-up: login on m1 exited {rc}: {err}")
    fleet_fingerprint = json.loads(m1.must("fleet", "init", "--json"))["fleet_fingerprint"]
    m1.must("fleet", "share", SLOT)
    if removed_machine:
        removed_machine.write_config(ENV_ETCD["LANYARD_TEST_ETCD_ENDPOINTS"])
        removed_machine.must("store", "init", "--no-passphrase")
    for m in list(machines.values())[1:] + ([removed_machine] if removed_machine else []):
        fingerprint = json.loads(m.must("fleet", "join", "--fleet-fingerprint", fleet_fingerprint, "--json"))["fingerprint"]
        m1.must("fleet", "approve", m.name, "--fingerprint", fingerprint)
        m.must("fleet", "sync")
    return server


def percentile(values, q):
    if not values:
        return 0
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def overlaps(rec, kind, slack, machine=None):
    for s, e, who in windows[kind]:
        e = (e or now()) + slack
        if (machine is None or who is None or who == machine) and rec["t0"] <= e and rec["t1"] >= s:
            return True
    return False


def classify(rec):
    """Why a command's exit status is allowed, or None when it is not."""
    rc = rec["rc"]
    if rec["hung"]:
        return None
    if rec["killed"]:
        return "killed"
    if rc == 0:
        if rec["kind"] == "token" and not rec.get("ok_output"):
            return None
        return "ok"
    # The refresh worker it started was killed under it (a caller waits for its own worker).
    if "refresh worker" in rec["err"] and any(w == rec["m"] and rec["t0"] <= t <= rec["t1"] for t, w in worker_kills):
        return "its refresh worker killed"
    if rc == 5 and "fleet lock" in rec["err"] and "was not free" in rec["err"] and killed_worker_before(rec):
        return "fleet lock left by a killed refresh worker"
    # A value older than one this machine has seen: refused by design (it cannot tell whether
    # its own copy holds a spent refresh token), so the slot is not refreshed until a sign-in.
    # Allowed only when the attacker's own log shows it put that generation back and the value
    # was still there during the call, and a member had written the newer generation: judged by
    # generations and revisions, never by the message alone, and however long after the attack.
    if rc == 1 and rec["code"] == "fleet_credential_refused" and GENERATION_REFUSED.search(rec["err"]):
        why = put_back(rec)
        if why:
            rec["put_back"] = why
            return "a value the attacker put back, older than one seen there"
        return None
    # The attacker's writes deny service until a sign-in: a value deleted or refused (a forced
    # refresh fails at once, `token` once its copy has expired), a refresh whose fenced write
    # found the value changed under it: within 15 s of its writes to slots/work or intents/work,
    # or while the slot was of no use, or while the value it wrote there was the value.
    hit = next((e for e in ATTACK_ERRORS if e in rec["err"]), None)
    if rc == 1 and hit and (overlaps(rec, "attack", 15) or overlaps(rec, "damaged", 15) or attacker_value_during(rec)):
        return f"the attacker's writes ({hit})"
    # The removed machine's log moves: an entry of its at a number members know (a fork), or the
    # removal's entry deleted (a member that has not read it is behind). Either stops fleet writes
    # until the log is restored; allowed while its tampering was in etcd (and 15 s after).
    if rec["code"] in ("fleet_forked", "fleet_membership_behind"):
        if overlaps(rec, "log damaged", 15) and any(a["key"].startswith(LOG_PREFIX) and a["t0"] <= rec["t1"] for a in attacker.log):
            return f"the removed machine's log entries ({rec['code']})"
        return None
    if rc == 5:
        if rec["kind"] == "token" and "has expired" not in rec["err"]:
            return None  # a token that has not expired is served without the fleet
        if overlaps(rec, "no quorum", 10):
            return "no quorum"
        if overlaps(rec, "cut off", 5, rec["m"]):
            return "cut off"
        if overlaps(rec, "election", 0):
            return "leader election"
        return None
    if rc == 4 and overlaps(rec, "signed out", 60):
        return "signed out after a lost-ok reuse"
    return None


GENERATION_REFUSED = re.compile(r"its generation (\d+) is older than generation (\d+) seen here")
SLOT_KEY = f"/lanyard/{FLEET}/slots/{SLOT}"
INTENT_KEY = f"/lanyard/{FLEET}/intents/{SLOT}"


def generation_of(value):
    _, b = Attacker.body(value) if value else (None, None)
    try:
        return int((b or {}).get("generation"))
    except (TypeError, ValueError):
        return None


def attacker_event(e):
    """The attacker's log entry for the history event `e` when the attacker made it (by the
    revision etcd answered it; a write whose answer was lost by key, bytes and time), else None."""
    entry = attacker.revs.get(e["rev"])
    if entry is not None:
        return entry
    for a in attacker.log:
        if a["rev"] is None and a["key"] == e["key"] and (a["verb"] == "del") == (e["value"] is None) \
                and (e["value"] is None or a["value"] == e["value"]) and e["t_hi"] >= a["t0"] and e["t_lo"] <= a["t1"] + 5:
            return a
    return None


def put_back(rec):
    """Why a refusal of generation G (older than N seen here) is the attacker's, or None: during
    the call slots/work held a value the attacker's log shows it put, of generation G, and a member
    had written generation N before the call ended."""
    m = GENERATION_REFUSED.search(rec["err"])
    g, n = int(m.group(1)), int(m.group(2))
    found = None
    for e in history.during(SLOT_KEY, rec["t0"], rec["t1"], attacker_t0):
        a = attacker_event(e)
        if a is not None and e["value"] is not None and generation_of(e["value"]) == g:
            found = a
    if found is None:
        return None
    if not any(e["value"] is not None and generation_of(e["value"]) == n and e["t_lo"] <= rec["t1"] and attacker_event(e) is None
               for e in history.of(SLOT_KEY)):
        return None
    return f"generation {g} put back at {rel(found['t0']):.1f} s ({found['label']}), {n} seen"


def attacker_value_during(rec):
    """Whether slots/work or intents/work held what the attacker wrote there (or was deleted by
    it) at some moment of the call."""
    return any(attacker_event(e) is not None for key in (SLOT_KEY, INTENT_KEY)
               for e in history.during(key, rec["t0"], rec["t1"], attacker_t0))


def attacker_t0(e):
    """When the attacker's write `e` was made at the earliest: when its etcdctl started (its own log)."""
    a = attacker_event(e)
    return a["t0"] if a else None


refused_elsewhere = set()   # slots `fleet sync` refused at the end (the attacker's, under other names)


def converge(t_whole):
    """`fleet sync` then `token` on every machine until all four print the same token."""
    t_start = now()
    tries = 0
    last = ""
    while now() < t_start + CONVERGE_LIMIT + 60:
        if recovering.is_set() or restoring.is_set():
            # A reuse found meanwhile (a worker killed in the last seconds): the clock starts again
            # once the slot is signed in again.
            note("convergence waits for the sign-in after a reuse")
            end = now() + 300
            while (recovering.is_set() or restoring.is_set()) and now() < end:
                time.sleep(0.5)
            t_whole = t_start = now()
        tries += 1
        digests, problems = {}, []
        for m in machines.values():
            rc, out, err, _ = m.run("fleet", "sync", "--json", timeout=60)
            try:
                outcomes = {s["slot"]: s for s in json.loads(out)["slots"]}
            except (ValueError, KeyError, TypeError):
                outcomes = None
            # The attacker's values under other slot names stay refused (and `fleet sync` exits 1
            # for them): only the shared slot's outcome counts.
            if outcomes is None or SLOT not in outcomes or outcomes[SLOT]["outcome"] == "refused" or rc not in (0, 1) \
                    or (rc == 1 and not any(o["outcome"] == "refused" for o in outcomes.values())):
                problems.append(f"{m.name} fleet sync exit {rc}: {first_line(err)} "
                                f"{(outcomes or {}).get(SLOT, {}).get('message') or ''}".strip())
            else:
                refused_elsewhere.update(k for k, o in outcomes.items() if o["outcome"] == "refused")
        for m in machines.values():
            rc, out, err, _ = m.run("token", SLOT, timeout=CALL_TIMEOUT)
            if rc == 0 and out.strip():
                digests[m.name] = digest(out.strip())
            else:
                problems.append(f"{m.name} token exit {rc}: {first_line(err)}")
        if not problems and len(set(digests.values())) == 1:
            return now() - t_whole, tries, ""
        last = "; ".join(problems) or "different tokens: " + ", ".join(f"{k}={v[:6]}" for k, v in sorted(digests.items()))
        time.sleep(0.5)
    return None, tries, last


repairs = []   # what doctor --repair fixed at the end, per machine
doctor_saw_attack = {}   # machine -> how many of the attacker's leftovers its doctor reported


def attacker_leftover(problem):
    """A problem `doctor` reports because of what the attacker left under the prefix: a value
    refused under a slot name other than the shared slot's, or keys that do not verify; or the
    removed machine's etcd access, which `doctor` keeps reporting on the machine that removed it
    (the soak's machines share one client certificate and have no etcd users: nothing revokes it)."""
    p = str(problem)
    return ((p.startswith("refused slot ") and not p.startswith(f"refused slot {SLOT}'s")) or "under its prefix do not verify" in p
            or "etcd access of removed machine d not revoked" in p)


def doctor(m):
    """`lanyard doctor --json`: its exit status and problems."""
    rc, out, err, _ = m.run("doctor", "--json", timeout=120)
    try:
        return rc, json.loads(out).get("problems") or []
    except ValueError:
        return rc, [first_line(err) or "no JSON"]


def stale_locks_gone(limit=100):
    """Waits until no fleet lock key is left (a killed holder's lease ends within its TTL, 70 s);
    returns when it saw none, or None after `limit` s."""
    end = now() + limit
    while now() < end:
        kvs = etcd_range(f"/lanyard/{FLEET}/locks/", prefix=True, keys_only=True)
        if kvs == []:
            return now()
        time.sleep(0.5)
    return None


def main():
    global DEADLINE, LOAD_START, attacker, history
    print(f"fleet: {SECS} s, 4 machines x {CALLERS} token loops + a refresh loop + agents, {LIFETIME}-second tokens, "
          f"3-member etcd with TLS (seed {SEED}; binary {BIN})", flush=True)
    server = setup()
    history = History()
    attacker = Attacker()
    attacker.victim = http("/_test/tokens")["families"][0]["account_id"]
    LOAD_START = now()
    DEADLINE = LOAD_START + SECS
    for m in machines.values():
        m.start_agent()
    note(f"set up in {LOAD_START - START:.1f} s: m1 signed in, fleet {FLEET} created, {SLOT} shared, m2..m4 joined and synced")
    loops = [threading.Thread(target=token_loop, args=(m,), daemon=True) for m in machines.values() for _ in range(CALLERS)]
    loops.append(threading.Thread(target=refresh_loop, daemon=True))
    watchers = [threading.Thread(target=sampler, daemon=True), threading.Thread(target=reuse_monitor, daemon=True)]
    faults = threading.Thread(target=fault_loop, daemon=True)
    cut_len = CUT_SECONDS if SECS >= 50 else SECS / 3
    cut_at = LOAD_START + rng.uniform(0.2 * SECS, max(0.2 * SECS, SECS - cut_len - 3))
    cutter = threading.Thread(target=cut_off, args=(cut_at, cut_len), daemon=True)
    attack = threading.Thread(target=attack_loop, args=(DEADLINE - ATTACK_QUIET,), daemon=True)
    watchers.append(threading.Thread(target=guardian, daemon=True))
    extra = []
    if REMOVED:
        at = LOAD_START + random.Random(SEED ^ 0x40).uniform(0.15, 0.3) * SECS
        extra.append(threading.Thread(target=remove_d, args=(at,), daemon=True))
        watchers.append(threading.Thread(target=log_keeper, daemon=True))
    note(f"the attacker writes the prefix from now until {SECS - ATTACK_QUIET} s (its own age key {attacker.recipient[:12]}…, "
         f"the machines' TLS client certificate, stock etcdctl)")
    for t in loops + watchers + [faults, cutter, attack] + extra:
        t.start()

    # Agents that die without being killed are a failure; they are started again.
    while now() < DEADLINE:
        time.sleep(0.5)
        for m in machines.values():
            with m.agent_lock:
                p = m.agent
                died = p is not None and p.poll() is not None and p.pid not in killed_pids
                if died:
                    m.agent = None
            if died:
                fail("agents", f"{m.name}'s agent exited {p.returncode} by itself (see {m.root}/agent.log)")
                m.start_agent()

    note("load and faults end: the loops finish their commands, etcd is made whole")
    stop_faults.set()
    stop_load.set()
    faults.join(timeout=300)
    cutter.join(timeout=120)
    attack.join(timeout=60)
    for t in extra:
        t.join(timeout=150)
    with etcd_lock:
        down = sorted(members_down)
    for name in down:
        # A restart scheduled by a fault may be under way: wait for it, else restart here.
        end = now() + 60
        while name in members_down and now() < end:
            time.sleep(0.5)
        if name in members_down:
            restart_member(name)
    for m in machines.values():
        if m.agent is None:
            m.start_agent()
    r = cluster("health", "60", timeout=120)
    t_whole = now()
    if r.returncode != 0:
        fail("convergence", f"etcd is not healthy after the faults: {first_line(r.stderr)}")
    note("etcd whole and healthy")
    for t in loops:
        t.join(timeout=CALL_TIMEOUT + 30)
        if t.is_alive():
            fail("exits", "a command loop did not end")
    t_loops = now()
    t_locks = stale_locks_gone()
    if t_locks is None:
        fail("convergence", "a fleet lock key was still there 100 s after the end")
        t_locks = now()
    note(f"loops ended {t_loops - t_whole:.1f} s and the last fleet lock was gone {t_locks - t_whole:.1f} s after etcd was whole")

    # The attacker stopped ATTACK_QUIET s before the end; what it left in the slot is undone by a
    # sign-in (the guardian), as a person would once the slot stops refreshing.
    end = now() + 120
    while (restoring.is_set() or slot_damage() is not None) and now() < end:
        time.sleep(0.5)
        if after_attack["stopped"] is not None and not restoring.is_set():
            follow_recovery(slot_damage())
    if after_attack["stopped"] is not None:
        follow_recovery(slot_damage())
    if slot_damage() is not None:
        fail("convergence", f"the fleet's {SLOT} was still damaged 120 s after the end: {slot_damage()}")
    if REMOVED:
        end = now() + 60
        while (restoring_log.is_set() or log_damage() != []) and now() < end:
            time.sleep(0.5)
        if log_damage():
            fail("convergence", f"the log was still tampered with 60 s after the end: {', '.join(log_damage())}")

    # Convergence, with the agents running.
    t_from = max(t_whole, t_locks)
    took, tries, why = converge(t_from)
    if after_attack["stopped"] is not None:
        follow_recovery(slot_damage())
    if took is None:
        fail("convergence", f"the machines did not converge: {why}")
    elif took > CONVERGE_LIMIT:
        fail("convergence", f"the machines converged only {took:.1f} s after etcd was whole (limit {CONVERGE_LIMIT} s)")
    stop_watch.set()
    for t in watchers:
        t.join(timeout=300)
    status = {}
    rc, out, _, _ = machines["m1"].run("fleet", "status", "--json")
    if rc == 0:
        status = json.loads(out)

    # Stop the agents, then doctor everywhere.
    for m in machines.values():
        rc = m.stop_agent()
        if rc != 0:
            fail("processes", f"{m.name}'s agent exited {rc} after SIGTERM" if rc is not None else f"{m.name}'s agent ignored SIGTERM for 15 s")
    for m in machines.values():
        rc, problems = doctor(m)
        if rc == 0:
            continue
        # What the attacker left under the prefix is reported (a value under another slot's name
        # refused, keys that do not verify): that is doctor doing its job, and no member can
        # remove them (an operator would, with etcdctl). Counted, not a failure.
        left = [p for p in problems if attacker_leftover(p)]
        if left:
            doctor_saw_attack[m.name] = len(left)
        problems = [p for p in problems if not attacker_leftover(p)]
        if not problems:
            continue
        # A write killed midway leaves GLib's temporary file (no secret in the clear): that is
        # what kill -9 does, and `doctor --repair` removes it. Anything else is a failure.
        others = [p for p in problems if not str(p).startswith("interrupted writes left temporary files")]
        if others:
            fail("doctor", f"{m.name}: doctor exited {rc}: {problems}")
            continue
        m.run("doctor", "--repair", "--json", timeout=120)
        rc, after = doctor(m)
        after = [p for p in after if not attacker_leftover(p)]
        if after:
            fail("doctor", f"{m.name}: doctor exited {rc} after doctor --repair: {after} (before: {problems})")
        else:
            repairs.append(f"{m.name}: {'; '.join(map(str, problems))}")

    # Lanyard processes left (3 s grace for a worker finishing).
    end = now() + 3
    while True:
        left = lanyard_procs()
        if not left or now() > end:
            break
        time.sleep(0.1)
    if ORPHANS:
        with open(ORPHANS) as f:
            at_check = len(f.readlines())
        with open(f"{TMP}/orphans-at-check", "w") as f:
            f.write(str(at_check))
    for pid, comm, cmd, state in left:
        fail("processes", f"{'zombie' if state == 'Z' else 'still running'}: {pid} {cmd or comm}")
        if state != "Z":
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    with open(f"{TMP}/calls.jsonl", "w") as f:
        for rec in calls:
            f.write(json.dumps({**rec, "t0": round(rel(rec["t0"]), 3), "t1": round(rel(rec["t1"]), 3)}) + "\n")
    final = stats()
    if final["refresh_reused"] > sum(1 for _ in reuses):
        for rec in examine_reuse({r["family"] for r in reuses}):
            reuses.append(rec)
            if not rec["lost_ok"]:
                fail("reuse", f"refresh token reused ({rec['family']}) at the end; its successor was held: {', '.join(rec['seen']) or 'nowhere'}")
    families = http("/_test/tokens")["families"]
    # What the attacker could read: its key on every value under the prefix, once more at the end.
    if attacker.scan() is None:
        fail("harness", "the attacker's last scan found etcd unanswering")
    if not history.caught_up():
        fail("harness", f"the watch of etcd's history did not catch up (last revision {history.last_rev})")
    history.close()
    with open(f"{TMP}/history.jsonl", "w") as f:
        for e in history.events:
            a = attacker_event(e)
            f.write(json.dumps({"rev": e["rev"], "t_lo": round(rel(e["t_lo"]), 3), "t_hi": round(rel(e["t_hi"]), 3), "key": e["key"],
                                "value": None if e["value"] is None else digest(e["value"]),
                                "generation": generation_of(e["value"]), "attacker": a["label"] if a else None}) + "\n")
    with open(f"{attacker.dir}/log.jsonl", "w") as f:
        for a in attacker.log:
            f.write(json.dumps({**a, "t0": round(rel(a["t0"]), 3), "t1": round(rel(a["t1"]), 3),
                                "value": None if a["value"] is None else digest(a["value"])}) + "\n")
    report(final, families, took, tries, status, t_whole, t_locks)
    return 0 if not failures else 1


def events_of(m):
    try:
        with open(f"{m.root}/state/lanyard/events.jsonl") as f:
            return [json.loads(l) for l in f if l.strip()]
    except (OSError, ValueError):
        return []


def report(final, families, took, tries, status, t_whole, t_locks):
    # Exit statuses.
    by_kind = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    bad = []
    expired_served = 0
    for rec in calls:
        why = classify(rec)
        by_kind[rec["kind"]]["killed" if rec["killed"] else ("hung" if rec["hung"] else rec["rc"])] += 1
        if why is None:
            bad.append(rec)
        elif why not in ("ok", "killed"):
            reasons[f"{rec['kind']} {rec['rc']}: {why}"] += 1
        if rec.get("exp") is not None and rec["exp"] < rec["t0"] - 1:
            expired_served += 1
    for rec in bad[:20]:
        fail("exits", f"{rec['m']} {rec['kind']} at {rel(rec['t0']):.1f} s: "
                      f"{'hung' if rec['hung'] else 'exit ' + str(rec['rc'])} after {rec['t1'] - rec['t0']:.1f} s: {rec['err']}")
    if len(bad) > 20:
        fail("exits", f"... and {len(bad) - 20} more")
    if expired_served:
        fail("exits", f"{expired_served} `token` calls printed an access token that had expired before the call began")

    # Every token served was issued by the server to the victim's account; the attacker's never.
    victims = {digest(a["access_token"]) for f in families if f["account_id"] == attacker.victim for a in f["access_tokens"]}
    others = {digest(a["access_token"]) for f in families if f["account_id"] != attacker.victim for a in f["access_tokens"]}
    printed = [r for r in calls if r["kind"] == "token" and r["rc"] == 0 and r.get("digest")]
    forged = digest("at-attacker")
    not_victims = [r for r in printed if r["digest"] not in victims]
    for r in not_victims[:5]:
        what = "the attacker's at-attacker" if r["digest"] == forged else "a token of another account" if r["digest"] in others \
            else "a token the server never issued"
        fail("served", f"{r['m']} `token` at {rel(r['t0']):.1f} s printed {what}")
    if digest("rt-attacker") in held_seen:
        fail("served", f"rt-attacker was held by {', '.join(sorted(held_seen[digest('rt-attacker')]))}")
    if attacker.tried == 0:
        fail("secrecy", "no sealed value was found under the prefix to try the attacker's key on")
    d_tried, d_opened = removed_secrecy()
    for key, rev in d_opened[:10]:
        fail("secrecy", f"{key} at revision {rev}, written after d's removal, opens with d's key (age -d -i d.key)")
    if REMOVED and removal and d_tried == 0:
        fail("secrecy", "no value written after d's removal was found to try d's key on")
    if REMOVED and not removal:
        fail("harness", "d was never removed")
    if sum(attacker.ops.values()) == 0:
        fail("harness", "the attacker made no operation")

    tokens = [r for r in calls if r["kind"] == "token"]
    served = [r for r in tokens if r["rc"] == 0]
    durations = [r["t1"] - r["t0"] for r in tokens if not r["killed"]]
    def counts(kind):
        c = by_kind[kind]
        keys = sorted((k for k in c if isinstance(k, int)), key=lambda k: (k != 0, k)) + [k for k in ("killed", "hung") if k in c]
        return ", ".join(f"{k}: {c[k]}" for k in keys) or "none"

    no_quorum = sum(e - s for s, e, _ in windows["no quorum"])
    lost_ok = [r for r in reuses if r["lost_ok"]]
    unexplained = [r for r in reuses if not r["lost_ok"]]
    events = collections.Counter()
    for m in machines.values():
        for e in events_of(m):
            if e.get("slot") == SLOT:
                events[e.get("event")] += 1
                if e.get("event") == "error":
                    events["error " + str(e.get("code"))] += 1
    print()
    print(f"calls: token {len(tokens)} ({counts('token')}), refresh {by_kind['refresh'].total()} ({counts('refresh')})")
    print(f"tokens served: {len(served)}; `token` p50 {statistics.median(durations) * 1000 if durations else 0:.0f} ms, "
          f"p95 {percentile(durations, 0.95) * 1000:.0f} ms, max {max(durations or [0]):.1f} s")
    if reasons:
        print("allowed failures: " + "; ".join(f"{k} x{v}" for k, v in sorted(reasons.items())))
    print(f"faults: {sum(v for k, v in kills.items() if k not in ('etcd leader', 'quorum loss'))} kills: "
          f"{kills['token caller']} token callers, {kills['refresh caller']} refresh callers, {kills['refresh worker']} refresh workers, "
          f"{kills['agent']} agents, {kills['etcd member']} etcd members ({kills['etcd leader']} leaders, "
          f"{kills['quorum loss']} quorum losses)")
    longest = max([last - first for key, first, last in lock_heads if key] or [0])
    print(f"fleet lock: the longest any one key owned it: {longest:.0f} s (a killed holder's lease outlives it by up to "
          f"its 20 s, and each leader election starts that again)")
    print(f"no quorum: {no_quorum:.0f} s in {len(windows['no quorum'])} spells; cut off: "
          + (f"{cutoff['machine']} for {cutoff['end'] - cutoff['start']:.0f} s" if cutoff else "none"))
    unlogged = final["refreshes_succeeded"] - events["refresh"]
    print(f"refreshes at the server not logged by any machine: {unlogged} (a worker killed after the server's answer "
          f"and before it finished; at least as many as the lost-ok reuses)")
    if unlogged < len(lost_ok):
        fail("reuse", f"{len(lost_ok)} reuses counted lost-ok, but only {unlogged} refreshes were left unfinished")
    print(f"events: {events['refresh']} refreshes and {events['adopt']} adoptions logged on the machines, "
          f"{events['error']} errors ({', '.join(f'{k[6:]} {v}' for k, v in sorted(events.items()) if k.startswith('error '))})")
    print(f"leader at the end: {status.get('leader')}; families at the server: {len(families)}")
    print(f"server: refreshes_succeeded {final['refreshes_succeeded']}, refresh_reused {final['refresh_reused']} "
          f"(lost-ok {len(lost_ok)}, unexplained {len(unexplained)}), refresh_invalidated {final['refresh_invalidated']}")
    if lost_ok:
        print(f"lost-ok: {len(lost_ok)} reuses of a token whose successor the server issued but no machine ever held "
              "(not in any store, recovery file or etcd): the refresh worker was killed between the server's answer and "
              "its recovery file; the slot was signed in again")
    a = attacker
    print(f"attacker: {sum(a.ops.values())} operations in {SECS - ATTACK_QUIET} s ("
          + ", ".join(f"{label} {a.ops[label]}" for label, _, _ in ATTACKS if a.ops[label])
          + f"), {sum(a.refused.values())} refused by etcd (no quorum, a member down); keys: "
          + ", ".join(f"{k} {v}" for k, v in sorted(a.targets.items())))
    n = guard_stats["damaged"]
    print(f"attacker's damage: the slot's value was of no use {n} time{'' if n == 1 else 's'} ("
          + ", ".join(f"{k} {v}" for k, v in sorted(guard_stats["why"].items())) + f"), {guard_stats['total']:.0f} s in all, "
          f"the longest {guard_stats['longest']:.1f} s; {guard_stats['signins']} sign-in{'' if guard_stats['signins'] == 1 else 's'} "
          f"on a member undid it; "
          f"{a.scans} scans tried its key on {a.tried} sealed values, {len(a.readable)} opened; "
          f"refused by `fleet sync` at the end: {', '.join(sorted(refused_elsewhere)) or 'nothing'}")
    if REMOVED and removal:
        moves = ", ".join(f"{k} {a.ops[k]}" for k in ("hide removal", "fork", "entry by d", "replay before removal") if a.ops[k])
        forged_d = sum(1 for x in a.log if x["ok"] and x["writer"] == "d")
        print(f"removed machine: d removed by {removal['by']} at {rel(removal['t']):.1f} s (log entry {removal['seq']}, "
              f"`fleet remove` took {removal['took']:.1f} s"
              + (f", then failed after writing it: {removal['failed'][-1]}" if removal["rc"] != 0 else "")
              + (f", {len(removal['failed'])} failed tries" if removal["failed"] and removal["rc"] == 0 else "")
              + f"); then the attacker, holding d's identity: {moves or 'no log moves'}"
              f", {forged_d} credentials signed with d's key; the log was tampered with {log_stats['damaged']} times, "
              f"{log_stats['total']:.0f} s in all, the longest {log_stats['longest']:.1f} s, put back {log_stats['restored']} times"
              f"{' (and ' + ' '.join(RESOLVE) + ' run on every machine)' if RESOLVE else ''}; d's key tried on {d_tried} "
              f"values written after the removal, {len(d_opened)} opened")
    aa = after_attack
    put_backs = [r for r in calls if r.get("put_back")]
    late = [r for r in put_backs if aa["stopped"] is not None and r["t1"] > aa["stopped"]]
    if aa["stopped"] is not None:
        usable = f"{aa['usable'] - aa['stopped']:.1f} s" if aa["usable"] else "never (within the run)"
        adopted = f"{aa['adopted'] - aa['stopped']:.1f} s" if aa["adopted"] else "never (within the run)"
        print(f"after the attacker: the slot was of no use for {usable} after it stopped (then: {aa['damage']}), and every "
              f"machine held the fleet's value {adopted} after; {len(put_backs)} commands refused a value it put back "
              f"({len(late)} after it stopped), each explained by its log")
    if took is not None:
        print(f"convergence: {took:.1f} s after etcd was whole and no fleet lock was held ({tries} rounds of `fleet sync` + "
              f"`token` on the 4 machines; limit {CONVERGE_LIMIT} s); the last lock was gone {t_locks - t_whole:.1f} s after etcd was whole")
    else:
        print(f"convergence: none within the limit ({CONVERGE_LIMIT} s)")

    checks = [
        ("reuse", f"{len(unexplained)} unexplained reuses, {len(lost_ok)} lost-ok"),
        ("exits", f"{len(bad)} unexpected exit statuses in {len(calls)} commands, {expired_served} expired tokens served"),
        ("convergence", f"{took:.1f} s" if took is not None else "did not converge"),
        ("secrecy", f"0 of {attacker.tried} sealed values under the prefix opened with the attacker's key ({attacker.scans} scans)"
                    + (f"; 0 of {d_tried} values written after d's removal opened with d's key" if REMOVED else "")),
        ("served", f"all {len(printed)} tokens served were issued to the victim's account; at-attacker never served, "
                   "rt-attacker never held"),
        ("doctor", "exit 0 on m1..m4" + (f" ({len(repairs)} after `doctor --repair` removed the temporary file of a "
                                          f"killed write: {'; '.join(repairs)})" if repairs else "")
                   + (f", or 1 reporting only the attacker's leftovers under the prefix ({len(doctor_saw_attack)} machines)"
                      if doctor_saw_attack else "")),
        ("processes", "none left"),
        ("agents", "none died by itself"),
        ("harness", "every fault made and undone"),
    ]
    print()
    failed = {inv for inv, _ in failures}
    for inv, ok_text in checks:
        texts = [t for i, t in failures if i == inv]
        print(f"invariant {inv}: " + ("ok, " + ok_text if not texts else f"FAILED ({len(texts)}): {texts[0]}"))
    print("invariants: " + ("all held" if not failed else "FAILED: " + ", ".join(sorted(failed))))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    server = None
    status = 1
    try:
        status = main()
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            status = 1
        else:
            status = e.code if isinstance(e.code, int) else 1
    finally:
        stop_faults.set()
        stop_load.set()
        stop_watch.set()
        if history is not None:
            history.close()
        for m in machines.values():
            try:
                m.stop_agent(timeout=5)
            except Exception:
                pass
            for pid, (p, _) in list(m.running.items()):
                try:
                    p.kill()
                except OSError:
                    pass
        cluster("stop", timeout=60)
    sys.exit(status)
