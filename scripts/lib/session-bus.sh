# Sourced (POSIX sh) by the scripts that start a private D-Bus session (scripts/with-keyring.sh,
# scripts/with-keepassxc.sh, scripts/soak/crash.sh).

# session_bus_config FILE SOCKET-DIR [SERVICE-DIR]: writes a session bus configuration like the
# system's session.conf (everything allowed) whose socket is made in SOCKET-DIR. The stock
# configuration listens on unix:tmpdir=/tmp, and a bus that is killed leaves its socket file there.
# Services are started on demand from the standard folders, or only from SERVICE-DIR when given.
session_bus_config() {
  if [ -n "${3:-}" ]; then services="<servicedir>$3</servicedir>"; else services="<standard_session_servicedirs/>"; fi
  cat > "$1" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:dir=$2</listen>
  <auth>EXTERNAL</auth>
  $services
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
}
