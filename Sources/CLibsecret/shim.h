// GLib, GIO and libsecret in one module so their types are not imported twice. None is linked at
// start-up: CLazyLibraries loads each on first use.
#include <glib.h>
#include <glib/gstdio.h>
#include <gio/gio.h>
#include "lanyard-secret.h"
