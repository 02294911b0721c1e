#!/usr/bin/env python3
"""Emulator of ChatGPT's device and browser sign-in (as used by Codex CLI) for Lanyard's tests.

Test fixture only: it speaks the wire protocol (device user code, device token polling, the
browser's /oauth/authorize with PKCE S256 and the registered loopback redirects only, the
PKCE authorization-code exchange, JSON refresh with rotation and reuse detection, the usage
endpoint) with scripted behaviour driven by /_test/ hooks. Tokens are HS256 JWTs signed with a
fixed, published key; clients only decode them. Everything is documented in README.md next to
this file.

    python chatgpt_emulator.py --port 0 [--host 127.0.0.1] [--accounts FILE|JSON]
prints exactly one line on stdout, ``READY http://127.0.0.1:PORT``, then logs to stderr only.
The streaming Responses endpoint (WebSocket and SSE) lives in streaming.py.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

import base64
import copy
import hashlib
import html
import json
import logging
import os
import secrets
import threading
import time
import uuid
from urllib.parse import urlencode

from flask import Flask, Response, jsonify, redirect, request

from fixture_common import (
    hook,
    register_common_hooks,
    FaultBook,
    FaultMiddleware,
    HS256Signer,
    HookError,
    base_arg_parser,
    hook_body,
    serve,
    setup_logging,
    want_bool,
    want_number,
    want_str,
)
import streaming

log = logging.getLogger("chatgpt-emulator")

CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
SIGNING_KEY = "lanyard-chatgpt-emulator-hs256-test-key-not-a-secret"
AUTH_CLAIM = "https://api.openai.com/auth"
PROFILE_CLAIM = "https://api.openai.com/profile"
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ23456789"
# The redirect URIs OpenAI's authorization server accepts for Codex's client (codex-rs/login:
# DEFAULT_PORT 1455, FALLBACK_PORT 1457 "on the Hydra redirect URI allow-list"). Tests that cannot
# use these machine-wide ports register others explicitly with --redirect-uri.
REGISTERED_REDIRECT_URIS = ("http://localhost:1455/auth/callback", "http://localhost:1457/auth/callback")

ENDPOINTS = {
    "/api/accounts/deviceauth/usercode": "usercode",
    "/api/accounts/deviceauth/token": "deviceauth_token",
    "/oauth/token": "oauth_token",
    "/oauth/authorize": "authorize",
    "/backend-api/wham/usage": "usage",
    "/codex/device": "device_page",
}
ENDPOINT_NAMES = tuple(ENDPOINTS.values())

DEFAULT_ACCOUNT = {
    "email": "test.user@example.com",
    "plan": "plus",
    "account_id": "11111111-2222-4333-8444-555555555555",
    "user_id": "user-TestUser0000000000001",
    "fedramp": False,
}

# name -> (minimum, integer?)
NUMERIC_CONFIG = {
    "access_token_lifetime": (1, True),
    "id_token_lifetime": (1, True),
    "device_code_lifetime": (1, True),
    "auth_code_lifetime": (1, True),
    "interval": (0, True),
}
BOOL_CONFIG = (
    "interval_as_string",
    "device_signin_enabled",
    "include_expires_in",
    "strict_encoding",
    "reuse_revokes_access",
    "browser_auto_approve",
)
ERROR_SHAPES = ("error.code", "error", "code")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def s256(verifier: str) -> str:
    return b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def normalize_user_code(code: str) -> str:
    return "".join(ch for ch in code.upper() if ch.isalnum())


def new_user_code() -> str:
    pick = lambda n: "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(n))  # noqa: E731
    return f"{pick(4)}-{pick(5)}"


def account_for_email(email: str) -> dict:
    digest = hashlib.sha256(email.lower().encode("utf-8")).digest()
    return {
        "email": email,
        "plan": DEFAULT_ACCOUNT["plan"],
        "account_id": str(uuid.UUID(bytes=digest[:16], version=4)),
        "user_id": "user-" + b64url(digest[16:32])[:21],
        "fedramp": False,
    }


def check_account(raw, where: str) -> dict:
    """Validates an account object (from --accounts or a hook); returns it normalised."""
    if not isinstance(raw, dict):
        raise HookError(f"{where}: an account must be an object")
    out = {}
    for key in ("email", "plan", "account_id", "user_id"):
        if key in raw and raw[key] is not None:
            if not isinstance(raw[key], str) or not raw[key]:
                raise HookError(f"{where}: '{key}' must be a non-empty string")
            out[key] = raw[key]
    if "fedramp" in raw and raw["fedramp"] is not None:
        if not isinstance(raw["fedramp"], bool):
            raise HookError(f"{where}: 'fedramp' must be true or false")
        out["fedramp"] = raw["fedramp"]
    unknown = set(raw) - {"email", "plan", "account_id", "user_id", "fedramp"}
    if unknown:
        raise HookError(f"{where}: unknown account field(s): {', '.join(sorted(unknown))}")
    return out


class State:
    def __init__(self, config: dict, accounts: list[dict]):
        self.lock = threading.RLock()
        self.initial_config = dict(config)
        self.initial_accounts = accounts
        self.issuer = ""
        self.signer = HS256Signer(SIGNING_KEY)
        self.faults = FaultBook()
        self.reset_hooks: list = []  # called at the end of every reset() (streaming.py adds one)
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.config = copy.deepcopy(self.initial_config)
            self.accounts: dict[str, dict] = {}  # account_id -> account
            self.default_account_id = None
            for acct in self.initial_accounts:
                self.upsert_account(acct)
            if self.default_account_id is None:
                self.upsert_account(DEFAULT_ACCOUNT)
            self.devices: dict[str, dict] = {}  # device_auth_id -> device
            self.user_codes: dict[str, str] = {}  # normalized user_code -> device_auth_id
            self.codes: dict[str, dict] = {}  # authorization_code -> grant
            self.families: dict[str, dict] = {}
            self.refresh: dict[str, dict] = {}  # refresh token -> record
            self.access: dict[str, dict] = {}  # access token -> record
            self.usage_scripts: dict[str, dict] = {}  # account_id -> script
            self.usage_limits: dict[str, dict] = {}  # account_id or "*" -> limit
            self.browser_decisions: list[dict] = []  # queued answers of /oauth/authorize, first first
            self.faults.clear()
            self.seq = 0
            self.stats = {
                "requests": {name: 0 for name in ENDPOINT_NAMES},
                "faults_injected": {name: 0 for name in ENDPOINT_NAMES},
                "usercodes_issued": 0,
                "usercode_disabled": 0,
                "device_polls": 0,
                "device_poll_results": {
                    "pending": 0,
                    "approved": 0,
                    "denied": 0,
                    "expired": 0,
                    "invalid": 0,
                },
                "approvals": 0,
                "denials": 0,
                "authorize_requests": 0,
                "authorize_refused": 0,
                "authorize_approved": 0,
                "authorize_denied": 0,
                "code_exchanges": 0,
                "code_exchange_errors": 0,
                "refresh_requests": 0,
                "refreshes_succeeded": 0,
                "refresh_reused": 0,
                "refresh_invalidated": 0,
                "refresh_expired": 0,
                "refresh_errors": 0,
                "families_revoked": 0,
                "usage_requests": 0,
                "usage_ok": 0,
                "usage_unauthorized": 0,
                "usage_limited": 0,
            }
            for reset_hook in self.reset_hooks:
                reset_hook()

    # -- accounts ---------------------------------------------------------------------------

    def upsert_account(self, fields: dict) -> dict:
        """Creates/updates an account keyed by account_id (or by email when no id given)."""
        with self.lock:
            existing = None
            if fields.get("account_id"):
                existing = self.accounts.get(fields["account_id"])
            elif fields.get("email"):
                existing = next(
                    (a for a in self.accounts.values() if a["email"].lower() == fields["email"].lower()),
                    None,
                )
            if existing is None:
                base = account_for_email(fields.get("email") or DEFAULT_ACCOUNT["email"])
                base.update(fields)
                existing = base
            else:
                existing.update(fields)
            self.accounts[existing["account_id"]] = existing
            if self.default_account_id is None:
                self.default_account_id = existing["account_id"]
            return existing

    def identity_for_approval(self, fields: dict) -> dict:
        """Account for an approval: explicit fields win over the registered account they
        name (by account_id, else email), else the default account."""
        if not fields.get("account_id") and not fields.get("email"):
            fields = dict(fields, account_id=self.default_account_id)
        return self.upsert_account(fields)

    # -- devices ----------------------------------------------------------------------------

    def find_device(self, user_code: str | None) -> dict:
        if user_code is None:
            pending = [d for d in self.devices.values() if d["status"] == "pending" and not self.expired(d)]
            if not pending:
                raise HookError("no pending device code", 404)
            return max(pending, key=lambda d: d["seq"])
        dev_id = self.user_codes.get(normalize_user_code(user_code))
        if dev_id is None:
            raise HookError(f"unknown user_code '{user_code}'", 404)
        return self.devices[dev_id]

    @staticmethod
    def expired(dev: dict) -> bool:
        return time.time() >= dev["expires_at"]

    def decide(self, user_code: str | None, approved: bool, fields: dict | None = None) -> dict:
        with self.lock:
            dev = self.find_device(user_code)
            if dev["code"] is not None and self.codes[dev["code"]]["used"]:
                raise HookError("device sign-in already completed", 409)
            if self.expired(dev):
                raise HookError("device code expired", 410)
            if approved:
                acct = self.identity_for_approval(fields or {})
                dev["status"] = "approved"
                dev["account_id"] = acct["account_id"]
                if dev["code"] is None:
                    verifier = b64url(secrets.token_bytes(48))
                    code = "ac_" + b64url(secrets.token_bytes(24))
                    self.codes[code] = {
                        "code": code,
                        "device_auth_id": dev["device_auth_id"],
                        "client_id": self.config["client_id"],
                        "redirect_uri": self.issuer + "/deviceauth/callback",
                        "code_verifier": verifier,
                        "code_challenge": s256(verifier),
                        "expires_at": time.time() + self.config["auth_code_lifetime"],
                        "used": False,
                    }
                    dev["code"] = code
                self.codes[dev["code"]]["account_id"] = acct["account_id"]
                self.stats["approvals"] += 1
            else:
                dev["status"] = "denied"
                self.stats["denials"] += 1
            return self.device_view(dev)

    def device_view(self, dev: dict) -> dict:
        status = dev["status"]
        if status == "pending" and self.expired(dev):
            status = "expired"
        view = {
            "device_auth_id": dev["device_auth_id"],
            "user_code": dev["user_code"],
            "status": status,
            "expires_at": dev["expires_at"],
            "account_id": dev.get("account_id"),
        }
        if dev["code"] is not None:
            view["authorization_code"] = dev["code"]
            view["exchanged"] = self.codes[dev["code"]]["used"]
        return view

    # -- tokens -----------------------------------------------------------------------------

    def auth_claims(self, acct: dict) -> dict:
        return {
            "chatgpt_plan_type": acct["plan"],
            "chatgpt_user_id": acct["user_id"],
            "user_id": acct["user_id"],
            "chatgpt_account_id": acct["account_id"],
            "chatgpt_account_is_fedramp": bool(acct.get("fedramp", False)),
        }

    def mint(self, family: dict) -> dict:
        """New access/id/refresh tokens for a family (caller holds the lock)."""
        acct = self.accounts[family["account_id"]]
        now = int(time.time())
        a_exp = now + self.config["access_token_lifetime"]
        id_token = self.signer.encode(
            {
                "iss": self.issuer,
                "aud": [self.config["client_id"]],
                "sub": acct["user_id"],
                "email": acct["email"],
                "email_verified": True,
                "iat": now,
                "auth_time": family["auth_time"],
                "exp": now + self.config["id_token_lifetime"],
                AUTH_CLAIM: self.auth_claims(acct),
                PROFILE_CLAIM: {"email": acct["email"], "email_verified": True},
            }
        )
        access_token = self.signer.encode(
            {
                "iss": self.issuer,
                "aud": ["https://api.openai.com/v1"],
                "client_id": self.config["client_id"],
                "sub": acct["user_id"],
                "email": acct["email"],
                "iat": now,
                "nbf": now,
                "exp": a_exp,
                "jti": str(uuid.uuid4()),
                "scp": ["openid", "profile", "email", "offline_access"],
                AUTH_CLAIM: self.auth_claims(acct),
                PROFILE_CLAIM: {"email": acct["email"], "email_verified": True},
            }
        )
        refresh_token = "rt_" + b64url(secrets.token_bytes(36))
        self.access[access_token] = {
            "family": family["id"],
            "account_id": acct["account_id"],
            "exp": a_exp,
            "revoked": False,
        }
        self.refresh[refresh_token] = {"family": family["id"], "state": "active", "issued_at": time.time()}
        family["refresh_tokens"].append(refresh_token)
        family["access_tokens"].append(access_token)
        out = {"id_token": id_token, "access_token": access_token, "refresh_token": refresh_token}
        if self.config["include_expires_in"]:
            out["expires_in"] = self.config["access_token_lifetime"]
        return out

    def new_family(self, account_id: str) -> dict:
        self.seq += 1
        fam = {
            "id": f"fam-{self.seq}",
            "account_id": account_id,
            "revoked": False,
            "auth_time": int(time.time()),
            "refresh_tokens": [],
            "access_tokens": [],
        }
        self.families[fam["id"]] = fam
        return fam

    def revoke_family(self, fam: dict, access_too: bool) -> None:
        if not fam["revoked"]:
            fam["revoked"] = True
            self.stats["families_revoked"] += 1
        for rt in fam["refresh_tokens"]:
            if self.refresh[rt]["state"] == "active":
                self.refresh[rt]["state"] = "invalidated"
        if access_too:
            for at in fam["access_tokens"]:
                self.access[at]["revoked"] = True

    def authorize(self, headers) -> tuple[dict | None, tuple[int, dict, dict] | None]:
        """Checks `Authorization: Bearer <access token>` (live: known, not revoked, not expired)
        and, when present, `ChatGPT-Account-Id` against it. Returns (account, None), or
        (None, (status, body, headers)) for the 401/403 answer. Caller holds the lock."""
        auth = headers.get("Authorization", "")
        tok = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        rec = self.access.get(tok)
        if rec is None or rec["revoked"] or time.time() >= rec["exp"]:
            body = {
                "detail": "Could not validate your credentials",
                "error": {"code": "token_expired" if rec else "invalid_token",
                          "message": "Provided authentication token is expired or invalid."},
            }
            return None, (401, body, {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        header_acct = headers.get("ChatGPT-Account-Id")
        if header_acct is not None and header_acct != rec["account_id"]:
            return None, (403, {"detail": "ChatGPT-Account-Id does not match the access token"}, {})
        return self.accounts[rec["account_id"]], None

    def take_usage_limit(self, acct: dict) -> tuple[dict, dict] | None:
        """Consumes one request of the account's (else the "*") /_test/usage_limit, if any:
        returns the 429 (body, headers), else None. Caller holds the lock."""
        limit = self.usage_limits.get(acct["account_id"]) or self.usage_limits.get("*")
        if limit is None:
            return None
        key = acct["account_id"] if acct["account_id"] in self.usage_limits else "*"
        if limit["remaining"] is not None:
            limit["remaining"] -= 1
            if limit["remaining"] <= 0:
                del self.usage_limits[key]
        now = int(time.time())
        resets_at = limit.get("resets_at") or now + limit["resets_in_seconds"]
        body = {
            "error": {
                "type": "usage_limit_reached",
                "plan_type": limit.get("plan_type") or acct["plan"],
                "resets_at": resets_at,
                "resets_in_seconds": max(0, resets_at - now),
                "message": limit["message"],
            }
        }
        headers = {}
        if limit.get("retry_after") is not None:
            headers["Retry-After"] = str(limit["retry_after"])
        return body, headers

    def error_body(self, code: str, message: str) -> dict:
        shape = self.config["error_shape"]
        if shape == "error":
            return {"error": code, "error_description": message}
        if shape == "code":
            return {"code": code, "message": message}
        return {"error": {"code": code, "message": message, "type": "invalid_request_error"}}

    def select_refresh(self, body: dict) -> list[str]:
        """Active refresh tokens selected by a hook body (refresh_token / account_id / email / all)."""
        if want_str(body, "refresh_token"):
            if body["refresh_token"] not in self.refresh:
                raise HookError("unknown refresh_token", 404)
            return [body["refresh_token"]]
        fams = self.select_families(body)
        return [rt for f in fams for rt in f["refresh_tokens"] if self.refresh[rt]["state"] == "active"]

    def select_families(self, body: dict) -> list[dict]:
        if want_str(body, "account_id"):
            return [f for f in self.families.values() if f["account_id"] == body["account_id"]]
        if want_str(body, "email"):
            ids = {a["account_id"] for a in self.accounts.values() if a["email"].lower() == body["email"].lower()}
            return [f for f in self.families.values() if f["account_id"] in ids]
        if body.get("all") is True:
            return list(self.families.values())
        raise HookError("give one of: refresh_token, access_token, account_id, email, all:true")


# ---------------------------------------------------------------------------------------------
# Usage


def default_window(seconds: int) -> dict:
    return {"used_percent": 0, "limit_window_seconds": seconds, "reset_after_seconds": seconds}


def render_window(win: dict | None, now: int) -> dict | None:
    if win is None:
        return None
    out = dict(win)
    if "reset_at" in out and "reset_after_seconds" not in out:
        out["reset_after_seconds"] = max(0, int(out["reset_at"]) - now)
    elif "reset_after_seconds" in out and "reset_at" not in out:
        out["reset_at"] = now + int(out["reset_after_seconds"])
    return out


def usage_body(st: State, acct: dict) -> dict:
    script = st.usage_scripts.get(acct["account_id"], {})
    if "raw" in script:
        return script["raw"]
    now = int(time.time())
    primary, secondary = scripted_windows(script)
    limit_reached = script.get("limit_reached", False)
    body = {
        "plan_type": script.get("plan_type", acct["plan"]),
        "rate_limit": {
            "allowed": not limit_reached,
            "limit_reached": limit_reached,
            "primary_window": render_window(primary, now),
            "secondary_window": render_window(secondary, now),
        },
        "credits": script.get("credits", {"has_credits": False, "unlimited": False, "balance": "0"}),
    }
    for extra in ("rate_limit_reset_credits", "additional_rate_limits"):
        if extra in script:
            body[extra] = script[extra]
    return body


# -- Usage windows by length ------------------------------------------------------------------
# The server puts an account's windows in `rate_limit.primary_window` and `secondary_window`
# whatever their lengths: 5 h + weekly (the default), weekly only (primary = 7 days, secondary
# null), monthly only (primary = 2,628,000 s), or others. A script's `windows` lists them by
# length, in that order.

USAGE_WINDOW_FIELDS = {"seconds", "used_percent", "reset_after_seconds", "reset_at"}


def usage_windows_script(body: dict) -> dict:
    """The `windows`, `rate_limit_reset_credits` and `additional_rate_limits` fields of a
    `/_test/usage` body (the last two are sent as given)."""
    script = {}
    if "windows" in body:
        windows = body["windows"]
        if not isinstance(windows, list) or len(windows) > 2:
            raise HookError("'windows' must be a list of at most two windows (primary, then secondary)")
        if "primary_window" in body or "secondary_window" in body:
            raise HookError("give 'windows' or 'primary_window'/'secondary_window', not both")
        out = []
        for index, win in enumerate(windows):
            where = f"windows[{index}]"
            if not isinstance(win, dict) or set(win) - USAGE_WINDOW_FIELDS or "seconds" not in win:
                raise HookError(f"'{where}' must be an object with 'seconds' and any of {sorted(USAGE_WINDOW_FIELDS - {'seconds'})}")
            seconds = want_number(win, "seconds", minimum=1, integer=True)
            window = {"used_percent": win.get("used_percent", 0), "limit_window_seconds": seconds}
            if "reset_at" in win:
                window["reset_at"] = want_number(win, "reset_at", integer=True)
            else:
                window["reset_after_seconds"] = want_number(win, "reset_after_seconds", integer=True) if "reset_after_seconds" in win else seconds
            out.append(window)
        script["windows"] = out
    for extra in ("rate_limit_reset_credits", "additional_rate_limits"):
        if extra in body:
            script[extra] = body[extra]
    return script


def scripted_windows(script: dict) -> tuple[dict | None, dict | None]:
    """The primary and secondary windows a usage script gives (5 h and weekly by default)."""
    if "windows" in script:
        windows = script["windows"] + [None, None]
        return windows[0], windows[1]
    return script.get("primary_window", default_window(18000)), script.get("secondary_window", default_window(604800))


# ---------------------------------------------------------------------------------------------
# Flask app


def create_app(st: State):
    app = Flask("chatgpt_emulator")

    def oauth_error(status: int, error: str, description: str):
        return jsonify(error=error, error_description=description), status

    def json_request_body():
        return request.get_json(force=True, silent=True)

    def json_answer(status: int, body, headers: dict):
        resp = jsonify(body)
        resp.status_code = status
        resp.headers.update(headers)
        return resp

    # -- a. user code ------------------------------------------------------------------------

    @app.post("/api/accounts/deviceauth/usercode")
    def usercode():
        body = json_request_body()
        with st.lock:
            if not st.config["device_signin_enabled"]:
                st.stats["usercode_disabled"] += 1
                return jsonify(detail="Not Found"), 404
            if not isinstance(body, dict) or not isinstance(body.get("client_id"), str):
                return oauth_error(400, "invalid_request", "expected a JSON body with client_id")
            if body["client_id"] != st.config["client_id"]:
                return oauth_error(400, "invalid_client", "unknown client_id")
            st.seq += 1
            dev_id = "deviceauth_" + b64url(secrets.token_bytes(18))
            user_code = new_user_code()
            dev = {
                "device_auth_id": dev_id,
                "user_code": user_code,
                "status": "pending",
                "expires_at": time.time() + st.config["device_code_lifetime"],
                "code": None,
                "seq": st.seq,
            }
            st.devices[dev_id] = dev
            st.user_codes[normalize_user_code(user_code)] = dev_id
            st.stats["usercodes_issued"] += 1
            interval = st.config["interval"]
            return jsonify(
                device_auth_id=dev_id,
                user_code=user_code,
                interval=str(interval) if st.config["interval_as_string"] else interval,
            )

    # -- b. device token polling --------------------------------------------------------------

    @app.post("/api/accounts/deviceauth/token")
    def deviceauth_token():
        body = json_request_body()
        with st.lock:
            st.stats["device_polls"] += 1
            results = st.stats["device_poll_results"]
            if not isinstance(body, dict):
                results["invalid"] += 1
                return oauth_error(400, "invalid_request", "expected a JSON body")
            dev = st.devices.get(body.get("device_auth_id") or "")
            if dev is None or normalize_user_code(str(body.get("user_code") or "")) != normalize_user_code(
                dev["user_code"]
            ):
                results["invalid"] += 1
                return oauth_error(400, "invalid_request", "unknown device_auth_id or user_code")
            if dev["status"] == "denied":
                results["denied"] += 1
                return oauth_error(400, "access_denied", "the user denied the sign-in")
            if dev["status"] == "approved":
                grant = st.codes[dev["code"]]
                if grant["used"]:
                    results["invalid"] += 1
                    return oauth_error(400, "invalid_grant", "device sign-in already completed")
                results["approved"] += 1
                return jsonify(
                    authorization_code=grant["code"],
                    code_challenge=grant["code_challenge"],
                    code_verifier=grant["code_verifier"],
                )
            if st.expired(dev):
                results["expired"] += 1
                return oauth_error(410, "expired_token", "the device code expired; start again")
            results["pending"] += 1
            status = st.config["pending_status"]
            return jsonify(error="authorization_pending", error_description="waiting for the user"), status

    # -- c./d. token endpoint ------------------------------------------------------------------

    @app.post("/oauth/token")
    def oauth_token():
        ctype = (request.mimetype or "").lower()
        is_json = ctype == "application/json"
        if is_json:
            body = json_request_body()
            if not isinstance(body, dict):
                return oauth_error(400, "invalid_request", "malformed JSON body")
        else:
            body = request.form.to_dict()
        grant_type = body.get("grant_type")
        if grant_type == "authorization_code":
            return exchange_code(body, is_json)
        if grant_type == "refresh_token":
            return refresh(body, is_json)
        return oauth_error(400, "unsupported_grant_type", f"unsupported grant_type {grant_type!r}")

    def exchange_code(body: dict, is_json: bool):
        with st.lock:
            def fail(error, description, status=400):
                st.stats["code_exchange_errors"] += 1
                return oauth_error(status, error, description)

            if is_json and st.config["strict_encoding"]:
                return fail("invalid_request", "authorization_code must be form-encoded (application/x-www-form-urlencoded)")
            if body.get("client_id") != st.config["client_id"]:
                return fail("invalid_client", "unknown client_id", 401)
            grant = st.codes.get(body.get("code") or "")
            if grant is None:
                return fail("invalid_grant", "unknown authorization code")
            if grant["used"]:
                return fail("invalid_grant", "authorization code already used")
            if time.time() >= grant["expires_at"]:
                return fail("invalid_grant", "authorization code expired")
            if grant["client_id"] != body.get("client_id"):
                return fail("invalid_grant", "the code was issued to another client")
            # The code is bound to the redirect_uri it was issued for (RFC 6749 §4.1.3).
            if body.get("redirect_uri") != grant["redirect_uri"]:
                return fail("invalid_grant", f"redirect_uri must be {grant['redirect_uri']}")
            verifier = body.get("code_verifier") or ""
            if not verifier or s256(verifier) != grant["code_challenge"]:
                return fail("invalid_grant", "code_verifier does not match the code challenge")
            grant["used"] = True
            fam = st.new_family(grant["account_id"])
            st.stats["code_exchanges"] += 1
            return jsonify(st.mint(fam))

    def refresh(body: dict, is_json: bool):
        with st.lock:
            st.stats["refresh_requests"] += 1

            def fail(status, code, message, counter=None):
                st.stats["refresh_errors"] += 1
                if counter:
                    st.stats[counter] += 1
                return jsonify(st.error_body(code, message)), status

            if not is_json and st.config["strict_encoding"]:
                return fail(400, "invalid_request", "refresh must be a JSON body (application/json)")
            if body.get("client_id") != st.config["client_id"]:
                return fail(401, "invalid_client", "unknown client_id")
            token = body.get("refresh_token")
            rec = st.refresh.get(token) if isinstance(token, str) else None
            if rec is None:
                return fail(401, "refresh_token_invalidated", "Your refresh token is unknown or was revoked. Please sign in again.", "refresh_invalidated")
            fam = st.families[rec["family"]]
            if fam["revoked"] or rec["state"] == "invalidated":
                return fail(401, "refresh_token_invalidated", "Your refresh token was invalidated. Please sign in again.", "refresh_invalidated")
            if rec["state"] == "rotated":
                st.revoke_family(fam, access_too=st.config["reuse_revokes_access"])
                return fail(401, "refresh_token_reused", "Your refresh token has already been used to generate a new access token. Please try signing in again.", "refresh_reused")
            if rec["state"] == "expired":
                return fail(401, "refresh_token_expired", "Your refresh token has expired. Please sign in again.", "refresh_expired")
            rec["state"] = "rotated"
            rec["rotated_at"] = time.time()
            st.stats["refreshes_succeeded"] += 1
            return jsonify(st.mint(fam))

    # -- e. browser sign-in: /oauth/authorize -----------------------------------------------------

    @app.route("/oauth/authorize", methods=["GET", "POST"])
    def authorize():
        # GET: the browser arrives from the client's printed URL. POST: the sign-in page's form
        # (the same URL, with the person's choice). A queued /_test/browser decision, or the
        # browser_auto_approve setting, answers a GET without the page.
        params = request.values
        with st.lock:
            st.stats["authorize_requests"] += 1

            def refuse(message: str):
                # No redirect to a client or redirect_uri that is not registered (RFC 6749 §4.1.2.1).
                st.stats["authorize_refused"] += 1
                return Response(_authorize_page(message, None), status=400, mimetype="text/html")

            if params.get("client_id") != st.config["client_id"]:
                return refuse("unknown client_id")
            redirect_uri = params.get("redirect_uri") or ""
            if redirect_uri not in st.config["redirect_uris"]:
                return refuse("redirect_uri is not registered for this client")
            state = params.get("state")

            def back(**answer):
                if state is not None:
                    answer["state"] = state
                return redirect(redirect_uri + "?" + urlencode(answer), 302)

            if params.get("response_type") != "code":
                st.stats["authorize_refused"] += 1
                return back(error="unsupported_response_type", error_description="response_type must be code")
            challenge = params.get("code_challenge") or ""
            if params.get("code_challenge_method") != "S256" or not challenge:
                # Only S256: `plain` or no challenge at all is refused.
                st.stats["authorize_refused"] += 1
                return back(error="invalid_request", error_description="code_challenge with code_challenge_method=S256 is required")
            if request.method == "POST":
                decision = {"action": params.get("action", "approve")}
                decision.update({k: params[k] for k in ("email", "plan", "account_id", "user_id") if params.get(k)})
            elif st.browser_decisions:
                decision = st.browser_decisions.pop(0)
            elif st.config["browser_auto_approve"]:
                decision = {"action": "approve"}
            else:
                return Response(_authorize_page("", request.full_path), mimetype="text/html")
            if decision["action"] == "deny":
                st.stats["authorize_denied"] += 1
                return back(error=decision.get("error", "access_denied"),
                            error_description=decision.get("error_description", "the user denied the sign-in"))
            fields = {k: v for k, v in decision.items() if k in ("email", "plan", "account_id", "user_id", "fedramp")}
            acct = st.identity_for_approval(check_account(fields, "approval"))
            code = "ac_" + b64url(secrets.token_bytes(24))
            # Bound to the client, the redirect_uri and the challenge; single use (oauth_token).
            st.codes[code] = {
                "code": code,
                "client_id": st.config["client_id"],
                "redirect_uri": redirect_uri,
                "code_challenge": challenge,
                "expires_at": time.time() + st.config["auth_code_lifetime"],
                "used": False,
                "account_id": acct["account_id"],
            }
            st.stats["authorize_approved"] += 1
            st.stats["approvals"] += 1
            return back(code=code)

    # -- f. browser approval page ---------------------------------------------------------------

    @app.route("/codex/device", methods=["GET", "POST"])
    def device_page():
        if request.method == "GET":
            return Response(_page("", request.args.get("user_code", ""), st), mimetype="text/html")
        code = request.form.get("user_code", "")
        fields = {k: request.form[k] for k in ("email", "plan", "account_id", "user_id") if request.form.get(k)}
        if request.form.get("fedramp"):
            fields["fedramp"] = request.form["fedramp"].lower() in ("1", "true", "yes", "on")
        try:
            if not code.strip():
                raise HookError("enter the code shown on your device", 400)
            approve = request.form.get("action", "approve") != "deny"
            st.decide(code, approve, check_account(fields, "form"))
            msg = "Device approved. You can return to your terminal." if approve else "Sign-in denied."
            return Response(_page(msg, code, st), mimetype="text/html")
        except HookError as e:
            return Response(_page(e.message, code, st), status=e.status, mimetype="text/html")

    # -- g. usage --------------------------------------------------------------------------------

    @app.get("/backend-api/wham/usage")
    def usage():
        with st.lock:
            st.stats["usage_requests"] += 1
            acct, failure = st.authorize(request.headers)
            if failure is not None:
                st.stats["usage_unauthorized"] += 1
                return json_answer(*failure)
            limited = st.take_usage_limit(acct)
            if limited is not None:
                st.stats["usage_limited"] += 1
                return json_answer(429, *limited)
            st.stats["usage_ok"] += 1
            return jsonify(usage_body(st, acct))

    # -- test hooks ------------------------------------------------------------------------------

    register_common_hooks(app, st, ENDPOINT_NAMES)

    @app.post("/_test/approve")
    @hook
    def t_approve():
        body = hook_body(request)
        user_code = want_str(body, "user_code")
        fields = check_account({k: v for k, v in body.items() if k != "user_code"}, "approve")
        return jsonify(st.decide(user_code, True, fields))

    @app.post("/_test/browser")
    @hook
    def t_browser():
        """Queues how the next GET /oauth/authorize answers: approve (as the account named, else the
        default) or deny (`error`, `error_description`), as the person at the browser would."""
        body = hook_body(request)
        action = want_str(body, "action", "approve")
        if action not in ("approve", "deny"):
            raise HookError("'action' must be approve or deny")
        decision = {"action": action}
        if action == "deny":
            decision["error"] = want_str(body, "error", "access_denied")
            if want_str(body, "error_description") is not None:
                decision["error_description"] = body["error_description"]
        else:
            decision.update(check_account({k: v for k, v in body.items() if k != "action"}, "browser"))
        if action == "deny" and set(body) - {"action", "error", "error_description"}:
            raise HookError("a denial takes only error and error_description")
        with st.lock:
            st.browser_decisions.append(decision)
            return jsonify(queued=len(st.browser_decisions))

    @app.route("/_test/accounts", methods=["GET", "POST"])
    @hook
    def t_accounts():
        if request.method == "POST":
            body = hook_body(request)
            raw = body.get("accounts")
            if not isinstance(raw, list):
                raise HookError("'accounts' must be a list of account objects")
            checked = [check_account(a, f"accounts[{i}]") for i, a in enumerate(raw)]
            with st.lock:
                if want_bool(body, "replace", False):
                    st.accounts.clear()
                    st.default_account_id = None
                for acct in checked:
                    st.upsert_account(acct)
                if want_str(body, "default_account_id"):
                    if body["default_account_id"] not in st.accounts:
                        raise HookError("default_account_id is not a registered account")
                    st.default_account_id = body["default_account_id"]
        with st.lock:
            return jsonify(
                default_account_id=st.default_account_id,
                accounts=list(st.accounts.values()),
            )

    @app.post("/_test/config")
    @hook
    def t_config():
        body = hook_body(request)
        with st.lock:
            new = dict(st.config)
            for key in body:
                if key in NUMERIC_CONFIG:
                    minimum, integer = NUMERIC_CONFIG[key]
                    new[key] = want_number(body, key, minimum=minimum, integer=integer)
                elif key in BOOL_CONFIG:
                    new[key] = want_bool(body, key)
                elif key == "pending_status":
                    if body[key] not in (403, 404):
                        raise HookError("'pending_status' must be 403 or 404")
                    new[key] = body[key]
                elif key == "error_shape":
                    if body[key] not in ERROR_SHAPES:
                        raise HookError(f"'error_shape' must be one of: {', '.join(ERROR_SHAPES)}")
                    new[key] = body[key]
                elif key == "client_id":
                    new[key] = want_str(body, key) or st.initial_config["client_id"]
                else:
                    raise HookError(f"unknown setting '{key}'")
            st.config = new
            return jsonify(st.config)

    @app.post("/_test/expire_refresh")
    @hook
    def t_expire_refresh():
        return mark_refresh("expired")

    @app.post("/_test/invalidate_refresh")
    @hook
    def t_invalidate_refresh():
        return mark_refresh("invalidated")

    def mark_refresh(state: str):
        body = hook_body(request)
        with st.lock:
            tokens = st.select_refresh(body)
            for rt in tokens:
                st.refresh[rt]["state"] = state
            return jsonify(changed=len(tokens), state=state)

    @app.post("/_test/expire_access")
    @hook
    def t_expire_access():
        body = hook_body(request)
        with st.lock:
            if want_str(body, "access_token"):
                if body["access_token"] not in st.access:
                    raise HookError("unknown access_token", 404)
                tokens = [body["access_token"]]
            else:
                tokens = [at for f in st.select_families(body) for at in f["access_tokens"]]
            now = time.time()
            n = 0
            for at in tokens:
                if st.access[at]["exp"] > now:
                    st.access[at]["exp"] = int(now) - 1
                    n += 1
            return jsonify(changed=n)

    @app.post("/_test/revoke_family")
    @hook
    def t_revoke_family():
        body = hook_body(request)
        with st.lock:
            if want_str(body, "refresh_token"):
                rec = st.refresh.get(body["refresh_token"])
                if rec is None:
                    raise HookError("unknown refresh_token", 404)
                fams = [st.families[rec["family"]]]
            else:
                fams = st.select_families(body)
            access_too = want_bool(body, "access_tokens", True)
            for fam in fams:
                st.revoke_family(fam, access_too=access_too)
            return jsonify(revoked=len(fams))

    @app.get("/_test/tokens")
    def t_tokens():
        with st.lock:
            out = []
            for fam in st.families.values():
                out.append(
                    {
                        "family": fam["id"],
                        "account_id": fam["account_id"],
                        "revoked": fam["revoked"],
                        "refresh_tokens": [
                            {"refresh_token": rt, "state": st.refresh[rt]["state"]} for rt in fam["refresh_tokens"]
                        ],
                        "access_tokens": [
                            {"access_token": at, "exp": st.access[at]["exp"], "revoked": st.access[at]["revoked"]}
                            for at in fam["access_tokens"]
                        ],
                    }
                )
            return jsonify(families=out)

    @app.post("/_test/usage")
    @hook
    def t_usage():
        body = hook_body(request)
        account_id = want_str(body, "account_id")
        if account_id is None:
            raise HookError("'account_id' is required")
        script = {}
        if "raw" in body:
            script["raw"] = body["raw"]
        if "plan_type" in body:
            script["plan_type"] = want_str(body, "plan_type")
        for win in ("primary_window", "secondary_window"):
            if win in body:
                value = body[win]
                if value is not None and not isinstance(value, dict):
                    raise HookError(f"'{win}' must be an object or null")
                script[win] = value
        if "credits" in body:
            script["credits"] = body["credits"]
        if "limit_reached" in body:
            script["limit_reached"] = want_bool(body, "limit_reached")
        script.update(usage_windows_script(body))
        unknown = set(body) - {"account_id", "raw", "plan_type", "primary_window", "secondary_window", "credits", "limit_reached", "clear",
                               "windows", "rate_limit_reset_credits", "additional_rate_limits"}
        if unknown:
            raise HookError(f"unknown field(s): {', '.join(sorted(unknown))}")
        with st.lock:
            if want_bool(body, "clear", False):
                st.usage_scripts.pop(account_id, None)
            else:
                st.usage_scripts[account_id] = script
            return jsonify(account_id=account_id, script=st.usage_scripts.get(account_id))

    @app.post("/_test/usage_limit")
    @hook
    def t_usage_limit():
        body = hook_body(request)
        key = want_str(body, "account_id") or "*"
        with st.lock:
            if want_bool(body, "clear", False):
                if key == "*" and "account_id" not in body:
                    st.usage_limits.clear()
                else:
                    st.usage_limits.pop(key, None)
                return jsonify(cleared=True)
            limit = {
                "resets_in_seconds": want_number(body, "resets_in_seconds", integer=True) if "resets_in_seconds" in body else 3600,
                "resets_at": want_number(body, "resets_at", integer=True) if "resets_at" in body else None,
                "plan_type": want_str(body, "plan_type"),
                "message": want_str(body, "message", "You've hit your usage limit. Try again later."),
                "retry_after": (
                    want_number(body, "retry_after", integer=True) if body.get("retry_after") is not None else None
                ),
                "remaining": want_number(body, "count", minimum=1, integer=True) if "count" in body else None,
            }
            st.usage_limits[key] = limit
            return jsonify(account_id=None if key == "*" else key, limit=limit)

    streaming.register(app, st)  # /backend-api/codex/responses (WebSocket + SSE), /_test/stream
    register_personal_access_tokens(app, st)  # whoami + /_test/personal_access_token

    def route(path, method):
        return ENDPOINTS.get(path)

    def on_request(endpoint, fault):
        with st.lock:
            st.stats["requests"][endpoint] += 1
            if fault:
                st.stats["faults_injected"][endpoint] += 1

    app.wsgi_app = FaultMiddleware(
        app.wsgi_app,
        st.faults,
        route,
        on_request,
        rate_limit_body={"error": {"type": "rate_limit_exceeded", "code": "rate_limit_exceeded",
                                   "message": "Too many requests. Please slow down."}},
    )
    return app


# -- personal access tokens (`codex login --with-access-token`) ----------------------------------
#
# Codex asks who an `at-` token belongs to with GET {CODEX_AUTHAPI_BASE_URL, by default
# https://auth.openai.com/api/accounts}/v1/user-auth-credential/whoami and the token as bearer
# (codex-rs/login/src/auth/personal_access_token.rs); the answer is {email (nullable),
# chatgpt_user_id, chatgpt_account_id, chatgpt_plan_type, chatgpt_account_is_fedramp}. The token
# is then the bearer of backend requests (usage here): it lives in st.access like an access token,
# with no family (nothing refreshes it) and no expiry of its own.

PAT_EXPIRY = 2**31 - 1


def mint_personal_access_token(st: State, account_id: str) -> str:
    """A new `at-` token of the account (caller holds the lock)."""
    token = "at-" + b64url(secrets.token_bytes(32))
    st.access[token] = {"family": None, "account_id": account_id, "exp": PAT_EXPIRY, "revoked": False,
                        "personal": True}
    return token


def register_personal_access_tokens(app, st: State) -> None:
    @app.get("/api/accounts/v1/user-auth-credential/whoami")
    def whoami():
        with st.lock:
            auth = request.headers.get("Authorization", "")
            tok = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
            rec = st.access.get(tok)
            if rec is None or not rec.get("personal") or rec["revoked"]:
                return json_error(401, {"error": {"code": "invalid_token", "message": "Unknown or revoked access token."}})
            acct = st.accounts[rec["account_id"]]
            return jsonify({
                "email": acct["email"] if not acct.get("hide_email") else None,
                "chatgpt_user_id": acct["user_id"],
                "chatgpt_account_id": acct["account_id"],
                "chatgpt_plan_type": acct["plan"],
                "chatgpt_account_is_fedramp": bool(acct.get("fedramp", False)),
            })

    @app.post("/_test/personal_access_token")
    @hook
    def t_personal_access_token():
        """{"email"} or {"account_id"} (default: the default account) -> {"token", "account_id"};
        {"revoke": token} revokes one."""
        body = hook_body(request)
        with st.lock:
            if "revoke" in body:
                rec = st.access.get(want_str(body, "revoke"))
                if rec is None or not rec.get("personal"):
                    raise HookError("no such personal access token")
                rec["revoked"] = True
                return jsonify(revoked=True)
            account_id = body.get("account_id")
            if account_id is None and body.get("email") is not None:
                account_id = st.upsert_account({"email": want_str(body, "email")})["account_id"]
            account_id = account_id or st.default_account_id
            if account_id not in st.accounts:
                raise HookError("no such account")
            return jsonify(token=mint_personal_access_token(st, account_id), account_id=account_id)


def json_error(status: int, body: dict):
    return Response(json.dumps(body), status=status, mimetype="application/json")


def _authorize_page(message: str, action: str | None) -> str:
    m = f"<p><strong>{html.escape(message)}</strong></p>" if message else ""
    form = "" if action is None else f"""<form method="post" action="{html.escape(action)}">
<label>Email <input name="email" value=""></label><br>
<label>Plan <input name="plan" value=""></label><br>
<button name="action" value="approve">Continue</button>
<button name="action" value="deny">Cancel</button>
</form>"""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Sign in to Codex with ChatGPT (emulator)</title></head>
<body><h1>Sign in to Codex with ChatGPT</h1>{m}{form}</body></html>
"""


def _page(message: str, user_code: str, st: State) -> str:
    acct = st.accounts.get(st.default_account_id) or DEFAULT_ACCOUNT
    m = f"<p><strong>{html.escape(message)}</strong></p>" if message else ""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Sign in to Codex with ChatGPT (emulator)</title></head>
<body><h1>Enter the code displayed on your device</h1>{m}
<form method="post" action="/codex/device">
<label>Code <input name="user_code" value="{html.escape(user_code)}" autofocus></label><br>
<label>Email <input name="email" value="{html.escape(acct['email'])}"></label><br>
<label>Plan <input name="plan" value=""></label><br>
<label>Account id <input name="account_id" value=""></label><br>
<label>FedRAMP <input type="checkbox" name="fedramp" value="true"></label><br>
<button name="action" value="approve">Continue</button>
<button name="action" value="deny">Cancel</button>
</form></body></html>
"""


def load_accounts(spec: str | None) -> list[dict]:
    if not spec:
        return []
    text = spec if spec.lstrip().startswith(("[", "{")) else open(os.path.expanduser(spec), encoding="utf-8").read()
    data = json.loads(text)
    if isinstance(data, dict):
        data = data.get("accounts", [data]) if "accounts" in data else [data]
    if not isinstance(data, list):
        raise HookError("--accounts must hold a list of accounts")
    return [check_account(a, f"--accounts[{i}]") for i, a in enumerate(data)]


def main(argv=None) -> int:
    p = base_arg_parser("ChatGPT / Codex device sign-in emulator (Lanyard test fixture)")
    p.add_argument("--client-id", default=CODEX_CLIENT_ID, help=f"accepted client_id (default {CODEX_CLIENT_ID})")
    p.add_argument("--accounts", help="JSON file or inline JSON: list of {email, plan, account_id, user_id, fedramp}; the first is the default approval identity")
    p.add_argument("--access-token-lifetime", type=int, default=3600)
    p.add_argument("--id-token-lifetime", type=int, default=3600)
    p.add_argument("--device-code-lifetime", type=int, default=900)
    p.add_argument("--auth-code-lifetime", type=int, default=600)
    p.add_argument("--interval", type=int, default=5)
    p.add_argument("--pending-status", type=int, choices=(403, 404), default=403)
    p.add_argument("--error-shape", choices=ERROR_SHAPES, default="error.code")
    p.add_argument("--redirect-uri", action="append", default=[],
                   help="register another browser redirect URI besides localhost:1455 and :1457 (tests on free ports)")
    p.add_argument("--browser-auto-approve", action="store_true",
                   help="answer /oauth/authorize with an approval as the default account when no decision is queued")
    args = p.parse_args(argv)
    setup_logging(args.log_level)
    try:
        accounts = load_accounts(args.accounts)
    except (OSError, ValueError, HookError) as e:
        print(f"chatgpt_emulator: bad --accounts: {e}", file=sys.stderr)
        return 2
    config = {
        "client_id": args.client_id,
        "access_token_lifetime": args.access_token_lifetime,
        "id_token_lifetime": args.id_token_lifetime,
        "device_code_lifetime": args.device_code_lifetime,
        "auth_code_lifetime": args.auth_code_lifetime,
        "interval": args.interval,
        "interval_as_string": True,
        "pending_status": args.pending_status,
        "device_signin_enabled": True,
        "include_expires_in": True,
        "strict_encoding": True,
        "reuse_revokes_access": False,
        "error_shape": args.error_shape,
        "redirect_uris": list(REGISTERED_REDIRECT_URIS) + args.redirect_uri,
        "browser_auto_approve": args.browser_auto_approve,
    }
    st = State(config, accounts)
    app = create_app(st)

    def on_bound(base_url):
        st.issuer = base_url

    return serve(app, args.host, args.port, on_bound, exit_with_parent=args.exit_with_parent,
                 tls=(args.tls_cert, args.tls_key))


if __name__ == "__main__":
    sys.exit(main())
