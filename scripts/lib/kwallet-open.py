#!/usr/bin/python3
# Opens (and so creates, the first time) a KWallet wallet without a dialog and unlocks its Secret
# Service collection: for scripts/with-kwallet.sh and the tests it runs (TestKeyring.unlockLogin).
#   python3 scripts/lib/kwallet-open.py WALLET COLLECTION-PATH   (the wallet password on stdin)
#   python3 scripts/lib/kwallet-open.py --create WALLET           (only pamOpen, for a first start)
# kwalletd5 has no headless way to open a wallet with its password: open/openAsync ask with a
# dialog. pamOpen(wallet, hash, timeout) is the way pam_kwallet5 opens it at login, with the key
# already derived exactly as kwalletd derives it from a typed password (KWallet::Backend::
# setPassword in kwalletbackend.cc, KF5 5.103): PBKDF2-HMAC-SHA512 over the password with the 56
# salt bytes of WALLET.salt beside the wallet file, 50000 rounds, 56 bytes. A wallet that does not
# exist yet is created (Blowfish) with that key.
# pamOpen opens the wallet in kwalletd only: its Secret Service collection stays locked until a
# Secret Service Unlock prompt is run, which then finds the wallet open and completes without a
# dialog ("Prompt on Open" is off in kwalletrc).
import hashlib
import os
import sys
import time

import dbus

create = sys.argv[1:2] == ["--create"]
args = sys.argv[2:] if create else sys.argv[1:]
if len(args) != (1 if create else 2):
    sys.exit("usage: kwallet-open.py WALLET COLLECTION-PATH | --create WALLET (password on stdin)")
wallet = args[0]
password = sys.stdin.buffer.read()
data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.environ["HOME"], ".local/share")
salt_path = os.path.join(data, "kwalletd", wallet + ".salt")
try:
    with open(salt_path, "rb") as f:
        salt = f.read()
except OSError as e:
    sys.exit(f"kwallet-open: cannot read the wallet's salt {salt_path}: {e.strerror}")
if len(salt) != 56:
    sys.exit(f"kwallet-open: {salt_path} holds {len(salt)} bytes, not 56")
key = hashlib.pbkdf2_hmac("sha512", password, salt, 50000, 56)

bus = dbus.SessionBus()
kwallet = dbus.Interface(bus.get_object("org.kde.kwalletd5", "/modules/kwalletd5"), "org.kde.KWallet")
# pamOpen is declared NoReply and says nothing about failure: ask isOpen afterwards (the daemon
# handles one connection's calls in order).
kwallet.pamOpen(wallet, dbus.ByteArray(key), dbus.Int32(0), signature="sayi")
if not kwallet.isOpen(wallet, signature="s"):
    sys.exit(f"kwallet-open: kwalletd5 did not open the wallet {wallet!r} with pamOpen "
             "(wrong password for an existing wallet, or an unreadable wallet file)")
if create:
    sys.exit(0)

collection = args[1]
service = bus.get_object("org.freedesktop.secrets", "/org/freedesktop/secrets")


def locked():
    obj = bus.get_object("org.freedesktop.secrets", collection)
    return bool(obj.Get("org.freedesktop.Secret.Collection", "Locked",
                        dbus_interface="org.freedesktop.DBus.Properties"))


_, prompt = service.Unlock([dbus.ObjectPath(collection)], dbus_interface="org.freedesktop.Secret.Service")
if prompt != "/":
    bus.get_object("org.freedesktop.secrets", prompt).Prompt("", dbus_interface="org.freedesktop.Secret.Prompt")
# The prompt completes asynchronously (its Completed signal goes to this connection only): wait,
# bounded, for the collection to say it is unlocked.
deadline = time.monotonic() + 10
while locked():
    if time.monotonic() > deadline:
        sys.exit(f"kwallet-open: {collection} stays locked 10 s after its Unlock prompt, though the wallet is open")
    time.sleep(0.02)
