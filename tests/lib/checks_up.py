"""Whether probed's /api/checks answer has every named check, and every check up.

    python3 checks_up.py CHECKS.json NAME...

Prints each check's state, and the whole record of each one not up; exits 1 unless
every NAME is there and every check is up.
"""
import json
import sys

d = json.load(open(sys.argv[1]))
checks = d["checks"] if isinstance(d, dict) and "checks" in d else d
states = {c["name"]: c["state"] for c in checks}
print(states)
for c in checks:
    if c["state"] != "up":
        print(json.dumps(c)[:600])
sys.exit(0 if set(sys.argv[2:]) <= set(states) and all(s == "up" for s in states.values()) else 1)
