#!/usr/bin/env python3
"""RFC 8628 device authorization server for Lanyard's tests (test fixture, not for production).

Built on Authlib's Flask integration: DeviceAuthorizationEndpoint, DeviceCodeGrant,
RefreshTokenGrant (rotating refresh tokens), RevocationEndpoint, AuthorizationCodeGrant with
PKCE (S256 only, required) for RFC 8252 loopback redirects on any port, and the OpenID Connect
id-token extension on the token grants. All state is in memory. Test hooks live under /_test/ and are
documented in README.md next to this file.

    python device_server.py --port 0 [--host 127.0.0.1]
prints exactly one line on stdout, ``READY http://127.0.0.1:PORT``, then logs to stderr only.
"""

from __future__ import annotations

import sys

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

import copy
import hashlib
import html
import logging
import threading
import time

from authlib.common.security import generate_token
from authlib.integrations.flask_oauth2 import AuthorizationServer
from urllib.parse import urlsplit

from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import AuthorizationCodeMixin, ClientMixin, TokenMixin
from authlib.oauth2.rfc6749.errors import InvalidGrantError, InvalidRequestError
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, RefreshTokenGrant
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc8628 import (
    DeviceAuthorizationEndpoint,
    DeviceCodeGrant,
    DeviceCredentialDict,
    SlowDownError,
)
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import OpenIDCode, OpenIDToken, UserInfo
from flask import Flask, Response, jsonify, request
from joserfc.jwk import RSAKey

from fixture_common import (
    hook,
    register_common_hooks,
    FaultBook,
    FaultMiddleware,
    HookError,
    base_arg_parser,
    hook_body,
    serve,
    setup_logging,
    want_number,
    want_str,
)

log = logging.getLogger("device-server")

DEFAULT_CLIENT_ID = "lanyard-test-client"
DEFAULT_SCOPE = "openid email profile offline_access"
ALLOWED_SCOPES = ("openid", "email", "profile", "offline_access")
DEFAULT_EMAIL = "test.user@example.com"

ENDPOINTS = {
    "/.well-known/openid-configuration": "discovery",
    "/oauth/device_authorization": "device_authorization",
    "/oauth/token": "token",
    "/oauth/revoke": "revoke",
    "/oauth/userinfo": "userinfo",
    "/oauth/jwks": "jwks",
    "/device": "device_page",
    "/oauth/authorize": "authorize",
}
ENDPOINT_NAMES = tuple(ENDPOINTS.values())

# Numeric settings changeable through POST /_test/config: name -> (minimum, integer?)
NUMERIC_CONFIG = {
    "access_token_lifetime": (1, True),
    "refresh_token_lifetime": (0, True),  # 0 = refresh tokens never expire
    "id_token_lifetime": (1, True),
    "device_code_lifetime": (1, True),
    "interval": (0, True),
    "slow_down_increment": (0, True),
    "poll_tolerance": (0, False),
}


def normalize_user_code(code: str) -> str:
    return "".join(ch for ch in code.upper() if ch.isalnum())


def sub_for_email(email: str) -> str:
    return "user-" + hashlib.sha256(email.lower().encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Models


class Client(ClientMixin):
    """A public client: no secret, token_endpoint_auth_method "none"."""

    def __init__(self, client_id: str):
        self.client_id = client_id
        self.token_endpoint_auth_method = "none"
        self.grant_types = ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token", "authorization_code"]

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        if not scope:
            return DEFAULT_SCOPE
        return " ".join(s for s in scope.split() if s in ALLOWED_SCOPES)

    def check_redirect_uri(self, redirect_uri):
        # RFC 8252 §7.3: a native app's loopback redirect, on any port (registered without one).
        parts = urlsplit(redirect_uri or "")
        try:
            port = parts.port
        except ValueError:
            return False
        return (parts.scheme == "http" and parts.hostname in ("127.0.0.1", "::1") and port is not None
                and parts.path == "/callback" and not parts.query and not parts.fragment)

    def check_client_secret(self, client_secret):
        return False

    def check_endpoint_auth_method(self, method, endpoint):
        # Public client: "none" everywhere (token, device_authorization, revocation).
        return method == self.token_endpoint_auth_method

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type in self.grant_types


class AuthorizationCode(dict, AuthorizationCodeMixin):
    def get_redirect_uri(self):
        return self["redirect_uri"]

    def get_scope(self):
        return self["scope"]

    def get_nonce(self):
        return self.get("nonce")

    def get_auth_time(self):
        return self["auth_time"]

    def get_acr(self):
        return None

    def get_amr(self):
        return None

    @property
    def code_challenge(self):
        return self["code_challenge"]

    @property
    def code_challenge_method(self):
        return self["code_challenge_method"]


class Token(dict, TokenMixin):
    def check_client(self, client):
        return self["client_id"] == client.get_client_id()

    def get_scope(self):
        return self.get("scope", "")

    def get_expires_in(self):
        return self.get("expires_in", 0)

    def is_expired(self):
        # The server's own lifetime may outlast the one it advertises (--device-code-server-lifetime):
        # a test that runs the client on virtual time then sees the client's clock end the wait,
        # however long the loaded machine takes in real time.
        lifetime = max(self.get("expires_in", 0), self.get("server_lifetime", 0))
        return time.time() >= self["issued_at"] + lifetime

    def is_revoked(self):
        return self.get("access_revoked", False)


# ---------------------------------------------------------------------------------------------
# State


class State:
    def __init__(self, config: dict, client_ids: list[str]):
        self.lock = threading.RLock()
        self.initial_config = dict(config)
        self.client_ids = client_ids
        self.issuer = ""
        self.rsa_key = RSAKey.generate_key(2048, parameters={"use": "sig", "alg": "RS256"}, auto_kid=True)
        self.faults = FaultBook()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.config = copy.deepcopy(self.initial_config)
            self.clients = {cid: Client(cid) for cid in self.client_ids}
            self.devices: dict[str, DeviceCredentialDict] = {}  # device_code -> credential
            self.user_codes: dict[str, str] = {}  # normalized user_code -> device_code
            self.users: dict[str, dict] = {}  # sub -> user
            self.by_access: dict[str, Token] = {}
            self.by_refresh: dict[str, Token] = {}
            self.codes: dict[str, AuthorizationCode] = {}  # authorization code -> its grant
            self.browser_decisions: list[dict] = []  # queued answers of /oauth/authorize
            self.faults.clear()
            self.stats = {
                "requests": {name: 0 for name in ENDPOINT_NAMES},
                "faults_injected": {name: 0 for name in ENDPOINT_NAMES},
                "device_authorizations": 0,
                "token_requests": 0,
                "token_polls": 0,
                "poll_results": {
                    "success": 0,
                    "authorization_pending": 0,
                    "slow_down": 0,
                    "access_denied": 0,
                    "expired_token": 0,
                    "invalid_grant": 0,
                    "other_error": 0,
                },
                "refresh_requests": 0,
                "refreshes_succeeded": 0,
                "refresh_reused": 0,
                "refresh_invalid": 0,
                "refresh_errors": 0,
                "revocation_requests": 0,
                "revocations": 0,
                "authorize_requests": 0,
                "authorize_approved": 0,
                "authorize_denied": 0,
                "code_exchanges": 0,
            }

    def count(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.stats[key] += n

    # -- users / device codes --------------------------------------------------------------

    def find_device(self, user_code: str | None) -> DeviceCredentialDict:
        """By user code, or the most recently issued undecided, unexpired code when None."""
        if user_code is None:
            pending = [
                d for d in self.devices.values() if d["status"] == "pending" and not d.is_expired()
            ]
            if not pending:
                raise HookError("no pending device code", 404)
            return max(pending, key=lambda d: d["seq"])
        device_code = self.user_codes.get(normalize_user_code(user_code))
        if device_code is None:
            raise HookError(f"unknown user_code '{user_code}'", 404)
        return self.devices[device_code]

    def decide(self, user_code: str | None, approved: bool, identity: dict | None = None) -> dict:
        with self.lock:
            cred = self.find_device(user_code)
            if cred.get("used"):
                raise HookError("device code already exchanged for tokens", 409)
            if cred.is_expired():
                raise HookError("device code expired", 410)
            cred["status"] = "approved" if approved else "denied"
            if approved:
                user = self.make_user(identity or {})
                cred["sub"] = user["sub"]
            return self.device_view(cred)

    def make_user(self, identity: dict) -> dict:
        email = identity.get("email") or DEFAULT_EMAIL
        sub = identity.get("sub") or sub_for_email(email)
        user = self.users.get(sub, {"sub": sub})
        user["email"] = email
        user["plan"] = identity.get("plan") or user.get("plan") or self.config["default_plan"]
        user["name"] = identity.get("name") or user.get("name") or email.split("@")[0]
        self.users[sub] = user
        return user

    def device_view(self, cred: DeviceCredentialDict) -> dict:
        view = {
            "user_code": cred["user_code"],
            "device_code": cred["device_code"],
            "client_id": cred["client_id"],
            "status": "expired" if cred["status"] == "pending" and cred.is_expired() else cred["status"],
            "used": cred.get("used", False),
            "interval": cred["interval"],
            "expires_at": cred["expires_at"],
        }
        if cred.get("sub"):
            user = self.users[cred["sub"]]
            view.update(sub=user["sub"], email=user["email"], plan=user["plan"])
        return view

    # -- tokens -----------------------------------------------------------------------------

    def save_token(self, token: dict, req) -> None:
        now = time.time()
        record = Token(
            client_id=req.client.get_client_id(),
            sub=req.user["sub"],
            scope=token.get("scope", ""),
            access_token=token["access_token"],
            refresh_token=token.get("refresh_token"),
            expires_in=token.get("expires_in", 0),
            issued_at=now,
            access_revoked=False,
            refresh_state="active",
            refresh_expires_at=(
                now + self.config["refresh_token_lifetime"]
                if self.config["refresh_token_lifetime"]
                else None
            ),
        )
        self.by_access[record["access_token"]] = record
        if record["refresh_token"]:
            self.by_refresh[record["refresh_token"]] = record

    def revoke_record(self, record: Token, access_only: bool = False) -> bool:
        changed = False
        if not record["access_revoked"]:
            record["access_revoked"] = True
            changed = True
        if not access_only and record["refresh_token"] and record["refresh_state"] == "active":
            record["refresh_state"] = "revoked"
            changed = True
        return changed

    def plan_claim_path(self) -> list[str]:
        path = self.config["plan_claim"]
        return list(path) if isinstance(path, list) else path.split("/")


# ---------------------------------------------------------------------------------------------
# Authlib plumbing


def build_authorization_server(app: Flask, st: State) -> AuthorizationServer:
    def query_client(client_id):
        return st.clients.get(client_id)

    server = AuthorizationServer(app, query_client=query_client, save_token=st.save_token)

    def access_token(**_kw):
        return "at_" + generate_token(40)

    def refresh_token(**_kw):
        return "rt_" + generate_token(48)

    def expires_in(client, grant_type):
        return st.config["access_token_lifetime"]

    # Replace the config-driven default generator: lifetimes are changed at run time by hooks.
    server.register_token_generator(
        "default", BearerTokenGenerator(access_token, refresh_token, expires_in)
    )

    class SlowDown(SlowDownError):
        """slow_down, also telling the client the new interval (a harmless extra member)."""

        def __init__(self, interval):
            super().__init__(description=f"polling too fast; wait {interval} seconds between polls")
            self.interval = interval

        def get_body(self):
            return super().get_body() + [("interval", self.interval)]

    class DeviceGrant(DeviceCodeGrant):
        def query_device_credential(self, device_code):
            cred = st.devices.get(device_code)
            if cred is None:
                raise InvalidGrantError("unknown device_code")
            return cred

        def query_user_grant(self, user_code):
            cred = st.devices[st.user_codes[normalize_user_code(user_code)]]
            if cred["status"] == "approved":
                return st.users[cred["sub"]], True
            if cred["status"] == "denied":
                return None, False
            return None

        def validate_device_credential(self, credential):
            # Authlib does not remember that a device code was already exchanged: we do.
            if credential.get("used"):
                raise InvalidGrantError("device_code was already exchanged for tokens")
            now = time.monotonic()
            previous = credential.get("last_poll")
            credential["last_poll"] = now
            credential["too_fast"] = previous is not None and (
                now - previous + st.config["poll_tolerance"] < credential["interval"]
            )
            return super().validate_device_credential(credential)

        def should_slow_down(self, credential):
            # Authlib leaves the timing to us: RFC 8628 §3.5, add the increment for this and
            # all subsequent polls.
            if credential.pop("too_fast", False):
                credential["interval"] += st.config["slow_down_increment"]
                raise SlowDown(credential["interval"])
            return False

        def save_token(self, token):
            self.request.credential["used"] = True
            return super().save_token(token)

    class RefreshGrant(RefreshTokenGrant):
        # Public client: allow auth method "none" (Authlib's default is client_secret_basic).
        TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
        INCLUDE_NEW_REFRESH_TOKEN = True  # rotation

        def authenticate_refresh_token(self, refresh_token):
            record = st.by_refresh.get(refresh_token)
            if record is None:
                st.stats["refresh_invalid"] += 1
                raise InvalidGrantError("unknown refresh_token")
            state = record["refresh_state"]
            if state == "rotated":
                st.stats["refresh_reused"] += 1
                raise InvalidGrantError("refresh_token was already used (rotated)")
            if state == "revoked":
                st.stats["refresh_invalid"] += 1
                raise InvalidGrantError("refresh_token was revoked")
            if record["refresh_expires_at"] is not None and time.time() >= record["refresh_expires_at"]:
                st.stats["refresh_invalid"] += 1
                raise InvalidGrantError("refresh_token expired")
            return record

        def authenticate_user(self, refresh_token):
            return st.users.get(refresh_token["sub"])

        def revoke_old_credential(self, refresh_token):
            refresh_token["refresh_state"] = "rotated"
            refresh_token["rotated_at"] = time.time()

    class IDTokenKeys:
        def get_client_algorithm(self, client):
            return "RS256"

        def resolve_client_private_key(self, client):
            return st.rsa_key

        def get_encode_header(self, client):
            return {"alg": "RS256", "kid": st.rsa_key.kid}

        def get_client_claims(self, client):
            now = int(time.time())
            return {
                "iss": st.issuer,
                "aud": [client.get_client_id()],
                "iat": now,
                "exp": now + st.config["id_token_lifetime"],
            }

        def generate_user_info(self, user, scope):
            info = UserInfo(sub=user["sub"], email=user["email"], email_verified=True, name=user["name"])
            path = st.plan_claim_path()
            node = info
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = user["plan"]
            return info

    class IDToken(IDTokenKeys, OpenIDToken):
        pass

    class IDCode(IDTokenKeys, OpenIDCode):
        def exists_nonce(self, nonce, request):
            return False

    class S256Only(CodeChallenge):
        """PKCE required, and only S256 (Authlib also takes plain, and no challenge at all)."""

        SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

        def validate_code_challenge(self, grant, redirect_uri):
            data = grant.request.payload.data
            if not data.get("code_challenge") or data.get("code_challenge_method") != "S256":
                raise InvalidRequestError("code_challenge with code_challenge_method=S256 is required")
            return super().validate_code_challenge(grant, redirect_uri)

    class CodeGrant(AuthorizationCodeGrant):
        TOKEN_ENDPOINT_AUTH_METHODS = ["none"]

        def save_authorization_code(self, code, request):
            data = request.payload.data
            st.codes[code] = AuthorizationCode(
                code=code,
                client_id=request.client.get_client_id(),
                redirect_uri=request.payload.redirect_uri,
                scope=request.scope,
                sub=request.user["sub"],
                nonce=data.get("nonce"),
                auth_time=int(time.time()),
                code_challenge=data.get("code_challenge"),
                code_challenge_method=data.get("code_challenge_method"),
                expires_at=time.time() + 600,
            )

        def query_authorization_code(self, code, client):
            item = st.codes.get(code)
            if item and item["client_id"] == client.get_client_id() and time.time() < item["expires_at"]:
                return item
            return None

        def delete_authorization_code(self, authorization_code):
            # Single use: gone once exchanged.
            st.codes.pop(authorization_code["code"], None)
            st.stats["code_exchanges"] += 1

        def authenticate_user(self, authorization_code):
            return st.users.get(authorization_code["sub"])

    class DeviceAuthorization(DeviceAuthorizationEndpoint):
        @property
        def EXPIRES_IN(self):  # noqa: N802 - Authlib's attribute name
            return st.config["device_code_lifetime"]

        @property
        def INTERVAL(self):  # noqa: N802
            return st.config["interval"]

        def get_verification_uri(self):
            return st.issuer + "/device"

        def save_device_credential(self, client_id, scope, data):
            cred = DeviceCredentialDict(
                client_id=client_id,
                scope=scope,
                **data,
                expires_at=time.time() + max(data["expires_in"], st.config["device_code_server_lifetime"]),
                server_lifetime=st.config["device_code_server_lifetime"],
                status="pending",
                used=False,
                last_poll=None,
                seq=len(st.devices) + 1,
            )
            st.devices[data["device_code"]] = cred
            st.user_codes[normalize_user_code(data["user_code"])] = data["device_code"]

    class Revocation(RevocationEndpoint):
        # Public client: allow auth method "none" (Authlib's default is client_secret_basic).
        CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

        def query_token(self, token_string, token_type_hint):
            if token_type_hint == "access_token":
                return st.by_access.get(token_string)
            if token_type_hint == "refresh_token":
                return st.by_refresh.get(token_string)
            return st.by_access.get(token_string) or st.by_refresh.get(token_string)

        def revoke_token(self, token, request):
            # Revoking a refresh token also revokes its access token (RFC 7009 §2.1);
            # revoking an access token leaves the refresh token usable.
            access_only = request.form["token"] != token.get("refresh_token")
            if st.revoke_record(token, access_only=access_only):
                st.stats["revocations"] += 1

    server.register_grant(CodeGrant, [S256Only(required=True), IDCode(require_nonce=False)])
    server.register_grant(DeviceGrant, [IDToken()])
    server.register_grant(RefreshGrant, [IDToken()])
    server.register_endpoint(DeviceAuthorization)
    server.register_endpoint(Revocation)
    return server


# ---------------------------------------------------------------------------------------------
# Flask app


def create_app(st: State):
    app = Flask("device_server")
    server = build_authorization_server(app, st)

    # -- public endpoints --------------------------------------------------------------------

    @app.get("/.well-known/openid-configuration")
    def discovery():
        iss = st.issuer
        return jsonify(
            issuer=iss,
            device_authorization_endpoint=iss + "/oauth/device_authorization",
            token_endpoint=iss + "/oauth/token",
            revocation_endpoint=iss + "/oauth/revoke",
            authorization_endpoint=iss + "/oauth/authorize",
            code_challenge_methods_supported=["S256"],
            userinfo_endpoint=iss + "/oauth/userinfo",
            jwks_uri=iss + "/oauth/jwks",
            grant_types_supported=[
                "urn:ietf:params:oauth:grant-type:device_code",
                "refresh_token",
                "authorization_code",
            ],
            response_types_supported=["code"],
            scopes_supported=list(ALLOWED_SCOPES),
            token_endpoint_auth_methods_supported=["none"],
            revocation_endpoint_auth_methods_supported=["none"],
            subject_types_supported=["public"],
            id_token_signing_alg_values_supported=["RS256"],
            claims_supported=["sub", "email", "email_verified", "name", "iss", "aud", "exp", "iat"],
        )

    @app.get("/oauth/jwks")
    def jwks():
        return jsonify(keys=[st.rsa_key.as_dict(private=False)])

    @app.post("/oauth/device_authorization")
    def device_authorization():
        with st.lock:
            st.stats["device_authorizations"] += 1
            return server.create_endpoint_response("device_authorization")

    @app.post("/oauth/token")
    def token():
        grant_type = request.form.get("grant_type")
        with st.lock:
            st.stats["token_requests"] += 1
            is_poll = grant_type == "urn:ietf:params:oauth:grant-type:device_code"
            is_refresh = grant_type == "refresh_token"
            if is_poll:
                st.stats["token_polls"] += 1
            if is_refresh:
                st.stats["refresh_requests"] += 1
            resp = server.create_token_response()
            if is_poll:
                if resp.status_code == 200:
                    key = "success"
                else:
                    key = (resp.get_json(silent=True) or {}).get("error", "other_error")
                    if key not in st.stats["poll_results"]:
                        key = "other_error"
                st.stats["poll_results"][key] += 1
            if is_refresh:
                if resp.status_code == 200:
                    st.stats["refreshes_succeeded"] += 1
                else:
                    st.stats["refresh_errors"] += 1
            return resp

    @app.get("/oauth/authorize")
    def authorize():
        # The person at the browser: the first decision queued with /_test/browser, else a page.
        with st.lock:
            st.stats["authorize_requests"] += 1
            try:
                grant = server.get_consent_grant(end_user=None)
            except OAuth2Error as error:
                return server.handle_error_response(None, error)
            if not st.browser_decisions:
                return Response(_page("Queue a decision with POST /_test/browser to answer this sign-in.", ""),
                                mimetype="text/html")
            decision = st.browser_decisions.pop(0)
            if decision["action"] == "deny":
                st.stats["authorize_denied"] += 1
                return server.create_authorization_response(grant_user=None, grant=grant)
            st.stats["authorize_approved"] += 1
            return server.create_authorization_response(grant_user=st.make_user(decision), grant=grant)

    @app.post("/oauth/revoke")
    def revoke():
        with st.lock:
            st.stats["revocation_requests"] += 1
            return server.create_endpoint_response("revocation")

    @app.route("/oauth/userinfo", methods=["GET", "POST"])
    def userinfo():
        auth = request.headers.get("Authorization", "")
        tok = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        with st.lock:
            record = st.by_access.get(tok)
            if record is None or record.is_revoked() or record.is_expired():
                resp = jsonify(error="invalid_token", error_description="access token is unknown, revoked or expired")
                resp.status_code = 401
                resp.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
                return resp
            user = st.users[record["sub"]]
            return jsonify(sub=user["sub"], email=user["email"], name=user["name"], plan=user["plan"])

    @app.route("/device", methods=["GET", "POST"])
    def device_page():
        msg = ""
        if request.method == "POST":
            code = request.form.get("user_code", "")
            identity = {k: request.form.get(k) for k in ("email", "plan", "sub", "name") if request.form.get(k)}
            try:
                approve = request.form.get("action", "approve") != "deny"
                st.decide(code, approve, identity)
                msg = "Device approved. You can close this window." if approve else "Request denied."
                return Response(_page(msg, code), mimetype="text/html")
            except HookError as e:
                return Response(_page(e.message, code), status=e.status, mimetype="text/html")
        return Response(_page(msg, request.args.get("user_code", "")), mimetype="text/html")

    # -- test hooks --------------------------------------------------------------------------

    register_common_hooks(app, st, ENDPOINT_NAMES)

    @app.post("/_test/approve")
    @hook
    def t_approve():
        body = hook_body(request)
        identity = {k: want_str(body, k) for k in ("email", "plan", "sub", "name")}
        return jsonify(st.decide(want_str(body, "user_code"), True, identity))

    @app.post("/_test/browser")
    @hook
    def t_browser():
        """Queues how the next GET /oauth/authorize is answered: approve (as `email`, `plan`,
        `sub`, `name`) or deny (access_denied)."""
        body = hook_body(request)
        action = want_str(body, "action", "approve")
        if action not in ("approve", "deny"):
            raise HookError("'action' must be approve or deny")
        decision = {"action": action}
        decision.update({k: want_str(body, k) for k in ("email", "plan", "sub", "name") if want_str(body, k)})
        with st.lock:
            st.browser_decisions.append(decision)
            return jsonify(queued=len(st.browser_decisions))

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
                elif key == "default_plan":
                    new[key] = want_str(body, key)
                elif key == "plan_claim":
                    value = body[key]
                    if isinstance(value, str) and value and all(value.split("/")):
                        new[key] = value
                    elif isinstance(value, list) and value and all(isinstance(s, str) and s for s in value):
                        new[key] = value
                    else:
                        raise HookError("'plan_claim' must be a 'a/b' path string or a list of keys")
                else:
                    raise HookError(f"unknown setting '{key}'")
            st.config = new
            return jsonify(st.config)

    @app.post("/_test/revoke")
    @hook
    def t_revoke():
        body = hook_body(request)
        with st.lock:
            records: list[Token] = []
            access_only = False
            if want_str(body, "refresh_token"):
                rec = st.by_refresh.get(body["refresh_token"])
                if rec is None:
                    raise HookError("unknown refresh_token", 404)
                records = [rec]
            elif want_str(body, "access_token"):
                rec = st.by_access.get(body["access_token"])
                if rec is None:
                    raise HookError("unknown access_token", 404)
                records, access_only = [rec], True
            elif want_str(body, "sub") or want_str(body, "email"):
                subs = {
                    u["sub"]
                    for u in st.users.values()
                    if u["sub"] == body.get("sub") or u["email"] == body.get("email")
                }
                records = [r for r in st.by_access.values() if r["sub"] in subs]
            elif body.get("all") is True:
                records = list(st.by_access.values())
            else:
                raise HookError("give one of: refresh_token, access_token, sub, email, all:true")
            n = sum(1 for r in records if st.revoke_record(r, access_only=access_only))
            st.stats["revocations"] += n
            return jsonify(revoked=n)

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
        rate_limit_body={"error": "rate_limit_exceeded", "error_description": "too many requests"},
    )
    return app


def _page(message: str, user_code: str) -> str:
    m = f"<p><strong>{html.escape(message)}</strong></p>" if message else ""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Device sign-in (test server)</title></head>
<body><h1>Connect a device</h1>{m}
<form method="post" action="/device">
<label>Code <input name="user_code" value="{html.escape(user_code)}" autofocus></label><br>
<label>Email <input name="email" value="{DEFAULT_EMAIL}"></label><br>
<label>Plan <input name="plan" value=""></label><br>
<button name="action" value="approve">Approve</button>
<button name="action" value="deny">Deny</button>
</form></body></html>
"""


def main(argv=None) -> int:
    p = base_arg_parser("RFC 8628 device authorization test server (Lanyard test fixture)")
    p.add_argument("--client-id", action="append", default=None,
                   help=f"public client id to accept (repeatable; default {DEFAULT_CLIENT_ID})")
    p.add_argument("--access-token-lifetime", type=int, default=3600)
    p.add_argument("--refresh-token-lifetime", type=int, default=0, help="0 = never expire (default)")
    p.add_argument("--id-token-lifetime", type=int, default=3600)
    p.add_argument("--device-code-lifetime", type=int, default=600)
    p.add_argument("--device-code-server-lifetime", type=int, default=0,
                   help="keep codes pending this long in real time, whatever expires_in says (0: as it says)")
    p.add_argument("--interval", type=int, default=5)
    p.add_argument("--slow-down-increment", type=int, default=5)
    p.add_argument("--poll-tolerance", type=float, default=0.05)
    p.add_argument("--plan-claim", default="org.example/plan",
                   help="'/'-separated path of the plan claim in id tokens (default org.example/plan)")
    p.add_argument("--default-plan", default="pro")
    args = p.parse_args(argv)
    setup_logging(args.log_level)
    config = {
        "access_token_lifetime": args.access_token_lifetime,
        "refresh_token_lifetime": args.refresh_token_lifetime,
        "id_token_lifetime": args.id_token_lifetime,
        "device_code_lifetime": args.device_code_lifetime,
        "device_code_server_lifetime": args.device_code_server_lifetime,
        "interval": args.interval,
        "slow_down_increment": args.slow_down_increment,
        "poll_tolerance": args.poll_tolerance,
        "plan_claim": args.plan_claim,
        "default_plan": args.default_plan,
    }
    st = State(config, args.client_id or [DEFAULT_CLIENT_ID])
    app = create_app(st)

    def on_bound(base_url):
        st.issuer = base_url

    return serve(app, args.host, args.port, on_bound, exit_with_parent=args.exit_with_parent,
                 tls=(args.tls_cert, args.tls_key))


if __name__ == "__main__":
    sys.exit(main())
