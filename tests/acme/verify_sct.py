#!/usr/bin/env python3
"""Checks a certificate's embedded SCTs independently of Signet's own code.

With Python `cryptography` (the certbot venv has it): every SCT in the
certificate's SCT list extension that names the given log (at least one must)
verifies with the log's public key over the RFC 6962 §3.2 digitally-signed
struct, rebuilt from the certificate (`tbs_precertificate_bytes`: the TBS
without the SCT list) and the issuer's key hash; and the log holds, at the
index of the SCT's `leaf_index` extension (static-ct-api: type 0, u16 length
5, 40-bit big-endian index), a precertificate entry with that timestamp, key
hash and TBS, whose precertificate (extra_data) carries the critical poison
and the certificate's serial and is signed by the issuer.

With --leaf-hash-out FILE, the RFC 6962 leaf hash of that entry (SHA-256 of
0x00 || MerkleTreeLeaf, base64) is written to FILE, for an inclusion proof
asked by hash (`ctclient get-inclusion-proof --leaf_hash`).

usage: verify_sct.py --cert CERT.pem --issuer ISSUER.pem --log-url URL --log-key BASE64_SPKI [--leaf-hash-out FILE]
Exit 0 when everything holds; otherwise 1 with the reason on stderr.
"""

import argparse
import base64
import datetime
import hashlib
import json
import struct
import sys
import time
import urllib.request

from cryptography import x509
from cryptography.x509 import certificate_transparency as ct
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa


def fail(why):
    print(f"verify_sct: {why}", file=sys.stderr)
    sys.exit(1)


def u24(n):
    return n.to_bytes(3, "big")


def millis(ts):
    """An SCT's datetime (naive UTC in cryptography) as milliseconds since the epoch."""
    if ts.tzinfo is not None:
        ts = ts.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return (ts - datetime.datetime(1970, 1, 1)) // datetime.timedelta(milliseconds=1)


def leaf_index(extensions):
    """The leaf_index extension's value in CtExtensions (type u8, length u16, data)."""
    i = 0
    while i < len(extensions):
        if i + 3 > len(extensions):
            fail("truncated SCT extensions")
        ext_type, length = extensions[i], struct.unpack(">H", extensions[i + 1 : i + 3])[0]
        data = extensions[i + 3 : i + 3 + length]
        if len(data) != length:
            fail("truncated SCT extension")
        if ext_type == 0:
            if length != 5:
                fail(f"leaf_index extension of length {length}, not 5")
            return int.from_bytes(data, "big")
        i += 3 + length
    fail("the SCT has no leaf_index extension")


def verify_signature(key, signature, data):
    if isinstance(key, ec.EllipticCurvePublicKey):
        key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    elif isinstance(key, rsa.RSAPublicKey):
        key.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
    else:
        fail(f"unsupported log key type {type(key).__name__}")


def get_entry(log_url, index, deadline):
    url = f"{log_url}ct/v1/get-entries?start={index}&end={index}"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                entries = json.load(r)["entries"]
                if entries:
                    return entries[0]
        except urllib.error.HTTPError as e:
            if time.time() > deadline:
                fail(f"GET {url}: HTTP {e.code}")
        if time.time() > deadline:
            fail(f"GET {url}: no entry")
        time.sleep(0.2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--issuer", required=True)
    p.add_argument("--log-url", required=True)
    p.add_argument("--log-key", required=True)
    p.add_argument("--leaf-hash-out")
    a = p.parse_args()
    log_url = a.log_url if a.log_url.endswith("/") else a.log_url + "/"

    cert = x509.load_pem_x509_certificate(open(a.cert, "rb").read())
    issuer = x509.load_pem_x509_certificate(open(a.issuer, "rb").read())
    spki = base64.b64decode(a.log_key)
    log_key = serialization.load_der_public_key(spki)
    log_id = hashlib.sha256(spki).digest()
    issuer_key_hash = hashlib.sha256(
        issuer.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    ).digest()

    try:
        ext = cert.extensions.get_extension_for_class(x509.PrecertificateSignedCertificateTimestamps)
    except x509.ExtensionNotFound:
        fail("the certificate has no SCT list extension")
    if ext.critical:
        fail("the SCT list extension is critical")
    tbs = cert.tbs_precertificate_bytes
    ours = [s for s in ext.value if s.log_id == log_id]
    if not ours:
        fail(f"no SCT from log {base64.b64encode(log_id).decode()} among {len(ext.value)}")

    for sct in ours:
        if sct.version != ct.Version.v1:
            fail(f"SCT version {sct.version}")
        if sct.entry_type != ct.LogEntryType.PRE_CERTIFICATE:
            fail(f"SCT entry type {sct.entry_type}")
        if not isinstance(sct.signature_hash_algorithm, hashes.SHA256):
            fail(f"SCT hash {sct.signature_hash_algorithm.name}")
        ts = millis(sct.timestamp)
        exts = sct.extension_bytes
        # RFC 6962 §3.2: digitally-signed struct { version, signature_type
        # certificate_timestamp, timestamp, entry_type precert_entry,
        # PreCert { issuer_key_hash, TBSCertificate<1..2^24-1> }, CtExtensions<0..2^16-1> }.
        signed = (
            bytes([0, 0])
            + struct.pack(">Q", ts)
            + struct.pack(">H", 1)
            + issuer_key_hash
            + u24(len(tbs))
            + tbs
            + struct.pack(">H", len(exts))
            + exts
        )
        try:
            verify_signature(log_key, sct.signature, signed)
        except Exception as e:  # InvalidSignature and friends
            fail(f"the SCT's signature does not verify with the log key: {e!r}")

        # The log's entry at leaf_index is this precertificate.
        index = leaf_index(exts)
        entry = get_entry(log_url, index, time.time() + 15)
        leaf = base64.b64decode(entry["leaf_input"])
        # MerkleTreeLeaf { version v1, leaf_type timestamped_entry, TimestampedEntry }.
        expected = (
            bytes([0, 0])
            + struct.pack(">Q", ts)
            + struct.pack(">H", 1)
            + issuer_key_hash
            + u24(len(tbs))
            + tbs
            + struct.pack(">H", len(exts))
            + exts
        )
        if leaf != expected:
            fail(f"the log's entry {index} is not this certificate's precertificate entry")
        extra = base64.b64decode(entry["extra_data"])
        n = int.from_bytes(extra[:3], "big")
        precert = x509.load_der_x509_certificate(extra[3 : 3 + n])
        poison = precert.extensions.get_extension_for_class(x509.PrecertPoison)
        if not poison.critical:
            fail("the logged precertificate's poison is not critical")
        if precert.serial_number != cert.serial_number:
            fail("the logged precertificate has another serial")
        try:
            precert.verify_directly_issued_by(issuer)
        except Exception as e:
            fail(f"the logged precertificate is not signed by the issuer: {e!r}")
        if a.leaf_hash_out:
            with open(a.leaf_hash_out, "w") as f:
                f.write(base64.b64encode(hashlib.sha256(b"\x00" + expected).digest()).decode() + "\n")
        print(f"SCT from log {base64.b64encode(log_id).decode()} at {ts} verifies; precertificate logged at index {index}")


if __name__ == "__main__":
    main()
