"""What tokend's Python interop suites share: named checks that print PASS or
FAIL (with the traceback) and keep going, and signetctl with --json.

Each suite is run as `SUITE.py ISSUER SIGNETCTL WORKDIR ...` and ends with
`finish()`, which exits 1 if any check failed.
"""
import json
import subprocess
import sys
import time
import traceback

SIGNETCTL = sys.argv[2] if len(sys.argv) > 2 else "signetctl"
_failed = []


def check(name):
    """Runs the decorated function now, as the check `name`."""
    def run(f):
        t0 = time.time()
        try:
            f()
            print(f"PASS  {name} ({time.time() - t0:.1f} s)")
        except Exception:  # noqa: BLE001 - every failure is reported the same way
            _failed.append(name)
            print(f"FAIL  {name}")
            print("      " + traceback.format_exc().replace("\n", "\n      "))
        return f

    return run


def signetctl(*args, stdin=None):
    """`signetctl --json ARGS...` (the caller's environment names the stack): its JSON output."""
    out = subprocess.run([SIGNETCTL, "--json", *args], capture_output=True, text=True, input=stdin)
    assert out.returncode == 0, f"signetctl {' '.join(args)}: {out.stdout}{out.stderr}"
    return json.loads(out.stdout) if out.stdout.strip() else None


def finish():
    """Exits 1 if any check failed, else 0."""
    sys.exit(1 if _failed else 0)
