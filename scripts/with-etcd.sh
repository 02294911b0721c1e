#!/bin/sh
# Runs a command with a throwaway 3-member etcd cluster (TLS, client certificates; see
# scripts/etcd-cluster.sh) and its LANYARD_TEST_ETCD_* variables in the environment; stops the
# cluster and removes its folder when the command ends.
# Fails (exit 96) when the cluster cannot start: tests that need it must not silently skip.
#   scripts/with-etcd.sh CMD [ARGS…]
set -eu
[ $# -ge 1 ] || { echo "usage: scripts/with-etcd.sh CMD [ARGS…]" >&2; exit 2; }
cluster="$(cd "$(dirname "$0")" && pwd)/etcd-cluster.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-etcd.XXXXXX")
# The clusters tests start for themselves (EtcdCluster.withPrivateCluster) live under
# $dir/private: stop them too, in case a test process died before it could.
cleanup() {
  for private in "$dir"/private/*/; do
    [ -d "$private" ] && "$cluster" stop "${private%/}" || true
  done
  "$cluster" stop "$dir" || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if ! "$cluster" start "$dir"; then
  echo "with-etcd: the etcd test cluster did not start (see above; make deps installs etcd-server and etcd-client)" >&2
  exit 96
fi
. "$dir/env"
status=0
"$@" || status=$?
exit $status
