# Sourced (POSIX sh) by the scripts that start a private D-Bus session with gnome-keyring
# (scripts/with-keyring.sh, scripts/soak/crash.sh).

# session_bus_config FILE SOCKET-DIR: writes a session bus configuration like the system's
# session.conf (D-Bus activation from the standard service folders, everything allowed) whose
# socket is made in SOCKET-DIR. The stock configuration listens on unix:tmpdir=/tmp, and a bus that
# dbus-run-session stops leaves its socket file there: one for every run.
session_bus_config() {
  cat > "$1" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:dir=$2</listen>
  <auth>EXTERNAL</auth>
  <standard_session_servicedirs/>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
}
