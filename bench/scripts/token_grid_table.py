#!/usr/bin/env python3
"""The tables of `token-bench.sh --grid`, in seed 002's shape (rows: the token
algorithm; columns: the client authentication method; ms, mean), from
criterion's estimates of the `tokend_grid` bench written during this run and
the token-load (c = 1) lines of results.jsonl: tokend and Hydra's same-run
figures.

  token_grid_table.py RESULTS.jsonl CRITERION_DIR/tokend_grid
"""
import json
import os
import sys

ALGS = ["ES256", "ES384", "ES512", "EdDSA", "ML-DSA-44", "ML-DSA-65", "ML-DSA-87"]
METHODS = ["client_secret_basic", "client_secret_post", "client_secret_jwt", "private_key_jwt",
           "tls_client_auth", "self_signed_tls_client_auth"]

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
start = next(r["grid"]["epoch"] for r in rows if r.get("grid", {}).get("phase") == "start")

# Criterion: each benchmark's directory holds new/benchmark.json (its full id) and new/estimates.json.
means = {}
for dirpath, _, files in os.walk(sys.argv[2]):
    if os.path.basename(dirpath) != "new" or "estimates.json" not in files:
        continue
    est = os.path.join(dirpath, "estimates.json")
    if os.path.getmtime(est) < start:
        continue  # an earlier run's
    full_id = json.load(open(os.path.join(dirpath, "benchmark.json")))["full_id"]
    means[full_id.removeprefix("tokend_grid/")] = json.load(open(est))["mean"]["point_estimate"] / 1e6  # ns -> ms


def cell(key, scale=1.0, digits=3):
    v = means.get(key)
    return "—" if v is None else f"{v * scale:.{digits}f}"


print("client_credentials over HTTPS (tokend's [tls] listener), ms, mean:\n")
print("| algorithm | " + " | ".join(METHODS) + " | client_secret_basic, plain HTTP |")
print("|---" * (len(METHODS) + 2) + "|")
for alg in ALGS:
    cols = [cell(f"client_credentials/{m}/{alg}") for m in METHODS]
    cols.append(cell(f"client_credentials_http/client_secret_basic/{alg}"))
    print(f"| {alg} | " + " | ".join(cols) + " |")

print("\nauthorization code + PKCE (authorize with a session, then token; ms) and introspection (µs), mean:\n")
print("| algorithm | authorization code | with a sign-in each time | introspection (µs) |")
print("|---|---|---|---|")
for alg in ALGS:
    print(f"| {alg} | {cell(f'authorization_code/{alg}')} | {cell(f'authorization_code_sign_in/{alg}', digits=2)} "
          f"| {cell(f'introspect/{alg}', 1000, 0)} |")

print("\ntoken-load, c = 1 (one request at a time on one keep-alive connection, plain HTTP), ES256, ms:\n")
print("| server | method | mean | p50 | p99 | requests |")
print("|---|---|---|---|---|---|")
for r in (r["token_load"] for r in rows if "token_load" in r):
    server = r["label"].split(" ")[0]
    print(f"| {server} | {r['auth']} | {r['mean_ms']:.3f} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {r['ok']} |")
loads = [r["grid"]["loadavg"] for r in rows if "grid" in r]
print(f"\nload average (1, 5, 15 min) at the start, after criterion, at the end: {'; '.join(loads)}")
