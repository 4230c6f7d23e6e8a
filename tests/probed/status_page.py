#!/usr/bin/env python3
"""probed's status page in a real browser: headless Chromium (Debian's
/usr/bin/chromium, or $SIGNET_CHROMIUM) driven by Playwright for Python.

Run by tests/tests/probed.rs against a probed whose checks are in known
states (real nginx, a closed port, a wrong body, a slow endpoint...). The
page is loaded twice: with JavaScript on (as an operator's browser) and off
(the page must not need it). Each time:
- every request the browser makes goes to probed's own origin (the page
  works offline: no CDN, no font, no script from elsewhere);
- the summary line counts the checks by state as expected;
- every expected check has a row whose visible state is the expected one,
  with a latency sparkline (an inline SVG) and uptime cells;
- no row is there that was not expected;
- the page asks to be refreshed (<meta http-equiv=refresh>).
A full-page screenshot is kept as a test artifact in ARTIFACT_DIR
(status-page.png) and checked to be a real PNG of a plausible size.

Usage: status_page.py URL EXPECTED_JSON ARTIFACT_DIR
  EXPECTED_JSON: {"check name": "up" | "down" | "unknown", ...}
Exit status 0 when every check passed.
"""
import json
import os
import struct
import sys
from pathlib import Path
from urllib.parse import urlparse

URL, EXPECTED, ARTIFACTS = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
CHROMIUM = os.environ.get("SIGNET_CHROMIUM", "/usr/bin/chromium")

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    print("FAIL  Playwright for Python is missing (scripts/lib.sh ensure_oauth_tools installs it; "
          "SIGNET_OAUTH_PYTHON names that interpreter)")
    sys.exit(1)
if not os.access(CHROMIUM, os.X_OK):
    print(f"FAIL  no Chromium at {CHROMIUM} (Debian's chromium: ensure_packages in scripts/lib.sh)")
    sys.exit(1)

origin = urlparse(URL)
failures = 0


def check(name, ok, detail=""):
    global failures
    print(f"{'PASS' if ok else 'FAIL'}  {name}{'' if ok else ': ' + detail}")
    if not ok:
        failures += 1


def assert_png(path):
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return f"{path}: not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    if not (4000 <= len(data) <= 10_000_000 and 600 <= width <= 4000 and 300 <= height <= 8000):
        return f"{path}: {len(data)} bytes, {width}x{height}"
    return None


with sync_playwright() as pw:
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
    for js in (True, False):
        label = f"JavaScript {'on' if js else 'off'}"
        context = browser.new_context(java_script_enabled=js, viewport={"width": 1200, "height": 800})
        page = context.new_page()
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        resp = page.goto(URL, wait_until="load")
        check(f"{label}: the page loads (200, text/html)",
              resp is not None and resp.status == 200 and resp.headers.get("content-type", "").startswith("text/html"),
              f"{resp and resp.status} {resp and resp.headers}")

        foreign = [u for u in requests if urlparse(u).netloc != origin.netloc]
        check(f"{label}: every request goes to probed itself ({len(requests)} made)", not foreign, str(foreign))

        rows = [
            {"id": r.get_attribute("id"), "state": r.get_attribute("data-state"),
             "shown": r.query_selector(".state").inner_text().strip() if r.query_selector(".state") else None,
             "spark": r.query_selector("svg") is not None, "cells": len(r.query_selector_all("td.num"))}
            for r in page.query_selector_all("tr[id^=check-]")
        ]
        seen = {r["id"][len("check-"):]: r for r in rows}
        for name, state in sorted(EXPECTED.items()):
            row = seen.get(name)
            check(f"{label}: {name} is shown {state}",
                  row is not None and row["state"] == state and row["shown"] == state,
                  json.dumps(row))
            if row is not None and row["state"] != "unknown":
                check(f"{label}: {name} has a latency sparkline and three uptime cells",
                      row["spark"] and row["cells"] == 3, json.dumps(row))
        extra = sorted(set(seen) - set(EXPECTED))
        check(f"{label}: no row beyond the {len(EXPECTED)} checks", not extra, str(extra))

        counts = {s: sum(1 for v in EXPECTED.values() if v == s) for s in ("up", "down", "unknown")}
        summary = page.inner_text("#summary")
        want = f"{len(EXPECTED)} checks: {counts['up']} up, {counts['down']} down, {counts['unknown']} unknown"
        check(f"{label}: the summary reads {want!r}", summary.strip() == want, summary)

        refresh = page.query_selector("meta[http-equiv=refresh]")
        check(f"{label}: the page refreshes itself", refresh is not None and
              int((refresh.get_attribute("content") or "0").split(";")[0]) > 0)

        if js:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shot = ARTIFACTS / "status-page.png"
            page.screenshot(path=str(shot), full_page=True)
            bad = assert_png(shot)
            check(f"screenshot kept as {shot}", bad is None, bad or "")
        context.close()
    browser.close()

print(f"{'PASS' if failures == 0 else 'FAIL'}  status page: {failures} failed")
sys.exit(1 if failures else 0)
