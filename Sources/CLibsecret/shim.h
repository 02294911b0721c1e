// GLib, GIO and libsecret in one module so their types are not imported twice.
#include <glib.h>
#include <glib/gstdio.h>
#include <gio/gio.h>
#include <libsecret/secret.h>
