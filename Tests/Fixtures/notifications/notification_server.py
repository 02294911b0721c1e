#!/usr/bin/python3
"""A notification server for tests: owns org.freedesktop.Notifications on the session bus
(DBUS_SESSION_BUS_ADDRESS, a test's private bus), records every Notify as one JSON line in the
file given (an `image-data` hint as its shape and the SHA-256 of its pixels), and emits
ActionInvoked or NotificationClosed when a test asks through its own interface
org.lanyard.test.Notifications (InvokeAction(u id, s key), Close(u id, u reason)).

Debian's python3-dbus and python3-gi (scripts/deps.sh); run with /usr/bin/python3, not the venv.
Prints "ready" once it owns the name.
    notification_server.py RECORD.jsonl
"""
import hashlib
import json
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
TEST_INTERFACE = "org.lanyard.test.Notifications"


class Server(dbus.service.Object):
    def __init__(self, bus, record):
        super().__init__(bus, PATH)
        self.record = record
        self.next_id = 0

    @dbus.service.method(NAME, in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app_name, replaces_id, icon, summary, body, actions, hints, timeout):
        self.next_id += 1
        line = {
            "id": self.next_id, "app_name": str(app_name), "replaces_id": int(replaces_id), "icon": str(icon),
            "summary": str(summary), "body": str(body), "actions": [str(a) for a in actions],
            "urgency": int(hints["urgency"]) if "urgency" in hints else None, "timeout": int(timeout),
        }
        if "image-data" in hints:
            # (iiibiiay): width, height, rowstride, has alpha, bits per sample, channels, pixels
            # (recorded as their length and SHA-256, not the bytes).
            width, height, rowstride, alpha, bits, channels, data = hints["image-data"]
            pixels = bytes(data)
            line["image"] = {"width": int(width), "height": int(height), "rowstride": int(rowstride),
                             "has_alpha": bool(alpha), "bits_per_sample": int(bits), "channels": int(channels),
                             "length": len(pixels), "sha256": hashlib.sha256(pixels).hexdigest()}
        with open(self.record, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        return dbus.UInt32(self.next_id)

    @dbus.service.method(NAME, in_signature="", out_signature="as")
    def GetCapabilities(self):
        return ["actions", "body"]

    @dbus.service.method(NAME, in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        return ("lanyard-test-notifications", "Lanyard", "1", "1.2")

    @dbus.service.method(NAME, in_signature="u", out_signature="")
    def CloseNotification(self, notification_id):
        self.NotificationClosed(notification_id, dbus.UInt32(3))

    @dbus.service.signal(NAME, signature="us")
    def ActionInvoked(self, notification_id, action_key):
        pass

    @dbus.service.signal(NAME, signature="uu")
    def NotificationClosed(self, notification_id, reason):
        pass

    @dbus.service.method(TEST_INTERFACE, in_signature="us", out_signature="")
    def InvokeAction(self, notification_id, action_key):
        # As a desktop does when a button is chosen: the action, then the notification closes.
        self.ActionInvoked(dbus.UInt32(notification_id), action_key)
        self.NotificationClosed(dbus.UInt32(notification_id), dbus.UInt32(2))

    @dbus.service.method(TEST_INTERFACE, in_signature="uu", out_signature="")
    def Close(self, notification_id, reason):
        self.NotificationClosed(dbus.UInt32(notification_id), dbus.UInt32(reason))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: notification_server.py RECORD.jsonl")
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    server = Server(bus, sys.argv[1])
    name = dbus.service.BusName(NAME, bus, do_not_queue=True)
    print("ready", flush=True)
    try:
        GLib.MainLoop().run()
    finally:
        del name, server


if __name__ == "__main__":
    main()
