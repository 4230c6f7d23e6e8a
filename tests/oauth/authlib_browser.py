#!/usr/bin/env python3
"""tokend's browser flows against authlib, with `requests` as the browser.

authlib builds the authorization request (PKCE S256, state, nonce) and
redeems the code; the "browser" (a requests.Session keeping cookies) fills
in tokend's real sign-in and consent forms as a person would, hidden CSRF
fields included. Then: the ID token verified by jwcrypto and PyJWT through
the JWKS URL, userinfo, consent remembered, refresh-token rotation and
reuse detection, PKCE and redirect URI errors, prompt=none, CSRF refused,
RP-initiated logout.

Usage: authlib_browser.py ISSUER SIGNETCTL WORKDIR
"""
import json
import sys
import time
import uuid
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlencode, urljoin, urlparse

import jwt as pyjwt
import requests
from authlib.common.security import generate_token
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from authlib.integrations.requests_client import OAuth2Session
from jwcrypto import jwk as jc_jwk
from jwcrypto import jwt as jc_jwt

from oauthcheck import check, finish, signetctl  # noqa: E402 - beside this file

ISSUER, SIGNETCTL, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
API = "https://api.signet.test"
REDIRECT = "http://127.0.0.1:9/callback"
LOGGED_OUT = "http://127.0.0.1:9/signed-out"
SCOPE = "openid profile email groups read"






class Forms(HTMLParser):
    """The forms of a page: action, method and every named input and button."""

    def __init__(self):
        super().__init__()
        self.forms = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "method": a.get("method", "get"), "fields": {},
                               "buttons": []})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["fields"][a["name"]] = a.get("value", "")
        elif tag == "button" and self.forms and a.get("name"):
            self.forms[-1]["buttons"].append((a["name"], a.get("value", "")))


def forms_of(resp):
    p = Forms()
    p.feed(resp.text)
    return p.forms


def submit(browser, page, **values):
    """Submits the page's only form with `values` over its fields."""
    (form,) = forms_of(page)
    fields = dict(form["fields"])
    fields.update(values)
    return browser.post(urljoin(page.url, form["action"]), data=fields, allow_redirects=False, timeout=30)


META = requests.get(f"{ISSUER}/.well-known/openid-configuration", timeout=10).json()
JWKS_URL = META["jwks_uri"]
PASSWORD = "alice-" + uuid.uuid4().hex
USER = f"alice-{uuid.uuid4().hex[:6]}"
signetctl("oauth", "user", "create", USER, "--name", "Alice Example", "--email", "alice@example.net",
          "--group", "admins", "--password-stdin", stdin=PASSWORD + "\n")


DEVICE = "urn:ietf:params:oauth:grant-type:device_code"


def web_client(method="none", *extra):
    cid = f"web-{method}-{uuid.uuid4().hex[:8]}"
    c = signetctl("oauth", "client", "create", cid, "--auth-method", method,
                  "--grant-type", "authorization_code", "--grant-type", "refresh_token", "--grant-type", DEVICE,
                  "--scope", "openid", "--scope", "profile", "--scope", "email", "--scope", "groups",
                  "--scope", "read", "--scope", "offline_access", "--audience", API,
                  "--redirect-uri", REDIRECT, "--post-logout-redirect-uri", LOGGED_OUT, *extra)
    return cid, c.get("secret", "")


def session_for(cid, secret=""):
    if secret:
        return OAuth2Session(cid, secret, scope=SCOPE, redirect_uri=REDIRECT,
                             code_challenge_method="S256", token_endpoint_auth_method="client_secret_basic")
    return OAuth2Session(cid, scope=SCOPE, redirect_uri=REDIRECT, code_challenge_method="S256",
                         token_endpoint_auth_method="none")


def start(client, browser, **extra):
    verifier, nonce = generate_token(64), generate_token(20)
    url, state = client.create_authorization_url(META["authorization_endpoint"], code_verifier=verifier,
                                                 nonce=nonce, **extra)
    return verifier, nonce, state, browser.get(url, allow_redirects=False, timeout=30)


def sign_in(browser, page, password=PASSWORD):
    assert page.status_code in (200, 401) and "Sign in" in page.text, (page.status_code, page.text[:300])
    return submit(browser, page, username=USER, password=password)


def back_at_client(resp, state):
    assert resp.status_code in (302, 303), (resp.status_code, resp.text[:300])
    loc = resp.headers["Location"]
    assert loc.startswith(REDIRECT), loc
    q = parse_qs(urlparse(loc).query)
    assert q["state"] == [state] and q["iss"] == [ISSUER], q
    return loc, q


def verify_id_token(token, cid, nonce):
    header = pyjwt.get_unverified_header(token)
    keys = jc_jwk.JWKSet.from_json(requests.get(JWKS_URL, timeout=10).text)
    jc = jc_jwt.JWT(jwt=token, key=keys, expected_type="JWS", algs=[header["alg"]])
    claims = json.loads(jc.claims)
    key = pyjwt.PyJWKClient(JWKS_URL).get_signing_key_from_jwt(token)
    py = pyjwt.decode(token, key.key, algorithms=[header["alg"]], audience=cid, issuer=ISSUER)
    assert py == claims, (py, claims)
    assert claims["sub"] == USER and claims["nonce"] == nonce and claims["azp"] == cid, claims
    assert claims["name"] == "Alice Example" and claims["email"] == "alice@example.net", claims
    assert claims["groups"] == ["admins"] and "sid" in claims and claims["auth_time"] <= time.time(), claims
    return claims


STATE = {}


@check("discovery: OIDC and RFC 8414 metadata name the browser endpoints, S256 only")
def _():
    assert META["issuer"] == ISSUER
    assert META["code_challenge_methods_supported"] == ["S256"], META
    assert META["response_types_supported"] == ["code"], META
    for k in ["authorization_endpoint", "userinfo_endpoint", "end_session_endpoint", "jwks_uri"]:
        assert META[k].startswith(ISSUER), (k, META)
    rfc8414 = requests.get(f"{ISSUER}/.well-known/oauth-authorization-server", timeout=10).json()
    assert rfc8414["authorization_endpoint"] == META["authorization_endpoint"]
    assert "authorization_code" in rfc8414["grant_types_supported"]


@check("authlib code flow, public client + PKCE S256, through the sign-in and consent pages")
def _():
    cid, _ = web_client()
    client, browser = session_for(cid), requests.Session()
    verifier, nonce, state, page = start(client, browser)
    assert page.headers["X-Frame-Options"] == "DENY" and "no-store" in page.headers["Cache-Control"]
    wrong = sign_in(browser, page, password="not-the-password")
    assert wrong.status_code == 401 and "wrong" in wrong.text, wrong.text[:300]
    consent = sign_in(browser, wrong)
    assert consent.status_code == 200 and "Allow access?" in consent.text, consent.text[:300]
    assert "see your email address" in consent.text
    (form,) = forms_of(consent)
    assert ("decision", "allow") in form["buttons"]
    loc, _ = back_at_client(submit(browser, consent, decision="allow"), state)
    tok = client.fetch_token(META["token_endpoint"], authorization_response=loc, code_verifier=verifier)
    assert tok["token_type"] == "Bearer" and tok["refresh_token"] and tok["id_token"], tok
    assert set(tok["scope"].split()) == set(SCOPE.split()), tok
    id_claims = verify_id_token(tok["id_token"], cid, nonce)
    key = pyjwt.PyJWKClient(JWKS_URL).get_signing_key_from_jwt(tok["access_token"])
    at = pyjwt.decode(tok["access_token"], key.key, algorithms=[pyjwt.get_unverified_header(tok["access_token"])["alg"]],
                      audience=API, issuer=ISSUER)
    assert pyjwt.get_unverified_header(tok["access_token"])["typ"] == "at+jwt"
    assert at["sub"] == USER and at["client_id"] == cid and at["auth_time"] == id_claims["auth_time"], at
    info = client.get(META["userinfo_endpoint"], timeout=10)
    assert info.status_code == 200, info.text
    assert info.json() == {"sub": USER, "preferred_username": USER, "name": "Alice Example",
                           "email": "alice@example.net", "email_verified": False, "groups": ["admins"]}, info.text
    STATE.update(cid=cid, browser=browser, tok=tok, client=client)


@check("signed in and consented: the next authorization returns at once; prompt=consent asks again")
def _():
    cid, browser = STATE["cid"], STATE["browser"]
    client = session_for(cid)
    verifier, nonce, state, resp = start(client, browser)
    loc, _ = back_at_client(resp, state)
    tok = client.fetch_token(META["token_endpoint"], authorization_response=loc, code_verifier=verifier)
    verify_id_token(tok["id_token"], cid, nonce)
    _, _, _, again = start(session_for(cid), browser, prompt="consent")
    assert again.status_code == 200 and "Allow access?" in again.text


@check("the code is single-use: a second redemption is refused and revokes the tokens of the first")
def _():
    cid, browser = STATE["cid"], STATE["browser"]
    client = session_for(cid)
    verifier, _, state, resp = start(client, browser)
    loc, q = back_at_client(resp, state)
    tok = client.fetch_token(META["token_endpoint"], authorization_response=loc, code_verifier=verifier)
    form = {"grant_type": "authorization_code", "code": q["code"][0], "redirect_uri": REDIRECT,
            "client_id": cid, "code_verifier": verifier}
    r = requests.post(META["token_endpoint"], data=form, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    intro = requests.post(META["introspection_endpoint"], data={"token": tok["access_token"], "client_id": cid},
                          timeout=10)
    assert intro.json() == {"active": False}, intro.text
    intro = requests.post(META["introspection_endpoint"], data={"token": tok["refresh_token"], "client_id": cid},
                          timeout=10)
    assert intro.json() == {"active": False}, intro.text


@check("PKCE: a wrong verifier, a missing one, plain, and a public client without PKCE are refused")
def _():
    cid, browser = STATE["cid"], STATE["browser"]
    client = session_for(cid)
    _, _, state, resp = start(client, browser)
    _, q = back_at_client(resp, state)
    form = {"grant_type": "authorization_code", "code": q["code"][0], "redirect_uri": REDIRECT, "client_id": cid,
            "code_verifier": generate_token(64)}
    r = requests.post(META["token_endpoint"], data=form, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant" and "code_verifier" in r.text, r.text
    del form["code_verifier"]
    r = requests.post(META["token_endpoint"], data=form, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    base = {"response_type": "code", "client_id": cid, "redirect_uri": REDIRECT, "scope": "openid", "state": "s1"}
    for extra, why in [({"code_challenge": "a" * 43, "code_challenge_method": "plain"}, "plain"),
                       ({}, "PKCE")]:
        r = browser.get(META["authorization_endpoint"] + "?" + urlencode({**base, **extra}), allow_redirects=False,
                        timeout=10)
        q = parse_qs(urlparse(r.headers["Location"]).query)
        assert q["error"] == ["invalid_request"] and why in q["error_description"][0] and q["state"] == ["s1"], q


@check("a redirect URI not registered, or an unknown client, is an error page, never a redirect")
def _():
    cid = STATE["cid"]
    for params in [{"client_id": cid, "redirect_uri": "https://evil.example/cb"},
                   {"client_id": "no-such-client", "redirect_uri": REDIRECT}]:
        q = {"response_type": "code", "scope": "openid", "code_challenge": "a" * 43,
             "code_challenge_method": "S256", **params}
        r = requests.get(META["authorization_endpoint"] + "?" + urlencode(q), allow_redirects=False, timeout=10)
        assert r.status_code == 400 and "Location" not in r.headers and "text/html" in r.headers["Content-Type"], r


@check("prompt=none without a session is login_required; a form without its CSRF token is refused")
def _():
    cid = STATE["cid"]
    client, fresh = session_for(cid), requests.Session()
    _, _, state, resp = start(client, fresh, prompt="none")
    _, q = back_at_client(resp, state)
    assert q["error"] == ["login_required"], q
    _, _, _, page = start(client, fresh)
    forged = submit(fresh, page, username=USER, password=PASSWORD, csrf="forged")
    assert forged.status_code == 403, forged.status_code
    other = requests.Session()  # the form, but not the cookie it is bound to
    (form,) = forms_of(page)
    r = other.post(urljoin(page.url, form["action"]), data={**form["fields"], "username": USER,
                                                             "password": PASSWORD}, allow_redirects=False)
    assert r.status_code == 403, r.status_code


@check("refresh: rotation, a new token each time; reuse after the grace window revokes the family")
def _():
    client, tok = STATE["client"], STATE["tok"]
    first = tok["refresh_token"]
    t2 = client.refresh_token(META["token_endpoint"], refresh_token=first)
    assert t2["refresh_token"] != first and t2["access_token"] != tok["access_token"], t2
    # Within the grace window the old one still works (a client that lost the answer).
    t3 = client.refresh_token(META["token_endpoint"], refresh_token=first)
    assert t3["refresh_token"] not in (first, t2["refresh_token"])
    time.sleep(float(sys.argv[4]) + 1 if len(sys.argv) > 4 else 11)
    r = requests.post(META["token_endpoint"], data={"grant_type": "refresh_token", "refresh_token": first,
                                                      "client_id": STATE["cid"]}, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant" and "family" in r.text, r.text
    r = requests.post(META["token_endpoint"], data={"grant_type": "refresh_token",
                                                      "refresh_token": t3["refresh_token"],
                                                      "client_id": STATE["cid"]}, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    intro = requests.post(META["introspection_endpoint"], data={"token": t3["access_token"],
                                                                 "client_id": STATE["cid"]}, timeout=10)
    assert intro.json() == {"active": False}, intro.text


@check("confidential client: code flow with client_secret_basic; revoking the refresh token ends its grant")
def _():
    cid, secret = web_client("client_secret_basic")
    client, browser = session_for(cid, secret), requests.Session()
    verifier, nonce, state, page = start(client, browser, scope="openid read")
    consent = sign_in(browser, page)
    loc, _ = back_at_client(submit(browser, consent, decision="allow"), state)
    tok = client.fetch_token(META["token_endpoint"], authorization_response=loc, code_verifier=verifier)
    assert tok["scope"] == "openid read", tok
    r = client.revoke_token(META["revocation_endpoint"], token=tok["refresh_token"], token_type_hint="refresh_token")
    assert r.status_code == 200, r.text
    r = requests.post(META["token_endpoint"], data={"grant_type": "refresh_token", "refresh_token": tok["refresh_token"]},
                      auth=(cid, secret), timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    info = client.get(META["userinfo_endpoint"], timeout=10)
    assert info.status_code == 401 and "invalid_token" in info.headers["WWW-Authenticate"], info.text


@check("denying consent sends access_denied back")
def _():
    cid, _ = web_client()
    client, browser = session_for(cid), requests.Session()
    _, _, state, page = start(client, browser)
    consent = sign_in(browser, page)
    _, q = back_at_client(submit(browser, consent, decision="deny"), state)
    assert q["error"] == ["access_denied"], q


@check("RP-initiated logout: with id_token_hint back to the registered URI; the session and its grants end")
def _():
    cid, _ = web_client()
    client, browser = session_for(cid), requests.Session()
    verifier, _, state, page = start(client, browser, scope="openid read")
    consent = sign_in(browser, page)
    loc, _ = back_at_client(submit(browser, consent, decision="allow"), state)
    tok = client.fetch_token(META["token_endpoint"], authorization_response=loc, code_verifier=verifier)
    q = {"id_token_hint": tok["id_token"], "post_logout_redirect_uri": LOGGED_OUT, "state": "bye"}
    r = browser.get(META["end_session_endpoint"] + "?" + urlencode(q), allow_redirects=False, timeout=10)
    assert r.status_code == 302 and r.headers["Location"] == LOGGED_OUT + "?state=bye", (r.status_code, r.headers)
    assert "tokend_session=;" in r.headers["Set-Cookie"] or "Max-Age=0" in r.headers["Set-Cookie"], r.headers
    _, _, _, again = start(session_for(cid), browser)
    assert again.status_code == 200 and "Sign in" in again.text, "signed out: the sign-in page again"
    r = requests.post(META["token_endpoint"], data={"grant_type": "refresh_token", "refresh_token": tok["refresh_token"],
                                                      "client_id": cid}, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    bad = {"post_logout_redirect_uri": "https://evil.example/", "client_id": cid}
    r = requests.get(META["end_session_endpoint"] + "?" + urlencode(bad), allow_redirects=False, timeout=10)
    assert r.status_code == 400 and "Location" not in r.headers


@check("a disabled user cannot sign in, and its refresh tokens stop working")
def _():
    cid, _ = web_client()
    client, browser = session_for(cid), requests.Session()
    verifier, _, state, page = start(client, browser, scope="openid offline_access")
    consent = sign_in(browser, page)
    loc, _ = back_at_client(submit(browser, consent, decision="allow"), state)
    tok = client.fetch_token(META["token_endpoint"], authorization_response=loc, code_verifier=verifier)
    signetctl("oauth", "user", "disable", USER)
    try:
        r = requests.post(META["token_endpoint"], data={"grant_type": "refresh_token",
                                                          "refresh_token": tok["refresh_token"], "client_id": cid},
                          timeout=10)
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
        other = requests.Session()
        _, _, _, page = start(session_for(cid), other)
        refused = sign_in(other, page)
        assert refused.status_code == 401 and "wrong" in refused.text, refused.status_code
    finally:
        signetctl("oauth", "user", "enable", USER)


def dpop_proof(key, htm, htu, nonce=None, ath=None):
    claims = {"jti": uuid.uuid4().hex, "htm": htm, "htu": htu, "iat": int(time.time())}
    if nonce:
        claims["nonce"] = nonce
    if ath:
        claims["ath"] = ath
    header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": json.loads(key.export_public())}
    t = jc_jwt.JWT(header=header, claims=claims)
    t.make_signed_token(key)
    return t.serialize()


def code_for(cid, browser, extra=None):
    """A code for `cid` from a signed-in, consented browser: (code, verifier)."""
    verifier = generate_token(64)
    q = {"response_type": "code", "client_id": cid, "redirect_uri": REDIRECT, "scope": "openid profile",
         "state": "st", "code_challenge": create_s256_code_challenge(verifier), "code_challenge_method": "S256",
         **(extra or {})}
    r = browser.get(META["authorization_endpoint"] + "?" + urlencode(q), allow_redirects=False, timeout=10)
    if r.status_code == 200 and "Sign in" in r.text:
        r = sign_in(browser, r)
    if r.status_code == 200 and "Allow access?" in r.text:
        r = submit(browser, r, decision="allow")
    _, q = back_at_client(r, "st")
    return q["code"][0], verifier


@check("DPoP (RFC 9449): use_dpop_nonce first, then a cnf.jkt-bound token; a replayed proof is refused; userinfo needs the DPoP scheme and a proof with ath")
def _():
    cid, _ = web_client()
    browser = requests.Session()
    code, verifier = code_for(cid, browser)
    key = jc_jwk.JWK.generate(kty="EC", crv="P-256")
    token_url = META["token_endpoint"]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": cid,
            "code_verifier": verifier}
    r = requests.post(token_url, data=form, headers={"DPoP": dpop_proof(key, "POST", token_url)}, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "use_dpop_nonce" and r.headers.get("DPoP-Nonce"), r.text
    nonce = r.headers["DPoP-Nonce"]
    proof = dpop_proof(key, "POST", token_url, nonce)
    r = requests.post(token_url, data=form, headers={"DPoP": proof}, timeout=10)
    assert r.status_code == 200 and r.json()["token_type"] == "DPoP", r.text
    tok = r.json()
    at = pyjwt.decode(tok["access_token"], options={"verify_signature": False})
    assert at["cnf"] == {"jkt": key.thumbprint()}, at
    again = requests.post(token_url, data={"grant_type": "refresh_token", "refresh_token": tok["refresh_token"],
                                           "client_id": cid}, headers={"DPoP": proof}, timeout=10)
    assert again.status_code == 400 and again.json()["error"] == "invalid_dpop_proof" and "replay" in again.text, again.text
    # A public client's refresh token is bound to the key: no proof, or another key, is refused.
    r = requests.post(token_url, data={"grant_type": "refresh_token", "refresh_token": tok["refresh_token"],
                                       "client_id": cid}, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_dpop_proof", r.text
    other = jc_jwk.JWK.generate(kty="EC", crv="P-256")
    r = requests.post(token_url, data={"grant_type": "refresh_token", "refresh_token": tok["refresh_token"],
                                       "client_id": cid}, headers={"DPoP": dpop_proof(other, "POST", token_url, nonce)},
                      timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    r = requests.post(token_url, data={"grant_type": "refresh_token", "refresh_token": tok["refresh_token"],
                                       "client_id": cid}, headers={"DPoP": dpop_proof(key, "POST", token_url, nonce)},
                      timeout=10)
    assert r.status_code == 200 and r.json()["token_type"] == "DPoP", r.text
    ui = META["userinfo_endpoint"]
    ath = jc_jwk.base64url_encode(__import__("hashlib").sha256(tok["access_token"].encode()).digest())
    r = requests.get(ui, headers={"Authorization": f"Bearer {tok['access_token']}"}, timeout=10)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("DPoP"), r.headers
    r = requests.get(ui, headers={"Authorization": f"DPoP {tok['access_token']}",
                                  "DPoP": dpop_proof(key, "GET", ui, nonce, ath)}, timeout=10)
    assert r.status_code == 200 and r.json()["sub"] == USER, r.text
    r = requests.get(ui, headers={"Authorization": f"DPoP {tok['access_token']}",
                                  "DPoP": dpop_proof(other, "GET", ui, nonce, ath)}, timeout=10)
    assert r.status_code == 401, r.text
    intro = requests.post(META["introspection_endpoint"], data={"token": tok["access_token"], "client_id": cid},
                          timeout=10).json()
    assert intro["active"] and intro["token_type"] == "DPoP" and intro["cnf"]["jkt"] == key.thumbprint(), intro


@check("PAR (RFC 9126): a pushed request's request_uri drives the sign-in; a wrong client or unknown URI is refused")
def _():
    cid, secret = web_client("client_secret_basic")
    verifier = generate_token(64)
    push = {"response_type": "code", "redirect_uri": REDIRECT, "scope": "openid profile", "state": "par-st",
            "code_challenge": create_s256_code_challenge(verifier), "code_challenge_method": "S256"}
    r = requests.post(META["pushed_authorization_request_endpoint"], data=push, auth=(cid, secret), timeout=10)
    assert r.status_code == 201, r.text
    uri = r.json()["request_uri"]
    assert uri.startswith("urn:ietf:params:oauth:request_uri:") and r.json()["expires_in"] > 0, r.text
    bad = requests.post(META["pushed_authorization_request_endpoint"], data={**push, "redirect_uri": "https://evil/"},
                        auth=(cid, secret), timeout=10)
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_request", bad.text
    browser = requests.Session()
    page = browser.get(META["authorization_endpoint"] + "?" + urlencode({"client_id": cid, "request_uri": uri}),
                       allow_redirects=False, timeout=10)
    consent = sign_in(browser, page)
    loc, q = back_at_client(submit(browser, consent, decision="allow"), "par-st")
    r = requests.post(META["token_endpoint"], data={"grant_type": "authorization_code", "code": q["code"][0],
                                                      "redirect_uri": REDIRECT, "code_verifier": verifier},
                      auth=(cid, secret), timeout=10)
    assert r.status_code == 200 and r.json()["id_token"], r.text
    for q in [{"client_id": "someone-else", "request_uri": uri},
              {"client_id": cid, "request_uri": "urn:ietf:params:oauth:request_uri:nope"}]:
        r = browser.get(META["authorization_endpoint"] + "?" + urlencode(q), allow_redirects=False, timeout=10)
        assert r.status_code == 400 and "Location" not in r.headers, r.status_code


def device_start(cid):
    r = requests.post(META["device_authorization_endpoint"], data={"client_id": cid, "scope": "openid read"},
                      timeout=10)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["verification_uri"] == f"{ISSUER}/device" and len(d["user_code"]) == 9 and d["interval"] == 5, d
    return d


def poll(cid, d):
    return requests.post(META["token_endpoint"], data={"grant_type": DEVICE, "device_code": d["device_code"],
                                                         "client_id": cid}, timeout=10)


@check("device flow (RFC 8628): pending, slow_down, approval through the device page, tokens; denial")
def _():
    cid, _ = web_client()
    d = device_start(cid)
    r = poll(cid, d)
    assert r.status_code == 400 and r.json()["error"] == "authorization_pending", r.text
    r = poll(cid, d)
    assert r.status_code == 400 and r.json()["error"] == "slow_down", r.text
    browser = requests.Session()
    page = browser.get(d["verification_uri_complete"], timeout=10)
    assert page.status_code == 200 and "Connect a device" in page.text, page.text[:300]
    (form,) = forms_of(page)
    assert form["fields"]["user_code"] == d["user_code"], form
    consent = submit(browser, page, username=USER, password=PASSWORD)
    assert consent.status_code == 200 and "Allow this device?" in consent.text, consent.text[:300]
    done = submit(browser, consent, decision="allow")
    assert done.status_code == 200 and "Device approved" in done.text, done.text[:300]
    time.sleep(10.5)  # the interval grew to 10 s with slow_down
    client = OAuth2Session(cid, token_endpoint_auth_method="none")
    tok = client.fetch_token(META["token_endpoint"], grant_type=DEVICE, device_code=d["device_code"])
    assert tok["token_type"] == "Bearer" and tok["id_token"] and tok["refresh_token"], tok
    assert pyjwt.decode(tok["id_token"], options={"verify_signature": False})["sub"] == USER
    r = poll(cid, d)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    # Denied: the device hears access_denied.
    d2 = device_start(cid)
    page = browser.get(d2["verification_uri_complete"], timeout=10)
    assert "Allow this device?" in page.text, "signed in already: straight to the decision"
    refused = submit(browser, page, decision="deny")
    assert "Device refused" in refused.text
    r = poll(cid, d2)
    assert r.status_code == 400 and r.json()["error"] == "access_denied", r.text
    # An unknown code is an error on the page, not a crash.
    r = browser.post(f"{ISSUER}/device", data={"user_code": "BCDF-GHJK", "csrf": "x"}, timeout=10)
    assert r.status_code == 400 and "unknown" in r.text, r.status_code


finish()
