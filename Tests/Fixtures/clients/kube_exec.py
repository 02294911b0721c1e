#!/usr/bin/env python3
"""Drives a Kubernetes exec credential plugin through the real Python client (`kubernetes`).

    kube_exec.py --command PATH [--arg A]... [--env K=V]...
                 [--api-version client.authentication.k8s.io/v1|client.authentication.k8s.io/v1beta1]
                 [--expect-token-file FILE] [--requests N] [--sleep S]

1. Makes a self-signed certificate for 127.0.0.1/localhost and starts a stub HTTPS Kubernetes
   API server on 127.0.0.1:0 (a thread). `GET /api/v1/namespaces` answers a NamespaceList with
   one namespace, "default", only when `Authorization: Bearer <token>` equals the stripped
   contents of --expect-token-file (re-read at every request; without the option any non-empty
   bearer token is accepted); otherwise 401 with a Status body. Other paths: 404 Status.
2. Writes a kubeconfig whose user is
   exec: {apiVersion, command: <wrapper>, args, env: [{name, value}], interactiveMode: Never,
          provideClusterInfo: false}
   where <wrapper> is a generated /bin/sh script that appends the KUBERNETES_EXEC_INFO it was
   given (one line) to a log and then execs PATH with its arguments, so plugin runs are counted.
3. kubernetes.config.load_kube_config(config_file=...) (this already runs the plugin once), then
   N x CoreV1Api().list_namespace() on one ApiClient, S seconds apart.

Prints one JSON line:
    {"ok", "namespaces", "requests", "authorised", "plugin_runs", "statuses", "exec_info",
     "exec_errors", "error"}
ok: every request answered 200; namespaces: names from the last 200; requests/authorised: what
the stub server saw; plugin_runs: wrapper executions; statuses: HTTP status per request (0 = no
HTTP answer); exec_info: the parsed KUBERNETES_EXEC_INFO of each run (null when unset);
exec_errors: what the client logged about the plugin (it logs plugin failures and carries on
without credentials); error: first failure or null. Exit 0 when ok, 1 otherwise, 2 bad usage.

Client behaviour (kubernetes 37.0.2): the plugin runs once in load_kube_config; before every
request the client re-runs it only when the last status had an expirationTimestamp that is
within 5 minutes of now (or past); without expirationTimestamp it never re-runs. A 401 does not
trigger a re-run. apiVersion is not validated against a list (v1 and v1beta1 both work) but the
plugin's answer must carry the same apiVersion. interactiveMode is ignored.
"""
import argparse
import datetime
import http.server
import ipaddress
import json
import logging
import os
import shlex
import shutil
import ssl
import sys
import tempfile
import threading
import time
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
NAMESPACE_LIST = {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {},
                  "items": [{"metadata": {"name": "default"}}]}


def make_cert(directory):
    """Self-signed certificate (also its own CA) for 127.0.0.1 and localhost; returns (cert, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-exec stub 127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=True, crl_sign=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(directory, "stub-ca.crt")
    key_path = os.path.join(directory, "stub.key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.authorised = 0


def make_handler(stats, token_file):
    def status_body(code, reason, message):
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "code": code}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # requests are summarised in the JSON output
            pass

        def send_json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def authorised(self):
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer "):
                return False
            presented = auth[len("Bearer "):].strip()
            if not presented:
                return False
            if token_file is None:
                return True
            try:
                with open(token_file, encoding="utf-8") as f:
                    expected = f.read().strip()
            except OSError:
                return False
            return bool(expected) and presented == expected

        def do_GET(self):
            with stats.lock:
                stats.requests += 1
            path = urllib.parse.urlsplit(self.path).path
            if path != "/api/v1/namespaces":
                self.send_json(404, status_body(404, "NotFound", "the server could not find the requested resource"))
                return
            if not self.authorised():
                self.send_json(401, status_body(401, "Unauthorized", "Unauthorized"))
                return
            with stats.lock:
                stats.authorised += 1
            self.send_json(200, NAMESPACE_LIST)

    return Handler


def start_server(cert_path, key_path, stats, token_file):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(stats, token_file))
    server.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_path, key_path)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    return server


def write_wrapper(directory, command, runs_log):
    path = os.path.join(directory, "exec-plugin-wrapper.sh")
    with open(path, "w", encoding="utf-8") as f:
        f.write("#!/bin/sh\n"
                f"printf '%s\\n' \"${{KUBERNETES_EXEC_INFO-}}\" >> {shlex.quote(runs_log)}\n"
                f"exec {shlex.quote(command)} \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def write_kubeconfig(directory, port, cert_path, exec_cfg):
    cfg = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "stub", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                  "certificate-authority": cert_path}}],
        "users": [{"name": "lanyard", "user": {"exec": exec_cfg}}],
        "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "lanyard"}}],
        "current-context": "stub",
    }
    path = os.path.join(directory, "kubeconfig")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)  # JSON is YAML
    return path


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def parse_args(argv):
    p = argparse.ArgumentParser(prog="kube_exec.py")
    p.add_argument("--command", required=True, help="the exec plugin (absolute path or on PATH)")
    p.add_argument("--arg", action="append", default=[], help="plugin argument (repeatable)")
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="exec env entry for the plugin (repeatable)")
    p.add_argument("--api-version", default=API_VERSIONS[0], choices=API_VERSIONS)
    p.add_argument("--expect-token-file", help="file holding the token the stub server accepts")
    p.add_argument("--requests", type=int, default=2, help="list_namespace calls (default 2)")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds between requests")
    a = p.parse_args(argv)
    for e in a.env:
        if "=" not in e or e.startswith("="):
            p.error(f"--env wants K=V, got {e!r}")
    if a.requests < 0:
        p.error("--requests must be >= 0")
    return a


def main(argv):
    a = parse_args(argv)
    command = a.command if os.sep in a.command else (shutil.which(a.command) or a.command)
    command = os.path.abspath(command) if os.sep in command else command
    result = {"ok": False, "namespaces": [], "requests": 0, "authorised": 0, "plugin_runs": 0,
              "statuses": [], "exec_info": [], "exec_errors": [], "error": None}
    collect = Collect()
    logging.getLogger().addHandler(collect)
    stats = Stats()
    with tempfile.TemporaryDirectory(prefix="kube-exec.") as work:
        cert_path, key_path = make_cert(work)
        server = start_server(cert_path, key_path, stats, a.expect_token_file)
        runs_log = os.path.join(work, "plugin-runs.log")
        try:
            exec_cfg = {
                "apiVersion": a.api_version,
                "command": write_wrapper(work, command, runs_log),
                "args": list(a.arg),
                "env": [{"name": k, "value": v} for k, v in (e.split("=", 1) for e in a.env)],
                "interactiveMode": "Never",
                "provideClusterInfo": False,
            }
            kubeconfig = write_kubeconfig(work, server.server_address[1], cert_path, exec_cfg)
            errors = []
            try:
                from kubernetes import client, config
                from kubernetes.client.exceptions import ApiException
                config.load_kube_config(config_file=kubeconfig)
                api = client.CoreV1Api(client.ApiClient())
                for i in range(a.requests):
                    if i and a.sleep > 0:
                        time.sleep(a.sleep)
                    try:
                        ns = api.list_namespace(_request_timeout=15)
                        result["statuses"].append(200)
                        result["namespaces"] = [item.metadata.name for item in ns.items]
                    except ApiException as e:
                        result["statuses"].append(e.status or 0)
                        errors.append(f"request {i + 1}: HTTP {e.status} {e.reason}: {(e.body or '')[:300]}")
                    except Exception as e:  # noqa: BLE001 - TLS, connection, plugin output errors
                        result["statuses"].append(0)
                        errors.append(f"request {i + 1}: {type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001 - load_kube_config and friends
                errors.append(f"{type(e).__name__}: {e}")
            result["exec_errors"] = collect.messages
            result["ok"] = not errors and len(result["statuses"]) == a.requests
            if errors:
                result["error"] = errors[0]
        finally:
            server.shutdown()
            server.server_close()
        with stats.lock:
            result["requests"], result["authorised"] = stats.requests, stats.authorised
        try:
            with open(runs_log, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            lines = []
        result["plugin_runs"] = len(lines)
        for line in lines:
            try:
                result["exec_info"].append(json.loads(line) if line else None)
            except ValueError:
                result["exec_info"].append(line)
    if not result["ok"] and result["error"] is None:
        result["error"] = "; ".join(result["exec_errors"]) or "failed"
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
