#!/usr/bin/env python3
"""Drives docker-credential-lanyard through the real docker SDK (docker.credentials.Store).

    docker_credentials.py get SERVER
    docker_credentials.py list
    docker_credentials.py store SERVER USER SECRET
    docker_credentials.py erase SERVER

Store("lanyard") runs `docker-credential-lanyard` found on PATH (shutil.which), with this
process's environment. Prints exactly one JSON line on stdout:

    get    {"found": true, "ServerURL": ..., "Username": ..., "Secret": ...}
           {"found": false, "error": "CredentialsNotFound"}   (exit 0)
    list   the object Store.list() returned, e.g. {"https://ghcr.io": "user"}
    store  {"ok": true}
    erase  {"ok": true}

Any other StoreError (helper missing, non-zero exit without the not-found message) prints
{"found"|"ok": false, "error": "StoreError" (or its subclass name), "message": "..."} and exits 3.
Anything unexpected (e.g. the helper printed invalid JSON) prints the same shape with the
exception's class name and exits 1. Bad usage exits 2.

Note: docker.credentials recognises "not found" only when the helper's STDOUT contains
"credentials not found in native keychain" (stderr is not captured), or when `get` answers
with an empty Username and Secret.
"""
import json
import sys
import warnings

from docker.credentials import Store
from docker.credentials.errors import CredentialsNotFound, StoreError

PROGRAM = "lanyard"
USAGE = "usage: docker_credentials.py get SERVER | list | store SERVER USER SECRET | erase SERVER"
ARITY = {"get": 1, "list": 0, "store": 3, "erase": 1}


def emit(obj, code=0):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def main(argv):
    if not argv or argv[0] not in ARITY or len(argv) - 1 != ARITY[argv[0]]:
        print(USAGE, file=sys.stderr)
        return 2
    action, args = argv[0], argv[1:]
    key = "found" if action == "get" else "ok"
    with warnings.catch_warnings():
        # Store() warns (to stderr) when the helper is not on PATH; _execute then raises StoreError.
        warnings.simplefilter("ignore")
        store = Store(PROGRAM)
    try:
        if action == "get":
            res = store.get(args[0])
            emit({"found": True, "ServerURL": res.get("ServerURL"),
                  "Username": res.get("Username"), "Secret": res.get("Secret")})
        elif action == "list":
            emit(store.list())
        elif action == "store":
            store.store(args[0], args[1], args[2])
            emit({"ok": True})
        else:
            store.erase(args[0])
            emit({"ok": True})
    except CredentialsNotFound as e:
        if action == "get":
            emit({"found": False, "error": type(e).__name__})
        emit({key: False, "error": type(e).__name__, "message": str(e)}, 3)
    except StoreError as e:
        emit({key: False, "error": type(e).__name__, "message": str(e)}, 3)
    except Exception as e:  # noqa: BLE001 - report anything else as an unexpected error
        emit({key: False, "error": type(e).__name__, "message": str(e)}, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
