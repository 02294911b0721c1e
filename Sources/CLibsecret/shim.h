// GLib, GIO and libsecret in one module so their types are not imported twice. Only GLib is
// linked; libsecret, GIO and GObject are loaded on first use (CLibsecretLoader).
#include <glib.h>
#include <glib/gstdio.h>
#include <gio/gio.h>
#include "lanyard-secret.h"
