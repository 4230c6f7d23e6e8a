#!/usr/bin/env python3
"""tokend's sign-in and consent pages in a real browser: headless Chromium
(Debian's /usr/bin/chromium) driven by Playwright for Python.

The client is built here (public client, PKCE S256, state, nonce); the
browser types the user name and password into the real form, clicks Sign in,
sees the consent page and clicks Allow. The redirect to the client
(http://127.0.0.1:9/callback, where nothing listens) is seen as the request
the browser makes (page.route does not see requests that follow a redirect),
its code redeemed with requests, and the ID token
verified by PyJWT through the JWKS URL (sub, nonce). The happy path runs
with JavaScript disabled: the pages must work without it. A wrong password
shows the error and stays on the sign-in page. Screenshots of the sign-in
and consent pages are saved under $SIGNET_ARTIFACT_DIR/oauth/ (default
~/.cache/signet/artifacts/oauth/).

Usage: browser_login.py ISSUER SIGNETCTL WORKDIR
"""
import base64
import hashlib
import os
import secrets
import struct
import sys
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

import jwt as pyjwt
import requests
from playwright.sync_api import sync_playwright

from oauthcheck import check, finish, signetctl  # noqa: E402 - beside this file

ISSUER, SIGNETCTL, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
CHROMIUM = os.environ.get("SIGNET_CHROMIUM", "/usr/bin/chromium")
REDIRECT = "http://127.0.0.1:9/callback"
ARTIFACTS = Path(os.environ.get("SIGNET_ARTIFACT_DIR") or Path.home() / ".cache/signet/artifacts") / "oauth"






def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


if not os.access(CHROMIUM, os.X_OK):
    print(f"FAIL  no Chromium at {CHROMIUM} (Debian's chromium: ensure_packages in scripts/lib.sh)")
    sys.exit(1)

META = requests.get(f"{ISSUER}/.well-known/openid-configuration", timeout=10).json()
PASSWORD = "alice-" + uuid.uuid4().hex
USER = f"alice-{uuid.uuid4().hex[:6]}"
signetctl("oauth", "user", "create", USER, "--name", "Alice Example", "--email", "alice@example.net",
          "--password-stdin", stdin=PASSWORD + "\n")
CID = f"chromium-{uuid.uuid4().hex[:8]}"
signetctl("oauth", "client", "create", CID, "--name", "Chromium Test App", "--auth-method", "none",
          "--grant-type", "authorization_code", "--redirect-uri", REDIRECT, "--scope", "openid", "--scope",
          "profile", "--scope", "email", "--audience", "https://api.signet.test")


def authorization_request():
    """A fresh authorization URL with its PKCE verifier, state and nonce."""
    verifier = b64url(secrets.token_bytes(32))
    state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    q = {"response_type": "code", "client_id": CID, "redirect_uri": REDIRECT, "scope": "openid profile email",
         "state": state, "nonce": nonce, "code_challenge": b64url(hashlib.sha256(verifier.encode()).digest()),
         "code_challenge_method": "S256"}
    return META["authorization_endpoint"] + "?" + urlencode(q), verifier, state, nonce


def watch_callback(page):
    """The URLs of requests the browser makes to the client's redirect URI (a list, filled as they come).

    Playwright's page.route is never called for a request that follows a
    redirect (tokend's 302 to the client), so the redirect is seen as the
    request the browser makes. Port 9 is on Chromium's list of unsafe ports:
    the browser is launched with --explicitly-allowed-ports=9 so that it does
    try it (and gets a refused connection, nothing listens there)."""
    seen = []
    page.on("request", lambda r: seen.append(r.url) if r.url.startswith(REDIRECT) else None)
    return seen


def assert_png(path, min_bytes=4000):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    assert min_bytes <= len(data) <= 5_000_000, f"{path}: {len(data)} bytes"
    assert 300 <= width <= 4000 and 200 <= height <= 4000, f"{path}: {width}x{height}"
    return len(data), width, height


def redeem(code, verifier, nonce):
    r = requests.post(META["token_endpoint"], data={"grant_type": "authorization_code", "code": code,
                                                      "redirect_uri": REDIRECT, "client_id": CID,
                                                      "code_verifier": verifier}, timeout=10)
    assert r.status_code == 200, r.text
    tok = r.json()
    key = pyjwt.PyJWKClient(META["jwks_uri"]).get_signing_key_from_jwt(tok["id_token"])
    alg = pyjwt.get_unverified_header(tok["id_token"])["alg"]
    claims = pyjwt.decode(tok["id_token"], key.key, algorithms=[alg], audience=CID, issuer=ISSUER)
    assert claims["sub"] == USER and claims["nonce"] == nonce, claims
    return tok, claims


with sync_playwright() as pw:
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--explicitly-allowed-ports=9"],
                                 headless=True)

    @check("Chromium, JavaScript off: type the password, Sign in, consent page, Allow; the code redeemed, ID token sub and nonce")
    def _():
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        context = browser.new_context(java_script_enabled=False, viewport={"width": 800, "height": 700})
        try:
            page = context.new_page()
            seen = watch_callback(page)
            url, verifier, state, nonce = authorization_request()
            resp = page.goto(url)
            assert resp.status == 200, resp.status
            assert page.title() == "Sign in" and "Chromium Test App" in page.inner_text("main"), page.content()[:400]
            assert "<script" not in page.content().lower(), "the sign-in page has no script"
            page.screenshot(path=str(ARTIFACTS / "signin.png"), full_page=True)
            page.fill("#username", USER)
            page.fill("#password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_load_state()
            assert page.title() == "Allow access?", (page.title(), page.content()[:400])
            text = page.inner_text("main")
            assert "Chromium Test App" in text and "email" in text, text
            page.screenshot(path=str(ARTIFACTS / "consent.png"), full_page=True)
            with page.expect_request(lambda r: r.url.startswith(REDIRECT)) as redirected:
                page.click("button[value=allow]")
            assert redirected.value.redirected_from.method == "POST", "the consent form's answer redirects"
            assert seen == [redirected.value.url], seen
            q = parse_qs(urlparse(seen[0]).query)
            assert q["state"] == [state] and q["iss"] == [ISSUER] and q["code"][0], q
            tok, _ = redeem(q["code"][0], verifier, nonce)
            assert tok["token_type"] == "Bearer", tok
            cookies = {c["name"]: c for c in context.cookies(ISSUER)}
            assert cookies["tokend_session"]["httpOnly"] and cookies["tokend_session"]["sameSite"] == "Lax", cookies
        finally:
            context.close()
        for name in ["signin.png", "consent.png"]:
            size, w, h = assert_png(ARTIFACTS / name)
            print(f"      {ARTIFACTS / name}: {size} bytes, {w}x{h}")

    @check("Chromium, JavaScript on: a wrong password shows the error and stays on the sign-in page (no console errors); the right one goes on (consent remembered)")
    def _():
        context = browser.new_context()
        try:
            page = context.new_page()
            seen = watch_callback(page)
            # With JavaScript on, nothing on the pages trips the CSP or logs an error (but the 401 itself,
            # which Chromium logs as a failed load).
            complaints = []
            page.on("console", lambda m: complaints.append(m.text)
                    if m.type in ("error", "warning") and "status of 401" not in m.text else None)
            page.on("pageerror", lambda e: complaints.append(str(e)))
            url, verifier, state, nonce = authorization_request()
            page.goto(url)
            page.fill("#username", USER)
            page.fill("#password", "not-the-password")
            with page.expect_response(lambda r: r.request.method == "POST") as posted:
                page.click("button[type=submit]")
            assert posted.value.status == 401, posted.value.status
            assert page.title() == "Sign in", page.title()
            alert = page.locator("p.error[role=alert]")
            assert alert.is_visible() and "wrong" in alert.inner_text(), page.content()[:400]
            assert page.input_value("#username") == USER and page.input_value("#password") == ""
            assert page.locator("#password").is_visible() and not seen
            assert not complaints, complaints
            # Consent was given to this client in the check above: signed in, straight back to the client.
            page.fill("#password", PASSWORD)
            with page.expect_request(lambda r: r.url.startswith(REDIRECT)):
                page.click("button[type=submit]")
            assert len(seen) == 1, seen
            q = parse_qs(urlparse(seen[0]).query)
            assert q["state"] == [state], q
            redeem(q["code"][0], verifier, nonce)
        finally:
            context.close()

    browser.close()

finish()
