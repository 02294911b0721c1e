# Sourced inside the private session of scripts/with-keepassxc.sh and scripts/with-kwallet.sh:
# proves the Secret Service is usable before any test runs. A probe item is stored into the
# default alias, read back and deleted with secret-tool (5 s each); what fails is said through the
# sourcing script's own `fail`. secret-tool's errors go to "$log".
probe_secret_service() {
  st() { timeout 5 secret-tool "$@" 2>>"$log"; }
  printf probe | st store --label=lanyard-probe lanyard-probe ready || fail "secret-tool store into the default collection failed"
  [ "$(st lookup lanyard-probe ready)" = probe ] || fail "secret-tool lookup did not return the probe"
  st clear lanyard-probe ready || fail "secret-tool clear failed"
  ! st lookup lanyard-probe ready >/dev/null || fail "the probe item survived secret-tool clear"
}
