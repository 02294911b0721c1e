#!/usr/bin/env bash
# Self-test of the OAuth test servers in this folder: starts each one on a free loopback port,
# drives the happy paths and a few failure paths with curl (WebSocket: simple_websocket.Client
# from the venv), checks every answer with Python's json, stops the servers. Exits non-zero on the first failure. Ends with "N passed, N failed".
#   Tests/Fixtures/oauth/selftest.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
"$root/scripts/venv.sh"
PY="$root/.venv/bin/python"
command -v curl >/dev/null || { echo "selftest: curl is required" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/oauth-selftest.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
status=""
pass() { passed=$((passed + 1)); echo "ok $passed - $*"; }
die() {
  echo "FAIL - $*" >&2
  if [ -f "$work/body" ]; then
    echo "  last HTTP status: $status; body:" >&2
    head -c 800 "$work/body" >&2 || true
    echo >&2
  fi
  for f in "$work"/*.err; do [ -f "$f" ] && { echo "  --- tail of $(basename "$f")" >&2; tail -n 15 "$f" >&2; }; done
  echo "selftest: $passed passed, 1 failed"
  exit 1
}

# start NAME SCRIPT [ARGS...]: starts a server, waits for its READY line; sets BASE and PID.
start() {
  local name=$1 script=$2
  shift 2
  "$PY" "$here/$script" --port 0 "$@" >"$work/$name.out" 2>"$work/$name.err" &
  PID=$!
  pids+=("$PID")
  local i
  for i in $(seq 150); do
    if grep -q '^READY ' "$work/$name.out" 2>/dev/null; then break; fi
    kill -0 "$PID" 2>/dev/null || die "$name exited before printing READY"
    sleep 0.1
  done
  BASE=$(sed -n 's/^READY //p' "$work/$name.out")
  [ -n "$BASE" ] || die "$name printed no READY line within 15 s"
  case "$BASE" in http://127.0.0.1:[0-9]*) ;; *) die "$name READY line malformed: $BASE" ;; esac
  pass "$name started: READY $BASE"
}

# stop NAME PID: SIGTERM, expect a clean exit 0 and exactly one stdout line.
stop() {
  local name=$1 pid=$2 rc=0
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || die "$name exited with $rc on SIGTERM"
  [ "$(wc -l <"$work/$name.out")" -eq 1 ] || die "$name printed more than the READY line on stdout"
  pass "$name stopped cleanly on SIGTERM (stdout was only the READY line)"
}

# req METHOD URL [curl args...]: response body in $work/body, status code in $status
# ("curl-N" when curl itself failed, e.g. on a reset connection).
req() {
  local method=$1 url=$2
  shift 2
  rm -f "$work/body"
  status=$(curl -s -o "$work/body" -w '%{http_code}' -X "$method" "$url" "$@") || status="curl-$?"
}
post_json() { req POST "$1" -H 'Content-Type: application/json' --data "$2"; }
post_form() { local url=$1; shift; req POST "$url" "$@"; }

# check DESCRIPTION PYTHON-EXPR: evaluates EXPR with s = HTTP status (int when numeric),
# d = parsed JSON body (None if not JSON), raw = body bytes, jwt(t) = decoded JWT payload,
# s256(v) = PKCE S256 of v, ev = the body as SSE: [(event, parsed data or None), ...],
# types = [event for event, _ in ev].
check() {
  local desc=$1 expr=$2
  "$PY" -c '
import base64, hashlib, json, sys
path, status, expr = sys.argv[1:4]
try:
    raw = open(path, "rb").read()
except OSError:
    raw = b""
try:
    d = json.loads(raw)
except ValueError:
    d = None
s = int(status) if status.isdigit() else status
def jwt(t):
    seg = t.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4)))
def s256(v):
    return base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b"=").decode()
ev = []
for block in raw.decode("utf-8", "replace").split("\n\n"):
    name, data = None, []
    for line in block.split("\n"):
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
    if name is not None or data:
        try:
            ev.append((name, json.loads("\n".join(data))))
        except ValueError:
            ev.append((name, None))
types = [name for name, _ in ev]
sys.exit(0 if eval(expr) else 1)
' "$work/body" "$status" "$expr" || die "$desc"
  pass "$desc"
}

# ws_req URL TOKEN FRAME [CANCEL_AFTER]: one WebSocket exchange with simple_websocket.Client
# (a flask-sock dependency): sends FRAME after the upgrade and reads until the server closes (or
# closes itself after CANCEL_AFTER seconds). $work/body gets {"status": 101 or the refusal's
# HTTP status, "frames": [text, or {"binary": hex}], "events": [parsed JSON or None], "close":
# close code (1000 normal, 1005 = no close frame), "cancelled": bool}; $status is "ws".
ws_req() {
  rm -f "$work/body"
  status=ws
  "$PY" - "$@" >"$work/body" <<'PYEOF' || status=ws-failed
import json, sys, time
import simple_websocket
url, token, frame = sys.argv[1:4]
cancel_after = float(sys.argv[4]) if len(sys.argv) > 4 else None
out = {"status": None, "frames": [], "events": [], "close": None, "cancelled": False}
try:
    ws = simple_websocket.Client.connect(url, headers={"Authorization": "Bearer " + token})
except simple_websocket.ConnectionError as e:
    out["status"] = e.status_code
else:
    out["status"] = 101
    ws.send(frame)
    start = time.monotonic()
    while True:
        if cancel_after is not None and time.monotonic() - start >= cancel_after:
            ws.close()
            out["cancelled"] = True
            break
        try:
            m = ws.receive(timeout=0.05 if cancel_after is not None else 10)
        except simple_websocket.ConnectionClosed as e:
            out["close"] = int(e.reason)
            break
        if m is None:
            if cancel_after is None:
                out["timeout"] = True
                break
            continue
        if isinstance(m, bytes):
            out["frames"].append({"binary": m.hex()})
            out["events"].append(None)
            continue
        out["frames"].append(m)
        try:
            out["events"].append(json.loads(m))
        except ValueError:
            out["events"].append(None)
print(json.dumps(out))
PYEOF
}

# get PYTHON-EXPR: prints EXPR evaluated over d (the last JSON body).
get() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$work/body" "$1"; }

# ============================================================================================
echo "# device_server.py (RFC 8628)"
start device device_server.py --interval 1 --slow-down-increment 1
DS=$BASE DS_PID=$PID
CID=lanyard-test-client
DEV_GRANT=urn:ietf:params:oauth:grant-type:device_code

req GET "$DS/.well-known/openid-configuration"
check "discovery document" "s == 200 and d['issuer'] == '$DS' and d['device_authorization_endpoint'] == '$DS/oauth/device_authorization' and d['token_endpoint'] == '$DS/oauth/token' and d['revocation_endpoint'] == '$DS/oauth/revoke'"

post_form "$DS/oauth/device_authorization" -d client_id=$CID -d 'scope=openid email offline_access'
check "device authorization" "s == 200 and d['interval'] == 1 and d['expires_in'] > 0 and d['verification_uri'] == '$DS/device' and len(d['device_code']) > 20 and '-' in d['user_code']"
DC=$(get "d['device_code']") UC=$(get "d['user_code']")

post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=$DEV_GRANT -d device_code="$DC"
check "poll before approval: authorization_pending" "s == 400 and d['error'] == 'authorization_pending'"
post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=$DEV_GRANT -d device_code="$DC"
check "poll faster than interval: slow_down, interval +1" "s == 400 and d['error'] == 'slow_down' and d['interval'] == 2"

post_json "$DS/_test/approve" "{\"user_code\":\"$UC\",\"email\":\"ada@example.com\",\"plan\":\"team\"}"
check "approve hook" "s == 200 and d['status'] == 'approved' and d['email'] == 'ada@example.com'"
sleep 2.1
post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=$DEV_GRANT -d device_code="$DC"
check "device code exchanged for tokens with id token claims" "s == 200 and d['token_type'] == 'Bearer' and d['refresh_token'] and jwt(d['id_token'])['email'] == 'ada@example.com' and jwt(d['id_token'])['org.example']['plan'] == 'team' and jwt(d['id_token'])['sub'] and jwt(d['id_token'])['iss'] == '$DS'"
RT1=$(get "d['refresh_token']") AT1=$(get "d['access_token']")
sleep 1.1
post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=$DEV_GRANT -d device_code="$DC"
check "device code is single-use" "s == 400 and d['error'] == 'invalid_grant'"

req GET "$DS/oauth/userinfo" -H "Authorization: Bearer $AT1"
check "userinfo with the access token" "s == 200 and d['email'] == 'ada@example.com'"

post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=refresh_token -d refresh_token="$RT1"
check "refresh rotates the refresh token and re-issues an id token" "s == 200 and d['refresh_token'] != '$RT1' and jwt(d['id_token'])['org.example']['plan'] == 'team'"
RT2=$(get "d['refresh_token']")
post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=refresh_token -d refresh_token="$RT1"
check "old refresh token rejected: invalid_grant" "s == 400 and d['error'] == 'invalid_grant'"

# 32 concurrent refreshes with the same token: exactly one winner.
curls=()
for i in $(seq 32); do
  curl -s -o "$work/conc.$i" -w '%{http_code}\n' -d client_id=$CID -d grant_type=refresh_token \
    -d refresh_token="$RT2" "$DS/oauth/token" >"$work/conc.$i.status" &
  curls+=("$!")
done
for p in "${curls[@]}"; do wait "$p" || true; done
winners=$(cat "$work"/conc.*.status | grep -c '^200$' || true)
[ "$winners" -eq 1 ] || die "32 concurrent refreshes of one token: $winners winners (want 1)"
pass "32 concurrent refreshes of one token: exactly one winner"
RT3=$("$PY" -c 'import json,sys,glob
for f in glob.glob(sys.argv[1] + "/conc.*[0-9]"):
    d = json.load(open(f))
    if "refresh_token" in d: print(d["refresh_token"])' "$work")

post_form "$DS/oauth/revoke" -d client_id=$CID -d token="$RT3" -d token_type_hint=refresh_token
check "revoke a refresh token (public client, auth method none)" "s == 200"
post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=refresh_token -d refresh_token="$RT3"
check "revoked refresh token rejected" "s == 400 and d['error'] == 'invalid_grant'"

post_form "$DS/oauth/device_authorization" -d client_id=$CID
UC2=$(get "d['user_code']") DC2=$(get "d['device_code']")
post_json "$DS/_test/deny" "{\"user_code\":\"$UC2\"}"
post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=$DEV_GRANT -d device_code="$DC2"
check "denied device code: access_denied" "s == 400 and d['error'] == 'access_denied'"

post_form "$DS/oauth/device_authorization" -d client_id=$CID
DC3=$(get "d['device_code']")
post_json "$DS/_test/expire" '{}'
check "expire hook (latest pending code)" "s == 200 and d['status'] == 'expired'"
post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=$DEV_GRANT -d device_code="$DC3"
check "expired device code: expired_token" "s == 400 and d['error'] == 'expired_token'"

post_json "$DS/_test/fault" '{"endpoint":"token","type":"status","status":503,"body":{"error":"temporarily_unavailable"}}'
check "fault hook accepted" "s == 200 and d['count'] == 1"
post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=refresh_token -d refresh_token=x
check "injected 503 on the token endpoint" "s == 503 and d == {'error': 'temporarily_unavailable'}"
post_form "$DS/oauth/token" -d client_id=$CID -d grant_type=refresh_token -d refresh_token=x
check "fault applies to the next N=1 requests only" "s == 400 and d['error'] == 'invalid_grant'"
post_json "$DS/_test/fault" '{"endpoint":"discovery","type":"reset"}'
req GET "$DS/.well-known/openid-configuration"
check "injected connection reset (no HTTP response)" "str(s).startswith('curl-')"
post_json "$DS/_test/fault" '{"endpoint":"discovery","type":"huge"}'
req GET "$DS/.well-known/openid-configuration"
check "injected 2 MiB body" "s == 200 and len(raw) == 2 * 1024 * 1024"

req GET "$DS/_test/stats"
check "stats" "d['device_authorizations'] == 3 and d['refreshes_succeeded'] == 2 and d['refresh_reused'] == 32 and d['refresh_invalid'] == 2 and d['revocations'] == 1 and d['poll_results']['slow_down'] == 1 and d['requests']['discovery'] == 3 and d['faults_injected']['token'] == 1"

post_json "$DS/_test/fault" '{"endpoint":"discovery","type":"huge","stream":true,"length":false,"size":3145728}'
req GET "$DS/.well-known/openid-configuration"
check "injected 3 MiB body, streamed without a Content-Length" "s == 200 and len(raw) == 3 * 1024 * 1024 and raw.endswith(b'aa\"}')"
req GET "$DS/_test/faults/streamed"
check "the streamed bytes are counted" "s == 200 and d == {'bytes': 3 * 1024 * 1024, 'ended': 1}"

post_json "$DS/_test/reset" '{}'
req GET "$DS/_test/stats"
check "reset clears stats" "s == 200 and d['token_requests'] == 0"
req GET "$DS/_test/faults/streamed"
check "reset clears the streamed count" "s == 200 and d == {'bytes': 0, 'ended': 0}"
stop device "$DS_PID"

# ============================================================================================
echo "# chatgpt_emulator.py (Codex device sign-in)"
start chatgpt chatgpt_emulator.py --access-token-lifetime 3 \
  --accounts '[{"email":"grace@example.com","plan":"plus","account_id":"acct-grace","user_id":"user-grace"}]'
CG=$BASE CG_PID=$PID
CCID=app_EMoamEEZ73f0CkXaXp7hrann

post_json "$CG/api/accounts/deviceauth/usercode" "{\"client_id\":\"$CCID\"}"
check "user code (interval is a string)" "s == 200 and d['interval'] == '5' and d['device_auth_id'] and d['user_code']"
DAID=$(get "d['device_auth_id']") CUC=$(get "d['user_code']")
post_json "$CG/api/accounts/deviceauth/token" "{\"device_auth_id\":\"$DAID\",\"user_code\":\"$CUC\"}"
check "device token poll while pending: 403" "s == 403"

req GET "$CG/codex/device"
check "approval page is an HTML form" "s == 200 and b'<form' in raw and b'user_code' in raw"
post_form "$CG/codex/device" --data-urlencode "user_code=$CUC" -d email=grace@example.com -d plan=pro
check "browser-style approval" "s == 200 and b'approved' in raw"

post_json "$CG/api/accounts/deviceauth/token" "{\"device_auth_id\":\"$DAID\",\"user_code\":\"$CUC\"}"
check "poll after approval: code + server-made PKCE pair (S256)" "s == 200 and d['authorization_code'] and s256(d['code_verifier']) == d['code_challenge']"
CODE=$(get "d['authorization_code']") VER=$(get "d['code_verifier']")

post_form "$CG/oauth/token" -d grant_type=authorization_code --data-urlencode "code=$CODE" \
  --data-urlencode "redirect_uri=$CG/wrong" -d client_id=$CCID --data-urlencode "code_verifier=$VER"
check "exchange with a wrong redirect_uri is refused" "s == 400 and d['error'] == 'invalid_grant'"
post_form "$CG/oauth/token" -d grant_type=authorization_code --data-urlencode "code=$CODE" \
  --data-urlencode "redirect_uri=$CG/deviceauth/callback" -d client_id=$CCID --data-urlencode "code_verifier=$VER"
check "code exchange: id/access/refresh tokens with ChatGPT claims" "s == 200 and d['expires_in'] == 3 and jwt(d['id_token'])['email'] == 'grace@example.com' and jwt(d['id_token'])['https://api.openai.com/auth'] == {'chatgpt_plan_type': 'pro', 'chatgpt_user_id': 'user-grace', 'user_id': 'user-grace', 'chatgpt_account_id': 'acct-grace', 'chatgpt_account_is_fedramp': False} and jwt(d['access_token'])['exp'] - jwt(d['access_token'])['iat'] == 3"
CRT1=$(get "d['refresh_token']") CAT1=$(get "d['access_token']")

post_json "$CG/_test/usage" '{"account_id":"acct-grace","primary_window":{"used_percent":42,"limit_window_seconds":18000,"reset_after_seconds":600},"secondary_window":{"used_percent":7,"limit_window_seconds":604800,"reset_after_seconds":86400},"credits":{"has_credits":true,"unlimited":false,"balance":"12.5"}}'
check "usage script hook" "s == 200"
req GET "$CG/backend-api/wham/usage" -H "Authorization: Bearer $CAT1" -H 'ChatGPT-Account-Id: acct-grace'
check "usage endpoint answers the scripted values" "s == 200 and d['plan_type'] == 'pro' and d['rate_limit']['primary_window']['used_percent'] == 42 and d['rate_limit']['secondary_window']['limit_window_seconds'] == 604800 and d['rate_limit']['primary_window']['reset_at'] > 0 and d['credits']['balance'] == '12.5'"
req GET "$CG/backend-api/wham/usage" -H "Authorization: Bearer nope" -H 'ChatGPT-Account-Id: acct-grace'
check "usage with an unknown access token: 401" "s == 401"

post_json "$CG/oauth/token" "{\"client_id\":\"$CCID\",\"grant_type\":\"refresh_token\",\"refresh_token\":\"$CRT1\"}"
check "JSON refresh rotates the refresh token" "s == 200 and d['refresh_token'] != '$CRT1' and jwt(d['id_token'])['email'] == 'grace@example.com'"
CRT2=$(get "d['refresh_token']") CAT2=$(get "d['access_token']")
post_json "$CG/oauth/token" "{\"client_id\":\"$CCID\",\"grant_type\":\"refresh_token\",\"refresh_token\":\"$CRT1\"}"
check "reused refresh token: 401 refresh_token_reused" "s == 401 and d['error']['code'] == 'refresh_token_reused'"
post_json "$CG/oauth/token" "{\"client_id\":\"$CCID\",\"grant_type\":\"refresh_token\",\"refresh_token\":\"$CRT2\"}"
check "reuse revoked the family: newest token now refresh_token_invalidated" "s == 401 and d['error']['code'] == 'refresh_token_invalidated'"

sleep 3.2
req GET "$CG/backend-api/wham/usage" -H "Authorization: Bearer $CAT2" -H 'ChatGPT-Account-Id: acct-grace'
check "access token expires after the configured 3 s: 401" "s == 401"

# Second sign-in, approved through the hook, to exercise the remaining error paths.
post_json "$CG/_test/config" '{"interval_as_string":false,"pending_status":404,"error_shape":"code","access_token_lifetime":3600}'
check "config hook" "s == 200 and d['error_shape'] == 'code'"
post_json "$CG/api/accounts/deviceauth/usercode" "{\"client_id\":\"$CCID\"}"
check "user code with a numeric interval" "s == 200 and d['interval'] == 5"
DAID=$(get "d['device_auth_id']") CUC=$(get "d['user_code']")
post_json "$CG/api/accounts/deviceauth/token" "{\"device_auth_id\":\"$DAID\",\"user_code\":\"$CUC\"}"
check "pending status switched to 404" "s == 404"
post_json "$CG/_test/approve" '{}'
check "approve hook (latest pending code, default account)" "s == 200 and d['account_id'] == 'acct-grace'"
post_json "$CG/api/accounts/deviceauth/token" "{\"device_auth_id\":\"$DAID\",\"user_code\":\"$CUC\"}"
CODE=$(get "d['authorization_code']") VER=$(get "d['code_verifier']")
post_form "$CG/oauth/token" -d grant_type=authorization_code --data-urlencode "code=$CODE" \
  --data-urlencode "redirect_uri=$CG/deviceauth/callback" -d client_id=$CCID --data-urlencode "code_verifier=$VER"
check "second code exchange" "s == 200"
CRT3=$(get "d['refresh_token']") CAT3=$(get "d['access_token']")
post_json "$CG/_test/expire_refresh" "{\"refresh_token\":\"$CRT3\"}"
post_json "$CG/oauth/token" "{\"client_id\":\"$CCID\",\"grant_type\":\"refresh_token\",\"refresh_token\":\"$CRT3\"}"
check "expired refresh token, top-level code shape" "s == 401 and d['code'] == 'refresh_token_expired'"

post_json "$CG/_test/usage_limit" '{"account_id":"acct-grace","resets_in_seconds":120,"retry_after":30,"count":1}'
req GET "$CG/backend-api/wham/usage" -D "$work/headers" -H "Authorization: Bearer $CAT3" -H 'ChatGPT-Account-Id: acct-grace'
check "usage limit reached: 429 with error.type usage_limit_reached" "s == 429 and d['error']['type'] == 'usage_limit_reached' and d['error']['resets_in_seconds'] == 120 and d['error']['plan_type'] == 'pro'"
grep -qi '^Retry-After: 30' "$work/headers" || die "429 without Retry-After: 30"
pass "429 carries Retry-After"

post_json "$CG/_test/fault" '{"endpoint":"usercode","type":"rate_limit","retry_after":9}'
post_json "$CG/api/accounts/deviceauth/usercode" "{\"client_id\":\"$CCID\"}"
check "injected 429 on the user-code endpoint" "s == 429"
post_json "$CG/_test/fault" '{"endpoint":"usage","type":"non_json","count":2}'
req GET "$CG/backend-api/wham/usage" -H "Authorization: Bearer $CAT3"
check "injected non-JSON 200 body on usage" "s == 200 and d is None"
post_json "$CG/_test/fault" '{"endpoint":"oauth_token","type":"reset"}'
post_json "$CG/oauth/token" "{\"client_id\":\"$CCID\",\"grant_type\":\"refresh_token\",\"refresh_token\":\"x\"}"
check "injected connection reset on /oauth/token" "str(s).startswith('curl-')"
post_json "$CG/_test/fault" '{"endpoint":"oauth_token","type":"delay","seconds":0.5}'
post_json "$CG/oauth/token" "{\"client_id\":\"$CCID\",\"grant_type\":\"refresh_token\",\"refresh_token\":\"x\"}"
check "delayed response still answers normally" "s == 401 and d['code'] == 'refresh_token_invalidated'"

post_json "$CG/_test/personal_access_token" '{"email":"pat@example.com"}'
check "a personal access token is minted" "s == 200 and d['token'].startswith('at-')"
PAT=$(get "d['token']")
req GET "$CG/api/accounts/v1/user-auth-credential/whoami" -H "Authorization: Bearer $PAT"
check "whoami names the token's account as Codex reads it" "s == 200 and d['email'] == 'pat@example.com' and d['chatgpt_account_id'] and d['chatgpt_user_id'] and d['chatgpt_plan_type'] and d['chatgpt_account_is_fedramp'] is False"
req GET "$CG/api/accounts/v1/user-auth-credential/whoami" -H "Authorization: Bearer $CAT3"
check "whoami refuses an OAuth access token" "s == 401 and d['error']['code'] == 'invalid_token'"
post_json "$CG/_test/personal_access_token" "{\"revoke\":\"$PAT\"}"
req GET "$CG/api/accounts/v1/user-auth-credential/whoami" -H "Authorization: Bearer $PAT"
check "whoami refuses a revoked personal access token" "s == 401"

post_json "$CG/_test/config" '{"device_signin_enabled":false}'
post_json "$CG/api/accounts/deviceauth/usercode" "{\"client_id\":\"$CCID\"}"
check "device sign-in disabled: 404" "s == 404"

req GET "$CG/_test/stats"
check "stats" "d['refreshes_succeeded'] == 1 and d['refresh_reused'] == 1 and d['refresh_invalidated'] == 2 and d['refresh_expired'] == 1 and d['code_exchanges'] == 2 and d['usage_limited'] == 1 and d['requests']['usage'] == 5 and d['faults_injected']['oauth_token'] == 2 and d['requests']['usercode'] == 4"
# -- streaming Responses endpoint (SSE and WebSocket) -----------------------------------------
RESP="$CG/backend-api/codex/responses"
WSURL="ws://${CG#http://}/backend-api/codex/responses"
INPUT='[{"role":"user","content":[{"type":"input_text","text":"hi there"},{"type":"input_text","text":" friend"}]}]'
SSE_BODY="{\"model\":\"gpt-test\",\"stream\":true,\"instructions\":\"be brief\",\"input\":$INPUT}"
WS_FRAME="{\"type\":\"response.create\",\"model\":\"gpt-test\",\"input\":$INPUT}"
REPLY='Hello grace@example.com. You said: hi there friend'
# stream_post [curl args...]: POST SSE_BODY to the endpoint with the CAT3 bearer token.
stream_post() { req POST "$RESP" -N -D "$work/headers" -H "Authorization: Bearer $CAT3" -H 'ChatGPT-Account-Id: acct-grace' --data "$SSE_BODY" "$@"; }

stream_post
check "SSE: prelude, created, deltas of 5 chars, done, completed with usage" "s == 200 and raw.startswith(b': stream start\n\nretry: 1000\n\n') and types[0] == 'response.created' and types[-2:] == ['response.output_text.done', 'response.completed'] and all(t == 'response.output_text.delta' for t in types[1:-2]) and ''.join(x['delta'] for _, x in ev[1:-2]) == '$REPLY' and all(len(x['delta']) == 5 for _, x in ev[1:-3]) and ev[-1][1]['response']['output'][0]['content'][0]['text'] == '$REPLY' and ev[-1][1]['response']['usage'] == {'input_tokens': 3, 'output_tokens': len(ev) - 3, 'total_tokens': len(ev)} and ev[0][1]['response']['id'] == ev[-1][1]['response']['id'] and ev[-1][1]['response']['model'] == 'gpt-test'"
grep -qi '^Content-Type: text/event-stream' "$work/headers" || die "SSE without Content-Type text/event-stream"
pass "SSE answers text/event-stream"

ws_req "$WSURL" "$CAT3" "$WS_FRAME"
check "WebSocket: 101, one frame per event, normal close" "d['status'] == 101 and d['close'] == 1000 and d['events'][0]['type'] == 'response.created' and [e['type'] for e in d['events'][-2:]] == ['response.output_text.done', 'response.completed'] and ''.join(e['delta'] for e in d['events'][1:-2]) == '$REPLY' and d['events'][-1]['response']['usage']['output_tokens'] == len(d['events']) - 3"
post_json "$CG/_test/stream" '{"script":[{"transport":"sse","drop_after":3},{"transport":"websocket","refuse_upgrade":426},{"transport":"websocket","drop_after":2},{"transport":"sse","unknown_after":1,"malformed_after":2,"chunk":100,"text":"replayed"}]}'
check "stream script hook" "s == 200 and len(d['script']) == 4 and d['script'][0] == {'transport': 'sse', 'drop_after': 3}"
stream_post
check "SSE drop_after 3: connection cut after 3 events, no response.completed (curl 18)" "s == 'curl-18' and len([t for t in types if t]) == 3 and 'response.completed' not in types"
stream_post
check "SSE unknown + malformed events injected, text and chunk scripted" "s == 200 and types == ['response.created', 'response.future_thing', 'response.output_text.delta', 'response.output_text.delta', 'response.output_text.done', 'response.completed'] and ev[1][1] == {'type': 'response.future_thing', 'x': 1} and ev[2][1]['delta'] == 'replayed' and ev[3][1] is None and ev[-1][1]['response']['output'][0]['content'][0]['text'] == 'replayed'"

post_json "$CG/_test/usage_limit" '{"account_id":"acct-grace","resets_in_seconds":60,"retry_after":11,"count":1}'
stream_post
check "SSE usage limit: 429 usage_limit_reached" "s == 429 and d['error']['type'] == 'usage_limit_reached' and d['error']['resets_in_seconds'] == 60 and d['error']['plan_type'] == 'pro'"
grep -qi '^Retry-After: 11' "$work/headers" || die "SSE 429 without Retry-After: 11"
pass "SSE 429 carries Retry-After"
req POST "$RESP" -D "$work/headers" -H 'Authorization: Bearer nope' --data "$SSE_BODY"
check "SSE with an unknown token: 401 like usage" "s == 401 and d['error']['code'] == 'invalid_token'"
grep -qi '^WWW-Authenticate: Bearer error="invalid_token"' "$work/headers" || die "SSE 401 without WWW-Authenticate"
pass "SSE 401 carries WWW-Authenticate"
req POST "$RESP" -H "Authorization: Bearer $CAT3" --data '{"model":"m","input":[]}'
check "SSE without stream:true: 400 invalid_request" "s == 400 and d['error']['code'] == 'invalid_request'"

ws_req "$WSURL" "$CAT3" "$WS_FRAME"
check "WebSocket refuse_upgrade 426 (no 101)" "d['status'] == 426"
ws_req "$WSURL" "$CAT3" "$WS_FRAME"
check "WebSocket drop_after 2: two frames, then the TCP connection ends without a close frame" "d['status'] == 101 and len(d['frames']) == 2 and d['close'] == 1005"
post_json "$CG/_test/usage_limit" '{"account_id":"acct-grace","count":1}'
ws_req "$WSURL" "$CAT3" "$WS_FRAME"
check "WebSocket usage limit: in-band error event 429, then a normal close" "d['status'] == 101 and len(d['events']) == 1 and d['events'][0]['type'] == 'error' and d['events'][0]['status'] == 429 and d['events'][0]['error']['type'] == 'usage_limit_reached' and d['close'] == 1000"
ws_req "$WSURL" "nope" "$WS_FRAME"
check "WebSocket with an unknown token: upgrade refused with 401" "d['status'] == 401"
req GET "$RESP" -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='
check "refused upgrade answers the usage 401 body" "s == 401 and d['error']['code'] == 'invalid_token'"

post_json "$CG/_test/stream" '{"script":[{"transport":"websocket","hold":true,"drop_after":1}]}'
ws_req "$WSURL" "$CAT3" "$WS_FRAME" 0.5
check "WebSocket hold: one event, then the client cancels" "d['status'] == 101 and len(d['frames']) == 1 and d['cancelled']"
for i in $(seq 50); do
  req GET "$CG/_test/stats"
  [ "$(get "d['stream']['open_connections']")" = 0 ] && break
  sleep 0.1
done
check "stream stats (open connections back to 0 after the cancel)" "d['stream']['open_connections'] == 0 and d['stream']['ws_client_closed'] == 1 and d['stream']['ws_upgrade_attempts'] == 7 and d['stream']['ws_upgrades_refused'] == 3 and d['stream']['ws_connections'] == 4 and d['stream']['sse_requests'] == 6 and d['stream']['unauthorized'] == 3 and d['stream']['usage_limited'] == 2 and d['stream']['completed'] == 3 and d['stream']['last_request']['body']['type'] == 'response.create' and 'authorization' not in d['stream']['last_request']['headers']"
req GET "$CG/_test/stream"
check "stream script consumed" "s == 200 and d['script'] == []"
post_json "$CG/_test/reset" '{}'
req GET "$CG/_test/stats"
check "reset clears the stream stats" "d['stream']['ws_upgrade_attempts'] == 0 and d['stream']['sse_requests'] == 0 and d['stream']['last_request'] is None"
stop chatgpt "$CG_PID"

echo "selftest: $passed passed, 0 failed"
