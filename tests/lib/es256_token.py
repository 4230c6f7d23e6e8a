"""Verifies an ES256 access token against a JWK set, with Python cryptography.

    python3 es256_token.py TOKEN_RESPONSE.json JWKS.json

TOKEN_RESPONSE.json is a token endpoint's answer (its `access_token`); the key is the
set's key named by the token's `kid`. Prints the header and audience; exits non-zero
(an exception) if the signature does not verify.
"""
import base64
import json
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


h, p, s = json.load(open(sys.argv[1]))["access_token"].split(".")
head = json.loads(b64(h))
key = next(k for k in json.load(open(sys.argv[2]))["keys"] if k["kid"] == head["kid"])
x, y = (int.from_bytes(b64(key[c]), "big") for c in ("x", "y"))
pub = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
sig = b64(s)
r, s_ = int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")
pub.verify(encode_dss_signature(r, s_), f"{h}.{p}".encode(), ec.ECDSA(hashes.SHA256()))
print("token", head, json.loads(b64(p))["aud"])
