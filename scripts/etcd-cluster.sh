#!/bin/sh
# A throwaway 3-member etcd cluster on 127.0.0.1 for the fleet tests: TLS everywhere, client
# certificates required, certificates made afresh in DIR by openssl on each start.
#   scripts/etcd-cluster.sh start DIR          make certificates, start m1 m2 m3, wait until healthy
#   scripts/etcd-cluster.sh stop DIR           stop every member (SIGKILL) and wait until they are gone
#   scripts/etcd-cluster.sh kill DIR NAME      SIGKILL one member and wait until it is gone
#   scripts/etcd-cluster.sh restart DIR NAME   start a member again on its data dir, wait healthy
#   scripts/etcd-cluster.sh leader DIR [SECS]  print the leader member's name (waits SECS, default 15)
#   scripts/etcd-cluster.sh health DIR [SECS [NAME…]]  exit 0 when every member (or each NAME) is
#                                              healthy (waits SECS, default 0)
#   scripts/etcd-cluster.sh cert DIR NAME [CN] a further client certificate DIR/certs/NAME.{pem,key}
#                                              signed by the cluster's CA (empty Common Name unless CN)
# DIR/env is sourceable: LANYARD_TEST_ETCD_ENDPOINTS (comma-separated https URLs), _CA, _CERT and
# _KEY (a client certificate with an empty Common Name: the JSON gateway rejects one with a Common
# Name when RBAC is on), _ADMIN_CERT and _ADMIN_KEY (Common Name "root", which this script uses so
# that its health checks keep working after a test turns auth on), _DIR, _MEMBERS.
# DIR/members/NAME/ holds pid, url (client URL), peer-url, cmd (the shell-quoted etcd command line
# that restarts it on the same data dir), data/ and log.
set -eu

etcd=${ETCD:-/usr/bin/etcd}
etcdctl=${ETCDCTL:-/usr/bin/etcdctl}
members="m1 m2 m3"
# Timing for a loaded 2-core machine: the election timeout is ten heartbeats so a slow fsync or a
# descheduled member does not depose the leader; pre-vote keeps a restarted member from forcing an
# election.
heartbeat_ms=${LANYARD_TEST_ETCD_HEARTBEAT_MS:-100}
election_ms=${LANYARD_TEST_ETCD_ELECTION_MS:-1000}
start_timeout=${LANYARD_TEST_ETCD_START_TIMEOUT:-60}

# The binary a running member's /proc/PID/exe names.
etcd_exe=$(readlink -f "$etcd" 2> /dev/null || echo "$etcd")

die() { echo "etcd-cluster: $*" >&2; exit 1; }
usage() { sed -n '2,13s/^# \{0,1\}//p' "$0" >&2; exit 2; }

# q WORD: WORD quoted for sh.
q() { printf "'%s'" "$(printf %s "$1" | sed "s/'/'\\\\''/g")"; }

# quote_words WORD…: the words quoted for sh on one line (one sed for all: forks are slow on a
# loaded machine).
quote_words() { printf '%s\n' "$@" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/" | tr '\n' ' '; echo; }

# now: seconds since the epoch, with fractions (for deadlines shorter than a few seconds).
now() { date +%s.%N; }
# before DEADLINE: true while the clock is before DEADLINE.
before() { awk -v d="$1" -v n="$(now)" 'BEGIN { exit !(n < d) }'; }
# deadline SECS: the time SECS from now.
deadline() { awk -v s="$1" -v n="$(now)" 'BEGIN { printf "%.3f", n + s }'; }

# running PID: the process exists and is not a zombie.
running() {
  state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2> /dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# alive DIR NAME: true when the member's recorded process is running and is still that member's
# etcd (its command line names the member's data dir), so a reused pid is never hit.
alive() {
  pidfile="$1/members/$2/pid"
  [ -s "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  running "$pid" || return 1
  tr '\0' '\n' < "/proc/$pid/cmdline" 2> /dev/null | grep -qxF -- "--data-dir=$1/members/$2/data"
}

# ctl DIR ARGS…: etcdctl against the cluster with the admin client certificate.
ctl() {
  d=$1; shift
  ETCDCTL_API=3 "$etcdctl" --cacert="$d/certs/ca.pem" --cert="$d/certs/admin.pem" --key="$d/certs/admin.key" \
    --dial-timeout=2s --command-timeout=5s "$@"
}

endpoints() { # DIR [NAME…]: the named members' client URLs (default: every member's), comma-separated
  ed=$1; shift; list=""
  for m in ${*:-$members}; do member_dir "$ed" "$m"; list="${list:+$list,}$(cat "$ed/members/$m/url")"; done
  printf '%s\n' "$list"
}

# log_tails DIR: the end of each member's log, for a failure message.
log_tails() {
  for m in $members; do
    [ -f "$1/members/$m/log" ] || continue
    echo "--- $m ($1/members/$m/log), last 25 lines:" >&2
    tail -25 "$1/members/$m/log" >&2
  done
}

# openssl_cert DIR NAME CN EXTENDED-KEY-USAGE [SAN]: DIR/certs/NAME.{pem,key}, an EC P-256 key and
# a certificate for one day signed by the CA. An empty CN gives a subject without a Common Name.
# A random serial rather than a serial file, and files named after NAME, so that tests may make
# certificates side by side.
# Certificates start an hour in the past (through faketime, when installed), so a simulated machine
# whose clock lags by minutes still accepts them.
ossl() { if command -v faketime > /dev/null 2>&1; then faketime -f -1h openssl "$@"; else openssl "$@"; fi; }

openssl_cert() {
  c="$1/certs"; name=$2; cn=$3; eku=$4; san=${5:-}; err="$c/$name.err"
  subject="/O=lanyard-test"; [ -z "$cn" ] || subject="$subject/CN=$cn"
  ext="$c/$name.ext"
  { echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -z "$san" ] || echo "subjectAltName=$san"; } > "$ext"
  (umask 077; ossl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "$subject" -keyout "$c/$name.key" -out "$c/$name.csr" 2> "$err") ||
    { cat "$err" >&2; die "openssl could not make the key for $name"; }
  serial=0x$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
  ossl x509 -req -in "$c/$name.csr" -CA "$c/ca.pem" -CAkey "$c/ca.key" -set_serial "$serial" -days 1 \
    -extfile "$ext" -out "$c/$name.pem" 2> "$err" ||
    { cat "$err" >&2; die "openssl could not sign the certificate for $name"; }
  rm -f "$c/$name.csr" "$ext" "$err"
}

make_certs() { # DIR
  c="$1/certs"
  mkdir -p "$c"; chmod 700 "$c"
  (umask 077; ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj "/O=lanyard-test/CN=lanyard-test etcd CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$c/ca.key" -out "$c/ca.pem" 2> "$c/openssl.err") ||
    { cat "$c/openssl.err" >&2; die "openssl could not make the CA"; }
  rm -f "$c/openssl.err"; chmod 644 "$c/ca.pem"
  # One server certificate for the members' client listeners, one peer certificate (a member is
  # a TLS server and a TLS client to its peers). The server certificate is a client one too: the
  # JSON gateway presents it when it dials the member's own gRPC listener, and with
  # --client-cert-auth a server-only certificate makes every gateway call fail ("connection closed").
  openssl_cert "$1" server "lanyard-test etcd server" serverAuth,clientAuth "IP:127.0.0.1,DNS:localhost"
  openssl_cert "$1" peer "lanyard-test etcd peer" serverAuth,clientAuth "IP:127.0.0.1,DNS:localhost"
  openssl_cert "$1" client "" clientAuth
  openssl_cert "$1" admin root clientAuth
}

# port_free PORT: nothing listens on PORT and no connection uses it.
port_free() { ! ss -Htan 2> /dev/null | awk '{ print $4; print $5 }' | grep -q ":$1\$"; }

# pick_ports: six consecutive free ports below the ephemeral range (where outgoing connections
# take theirs), starting from a base derived from this shell's pid and the clock so parallel runs
# start far apart; a clash found later is retried by start.
pick_ports() {
  seed=$(( $$ * 7919 + $(date +%s) ))
  tries=0
  while [ $tries -lt 200 ]; do
    base=$(( 20000 + ( (seed + tries * 613) % 1200 ) * 10 ))
    ok=1
    for i in 0 1 2 3 4 5; do port_free $((base + i)) || { ok=0; break; }; done
    if [ $ok = 1 ]; then echo $base; return 0; fi
    tries=$((tries + 1))
  done
  die "found no six free ports between 20000 and 32000"
}

# launch DIR NAME: run the member's recorded command in the background, record its pid. The
# member gets only stdin, stdout and stderr: a descriptor it inherited (Foundation's Process, for
# one, hands its child a socket whose closing tells it the child ended) would be held open as
# long as the member runs, and whoever ran this script would wait that long. perl-base is
# Essential on Debian; sh cannot close descriptors above 9.
launch() {
  ldir=$1 lname=$2 mdir="$1/members/$2"
  eval "set -- $(cat "$mdir/cmd")"
  perl -MPOSIX -e 'opendir(my $d, "/proc/self/fd") or die "/proc/self/fd: $!";
    my @fds = grep { /^\d+$/ && $_ > 2 } readdir($d); closedir($d);
    POSIX::close($_) for @fds; exec { $ARGV[0] } @ARGV or die "exec $ARGV[0]: $!"' "$@" \
    < /dev/null >> "$mdir/log" 2>&1 &
  launched=$!
  echo $launched > "$mdir/pid"
  # Until the forked shell has run perl, and perl etcd, /proc shows another command line, and in
  # the middle of an exec none at all: alive would call the member dead. Wait until the process
  # is etcd (its exe; the command line read after that is etcd's) with the member's arguments (a
  # member that dies at once is for the caller to see).
  until_exec=$(deadline 10)
  until [ "$(readlink "/proc/$launched/exe" 2> /dev/null)" = "$etcd_exe" ] && alive "$ldir" "$lname"; do
    running "$launched" || return 0
    before "$until_exec" || die "member $lname (pid $launched) did not start etcd within 10 s"
    sleep 0.02
  done
}

# listening URL,…: something listens on the port of each https://127.0.0.1:PORT.
listening() {
  for url in $(printf %s "$1" | tr , ' '); do
    [ -n "$(ss -Htln "sport = :${url##*:}" 2> /dev/null)" ] || return 1
  done
}

# wait_healthy DIR SECS [NAME…]: wait until the named members (default: all) answer a
# linearizable read; fail with the members' log tails after SECS.
wait_healthy() {
  d=$1 secs=$2; end=$(deadline "$secs"); shift 2
  names=${*:-$members}
  while :; do
    eps="" answer=""
    for m in $names; do
      alive "$d" "$m" || { dead=$m; log_tails "$d"; die "member $dead exited (its log is above)"; }
      eps="${eps:+$eps,}$(cat "$d/members/$m/url")"
    done
    # etcdctl spends its whole dial timeout on a port nobody listens on yet: ask it only once
    # every member listens.
    if listening "$eps" && answer=$(ctl "$d" --endpoints="$eps" endpoint health 2>&1); then return 0; fi
    if ! before "$end"; then
      printf '%s\n' "${answer:-(no member listens on its client port)}" >&2
      log_tails "$d"
      die "members $names not healthy after $secs s (etcdctl's answer and the logs are above)"
    fi
    sleep 0.2
  done
}

start_once() { # DIR: 0 started, 3 a port clash (retry), else fails
  d=$1
  base=$(pick_ports) || return 1
  cluster=""; i=0
  for m in $members; do
    cluster="${cluster:+$cluster,}$m=https://127.0.0.1:$((base + i + 3))"; i=$((i + 1))
  done
  token="lanyard-test-$$-$(date +%s)"
  i=0
  for m in $members; do
    mdir="$d/members/$m"
    rm -rf "$mdir"; mkdir -p "$mdir/data"; chmod 700 "$mdir/data"
    client="https://127.0.0.1:$((base + i))" peer="https://127.0.0.1:$((base + i + 3))"
    echo "$client" > "$mdir/url"; echo "$peer" > "$mdir/peer-url"
    # --auto-compaction-retention=0: no compaction unless a test asks, so revisions stay readable.
    # --bcrypt-cost=4 (the least): password authentication in RBAC tests without the 10-round cost.
    set -- "$etcd" "--name=$m" "--data-dir=$mdir/data" \
      "--listen-client-urls=$client" "--advertise-client-urls=$client" \
      "--listen-peer-urls=$peer" "--initial-advertise-peer-urls=$peer" \
      "--initial-cluster=$cluster" "--initial-cluster-state=new" "--initial-cluster-token=$token" \
      "--cert-file=$d/certs/server.pem" "--key-file=$d/certs/server.key" \
      "--trusted-ca-file=$d/certs/ca.pem" "--client-cert-auth=true" \
      "--peer-cert-file=$d/certs/peer.pem" "--peer-key-file=$d/certs/peer.key" \
      "--peer-trusted-ca-file=$d/certs/ca.pem" "--peer-client-cert-auth=true" \
      "--heartbeat-interval=$heartbeat_ms" "--election-timeout=$election_ms" "--pre-vote=true" \
      "--auto-compaction-retention=0" "--bcrypt-cost=4" "--logger=zap" "--log-outputs=stderr"
    quote_words "$@" > "$mdir/cmd"
    : > "$mdir/log"
    i=$((i + 1))
  done
  for m in $members; do launch "$d" "$m"; done
  # A member that lost its port to another process exits at once saying so: retry elsewhere.
  if ! (wait_healthy "$d" "$start_timeout"); then
    if grep -q "address already in use" "$d"/members/*/log 2> /dev/null; then stop "$d"; return 3; fi
    stop "$d"; return 1
  fi
}

start() { # DIR
  d=$1
  command -v openssl > /dev/null || die "openssl is not installed (make deps)"
  [ -x "$etcd" ] || die "$etcd is not installed (make deps installs etcd-server)"
  [ -x "$etcdctl" ] || die "$etcdctl is not installed (make deps installs etcd-client)"
  mkdir -p "$d"; chmod 700 "$d"
  d=$(cd "$d" && pwd)
  make_certs "$d"
  attempt=1
  while :; do
    status=0; start_once "$d" || status=$?
    [ $status = 0 ] && break
    [ $status = 3 ] && [ $attempt -lt 3 ] || die "the cluster in $d did not start"
    echo "etcd-cluster: a port was taken meanwhile; trying other ports" >&2
    attempt=$((attempt + 1))
  done
  { echo "LANYARD_TEST_ETCD_ENDPOINTS=$(q "$(endpoints "$d")")"
    echo "LANYARD_TEST_ETCD_CA=$(q "$d/certs/ca.pem")"
    echo "LANYARD_TEST_ETCD_CERT=$(q "$d/certs/client.pem")"
    echo "LANYARD_TEST_ETCD_KEY=$(q "$d/certs/client.key")"
    echo "LANYARD_TEST_ETCD_ADMIN_CERT=$(q "$d/certs/admin.pem")"
    echo "LANYARD_TEST_ETCD_ADMIN_KEY=$(q "$d/certs/admin.key")"
    echo "LANYARD_TEST_ETCD_DIR=$(q "$d")"
    echo "LANYARD_TEST_ETCD_MEMBERS=$(q "$members")"
    echo "export LANYARD_TEST_ETCD_ENDPOINTS LANYARD_TEST_ETCD_CA LANYARD_TEST_ETCD_CERT LANYARD_TEST_ETCD_KEY"
    echo "export LANYARD_TEST_ETCD_ADMIN_CERT LANYARD_TEST_ETCD_ADMIN_KEY LANYARD_TEST_ETCD_DIR LANYARD_TEST_ETCD_MEMBERS"
  } > "$d/env"
}

stop() { # DIR: SIGKILL, as the data is thrown away (a graceful stop of the whole cluster spends
  # seconds on leadership transfers to members that are stopping too)
  d=$1
  [ -d "$d/members" ] || return 0
  for m in $members; do
    if alive "$d" "$m"; then kill -KILL "$(cat "$d/members/$m/pid")" 2> /dev/null || true; fi
  done
  end=$(deadline 10)
  for m in $members; do
    while alive "$d" "$m"; do
      before "$end" || die "member $m still runs 10 s after SIGKILL"
      sleep 0.05
    done
  done
}

member_dir() { # DIR NAME: fails unless NAME is a member of the cluster in DIR
  [ -f "$1/members/$2/cmd" ] || die "no member $2 in $1 (members: $members)"
}

kill_member() { # DIR NAME
  member_dir "$1" "$2"
  alive "$1" "$2" || die "member $2 is not running"
  kill -KILL "$(cat "$1/members/$2/pid")"
  end=$(deadline 10)
  while alive "$1" "$2"; do
    before "$end" || die "member $2 still runs 10 s after SIGKILL"
    sleep 0.05
  done
}

restart_member() { # DIR NAME
  member_dir "$1" "$2"
  if alive "$1" "$2"; then die "member $2 is already running"; fi
  echo "--- restarted at $(date -u +%FT%TZ)" >> "$1/members/$2/log"
  launch "$1" "$2"
  wait_healthy "$1" "$start_timeout" "$2"
}

leader() { # DIR [SECS]: the name of the member the running members report as leader, waiting
  # up to SECS (default 15) for one, as just after a leader is killed there is none until the
  # election ends.
  d=$1; end=$(deadline "${2:-15}")
  while :; do
    for m in $members; do
      alive "$d" "$m" || continue
      url=$(cat "$d/members/$m/url")
      # endpoint status -w simple: ENDPOINT, ID, VERSION, DB SIZE, IS LEADER, IS LEARNER, …
      line=$(ctl "$d" --endpoints="$url" endpoint status -w simple 2> /dev/null) || continue
      if [ "$(printf '%s\n' "$line" | awk -F', ' '{ print $5 }')" = true ]; then echo "$m"; return 0; fi
    done
    before "$end" || die "no running member became the leader within ${2:-15} s"
    sleep 0.1
  done
}

health() { # DIR [SECS [NAME…]]: every member (or the named ones) answers a linearizable read,
  # within SECS (default: now)
  d=$1; end=$(deadline "${2:-0}"); shift; [ $# = 0 ] || shift
  eps=$(endpoints "$d" "$@")
  until answer=$(ctl "$d" --endpoints="$eps" endpoint health 2>&1); do
    before "$end" || { printf '%s\n' "$answer" >&2; return 1; }
    sleep 0.2
  done
  printf '%s\n' "$answer"
}

[ $# -ge 2 ] || usage
command=$1 dir=$2
case $command in
  start) [ $# = 2 ] || usage; start "$dir" ;;
  stop) [ $# = 2 ] || usage; stop "$dir" ;;
  kill) [ $# = 3 ] || usage; kill_member "$dir" "$3" ;;
  restart) [ $# = 3 ] || usage; restart_member "$dir" "$3" ;;
  leader) [ $# -le 3 ] || usage; leader "$dir" "${3:-15}" ;;
  health) shift 2; secs=${1:-0}; [ $# = 0 ] || shift; health "$dir" "$secs" "$@" ;;
  cert) [ $# -ge 3 ] && [ $# -le 4 ] || usage; [ -f "$dir/certs/ca.key" ] || die "no cluster in $dir"
    case $3 in *[!A-Za-z0-9._-]*|"") die "a certificate name is letters, digits, '.', '_' and '-'" ;; esac
    openssl_cert "$dir" "$3" "${4:-}" clientAuth; echo "$dir/certs/$3.pem" ;;
  *) usage ;;
esac
