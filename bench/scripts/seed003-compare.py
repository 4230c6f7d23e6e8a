#!/usr/bin/env python3
"""Puts x509-pipeline's tables beside seed 003's OpenSSL figures.

    x509-pipeline --sizes 64,1024 > pipeline.md
    bench/scripts/seed003-compare.py pipeline.md ../shared/seeds/003_a06d2bfb7cae01b0.txt

Seed 003 ran on 16 logical cores (i7-12800H); Signet here on 2. The ratio
column is seed time / Signet time at batch 1024: above 1 means Signet is faster.
"""
import re
import sys

SEED_SECTIONS = {"ecdsa-p256": "ECDSA P-256", "ed25519": "Ed25519", "ml-dsa-44": "ML-DSA-44",
                 "ml-dsa-65": "ML-DSA-65", "rsa-2048": "RSA-2048"}


def ms(cell):
    return float(cell.strip().split()[0].replace(",", ""))


def seed_tables(path):
    out, section = {}, None
    for line in open(path):
        m = re.match(r"## Results: (.+)", line)
        if m:
            section = m.group(1).strip()
            out[section] = {}
        elif section and line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            out[section][cells[0].strip("`")] = (ms(cells[1]), ms(cells[3]))
    return out


def pipeline_tables(path):
    out, alg = {}, None
    for line in open(path):
        m = re.match(r"### (\S+)", line)
        if m:
            alg = m.group(1)
            out[alg] = {}
        elif alg and line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            out[alg][cells[0].strip("`")] = (ms(cells[1]), ms(cells[3]))
    return out


def main():
    ours, seed = pipeline_tables(sys.argv[1]), seed_tables(sys.argv[2])
    for alg, rows in ours.items():
        theirs = seed.get(SEED_SECTIONS.get(alg, ""), {})
        print(f"\n#### {alg}\n")
        print("| stage | Signet, 64 | seed, 64 | Signet, 1024 | seed, 1024 | seed/Signet at 1024 |")
        print("|---|---:|---:|---:|---:|---:|")
        for stage, (a64, a1024) in rows.items():
            s = theirs.get(stage)
            if s:
                print(f"| `{stage}` | {a64:.2f} ms | {s[0]:.2f} ms | {a1024:.2f} ms | {s[1]:.2f} ms | {s[1] / a1024:.2f} |")
            else:
                print(f"| `{stage}` | {a64:.2f} ms | – | {a1024:.2f} ms | – | – |")


main()
