#!/usr/bin/env python3
"""A fleet signer outside Lanyard's code, for the tests and the soak.

It exists so that the attacker in tests never uses Lanyard's code: an attacker who kept a removed
machine's age identity derives that machine's signing key and signs fleet documents with what
docs/fleet.md says and the `cryptography` package, nothing else. What it reproduces:

  - the signing key: an Ed25519 key whose 32-byte seed is HKDF-SHA-256 of the X25519 secret
    scalar (the 32 bytes inside age's bech32 `AGE-SECRET-KEY-1…`), with an empty salt and the
    info "lanyard fleet signing key v1" (Sources/Age/Ed25519.swift `init(derivedFrom:label:)`,
    Sources/LanyardFleet/MachineIdentity.swift);
  - a signed document: `{"body": "<JSON text>", "signature": "<base64 Ed25519 signature over the
    body text's bytes>"}` (Sources/LanyardFleet/SignedDocument.swift);
  - a document's digest: hex SHA-256 of the body's bytes, which a membership entry's `prev` names.

  forge.py sign --identity FILE < body.json > envelope.json   # the body is kept byte for byte
  forge.py pubkey --identity FILE                            # the public signing key, base64
  forge.py digest < envelope.json                            # hex SHA-256 of the body's bytes

FILE is an age identity file (age-keygen's format: `#` comments, then `AGE-SECRET-KEY-1…`).
Tests/Fixtures/fleet/selftest.sh checks it against a fleet that `lanyard` made.
"""
import base64
import hashlib
import json
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

LABEL = b"lanyard fleet signing key v1"
CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def bech32_decode(text):
    """(hrp, data bytes) of a bech32 string, checksum checked (BIP 173, without its length limit)."""
    text = text.strip()
    if text.lower() != text and text.upper() != text:
        raise ValueError("mixed case")
    text = text.lower()
    hrp, _, rest = text.rpartition("1")
    values = [CHARSET.index(c) for c in rest]
    gen = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
    chk = 1
    for v in [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp] + values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            chk ^= gen[i] if (top >> i) & 1 else 0
    if chk != 1:
        raise ValueError("bad bech32 checksum")
    acc = bits = 0
    out = bytearray()
    for v in values[:-6]:
        acc, bits = (acc << 5) | v, bits + 5
        while bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
    return hrp, bytes(out)


def signing_key(identity_file):
    with open(identity_file) as f:
        line = next(l for l in f if l.strip().upper().startswith("AGE-SECRET-KEY-1"))
    hrp, scalar = bech32_decode(line)
    if hrp != "age-secret-key-" or len(scalar) != 32:
        raise ValueError(f"{identity_file}: not an X25519 age identity")
    seed = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=LABEL).derive(scalar)
    return Ed25519PrivateKey.from_private_bytes(seed)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd in ("sign", "pubkey") and len(argv) == 4 and argv[2] == "--identity":
        key = signing_key(argv[3])
        if cmd == "pubkey":
            print(base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode())
            return 0
        body = sys.stdin.buffer.read()
        envelope = {"body": body.decode("utf-8"), "signature": base64.b64encode(key.sign(body)).decode()}
        sys.stdout.write(json.dumps(envelope))
        return 0
    if cmd == "digest" and len(argv) == 2:
        print(hashlib.sha256(json.load(sys.stdin)["body"].encode("utf-8")).hexdigest())
        return 0
    print("usage: forge.py sign --identity FILE < body.json | pubkey --identity FILE | digest < envelope.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
