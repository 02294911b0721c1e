#!/bin/sh
# Checks scripts/etcd-cluster.sh against the real etcd: start a cluster, write and read over TLS
# with the empty-CN client certificate (etcdctl, and curl through the JSON gateway), kill the
# leader and write with 2 of 3, kill a second member and see a write fail (no quorum) within a
# bounded time, restart both, check health and that the restarted members caught up, stop.
# Then kills and restarts the members in turn RESTARTS times (default 3; a few hundred, with a CPU
# hog, shows whether restart ever calls a member that came up dead). Prints the time each step took.
#   scripts/etcd-cluster-selftest.sh        (KEEP=1 keeps the cluster's folder and logs)
set -eu
cd "$(dirname "$0")/.."
cluster=scripts/etcd-cluster.sh
dir=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-etcd-selftest.XXXXXX")
trap '"$cluster" stop "$dir" || true; [ -n "${KEEP:-}" ] || rm -rf "$dir"; [ -z "${KEEP:-}" ] || echo "kept $dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { echo "etcd-cluster-selftest: FAILED: $*" >&2; exit 1; }
ms() { date +%s%3N; }
step_started=0
step() { step_started=$(ms); printf '%-66s' "$1"; }
done_step() { echo "ok ($(( $(ms) - step_started )) ms)"; }

step "start (certificates, 3 members, healthy)"
"$cluster" start "$dir" > /dev/null
done_step
. "$dir/env"
# etcdctl as a test client would be: the empty-CN client certificate, every endpoint.
kv() {
  ETCDCTL_API=3 etcdctl --cacert="$LANYARD_TEST_ETCD_CA" --cert="$LANYARD_TEST_ETCD_CERT" --key="$LANYARD_TEST_ETCD_KEY" \
    --endpoints="$LANYARD_TEST_ETCD_ENDPOINTS" --dial-timeout=2s "$@"
}
openssl x509 -in "$LANYARD_TEST_ETCD_CERT" -noout -subject | grep -q "CN" && fail "the client certificate has a Common Name"

step "put and get over TLS with the client certificate (etcdctl)"
kv put selftest/a one > /dev/null
[ "$(kv get selftest/a --print-value-only)" = one ] || fail "get selftest/a did not read back 'one'"
done_step

step "the same through the JSON gateway (curl, /v3/kv/put and range)"
first=${LANYARD_TEST_ETCD_ENDPOINTS%%,*}
gateway() { curl -sS --max-time 10 --cacert "$LANYARD_TEST_ETCD_CA" --cert "$LANYARD_TEST_ETCD_CERT" \
  --key "$LANYARD_TEST_ETCD_KEY" -X POST "$first/v3/kv/$1" -d "$2"; }
key=$(printf selftest/b | base64) value=$(printf two | base64)
answer=$(gateway put "{\"key\":\"$key\",\"value\":\"$value\"}")
case $answer in *'"revision"'*) ;; *) fail "gateway put answered: $answer" ;; esac
answer=$(gateway range "{\"key\":\"$key\"}")
case $answer in *"\"value\":\"$value\""*) ;; *) fail "gateway range answered: $answer" ;; esac
if curl -sS --max-time 10 --cacert "$LANYARD_TEST_ETCD_CA" -X POST "$first/v3/kv/range" -d "{\"key\":\"$key\"}" > /dev/null 2>&1; then
  fail "a client without a certificate was answered"
fi
done_step

leader=$("$cluster" leader "$dir")
step "kill the leader ($leader) with SIGKILL"
"$cluster" kill "$dir" "$leader"
done_step

step "a new leader is elected"
second=$("$cluster" leader "$dir" 30)
[ "$second" != "$leader" ] || fail "the killed member $leader is still reported as leader"
done_step
# A put sent while there is no leader can hang for the server's request timeout (5 s plus two
# election timeouts) and fail with "request timed out", which etcdctl does not retry (the write
# may or may not have happened): wait for the election, as a fleet client must.
step "put with 2 of 3 members"
kv --command-timeout=15s put selftest/c three > /dev/null 2> "$dir/put.err" || { cat "$dir/put.err" >&2; fail "put with 2 of 3 members failed"; }
done_step

step "kill $second too: a put must fail (no quorum) within 20 s"
"$cluster" kill "$dir" "$second"
started=$(ms)
if timeout 20 sh -c 'ETCDCTL_API=3 etcdctl --cacert="$LANYARD_TEST_ETCD_CA" --cert="$LANYARD_TEST_ETCD_CERT" \
    --key="$LANYARD_TEST_ETCD_KEY" --endpoints="$LANYARD_TEST_ETCD_ENDPOINTS" --dial-timeout=2s \
    --command-timeout=5s put selftest/d four' > /dev/null 2> "$dir/noquorum.err"; then
  fail "a put succeeded with 1 of 3 members"
fi
took=$(( $(ms) - started ))
[ "$took" -lt 20000 ] || fail "the put without quorum did not fail within 20 s"
done_step
echo "  (the put failed after $took ms: $(grep -o 'context deadline exceeded\|no leader\|timed out' "$dir/noquorum.err" | head -1))"

step "restart $leader and $second, wait until healthy"
"$cluster" restart "$dir" "$leader"
"$cluster" restart "$dir" "$second"
"$cluster" health "$dir" 30 > /dev/null || fail "the cluster is not healthy after the restarts"
done_step

step "every member has the write made with 2 of 3 (local reads)"
for url in $(printf %s "$LANYARD_TEST_ETCD_ENDPOINTS" | tr , ' '); do
  end=$(( $(ms) + 20000 ))
  until [ "$(kv --endpoints="$url" get selftest/c --consistency=s --print-value-only 2> /dev/null)" = three ]; do
    [ "$(ms)" -lt $end ] || fail "$url does not have selftest/c"
    sleep 0.1
  done
done
kv put selftest/e five > /dev/null
done_step

restarts=${RESTARTS:-3}
step "kill and restart a member $restarts times in turn, each healthy"
i=0
while [ $i -lt "$restarts" ]; do
  m=m$(( i % 3 + 1 ))
  "$cluster" kill "$dir" "$m"
  "$cluster" restart "$dir" "$m" 2> "$dir/restart.err" || { cat "$dir/restart.err" >&2; fail "restart $((i + 1)) of $m failed"; }
  "$cluster" health "$dir" 30 "$m" > /dev/null || fail "$m is not healthy after restart $((i + 1))"
  i=$((i + 1))
done
done_step

step "stop"
"$cluster" stop "$dir"
for m in $LANYARD_TEST_ETCD_MEMBERS; do
  pid=$(cat "$dir/members/$m/pid")
  if [ -r "/proc/$pid/cmdline" ] && tr '\0' '\n' < "/proc/$pid/cmdline" | grep -qxF -- "--data-dir=$dir/members/$m/data" &&
     ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status"; then
    fail "member $m (pid $pid) still runs after stop"
  fi
done
done_step
echo "etcd-cluster-selftest: ok"
