// tokend against panva's certified libraries: openid-client v6 (the client),
// oauth4webapi (its protocol layer, used directly for revocation and the
// RFC 9068 resource-server check) and jose (keys, thumbprints, JWT checks).
//
// The browser is fetch with a cookie jar, posting tokend's real sign-in,
// consent and device forms. Everything runs on loopback over plain http,
// which openid-client refuses unless told (allowInsecureRequests), except
// mutual TLS (RFC 8705): tokend's [tls] listener, reached through the
// metadata's mtls_endpoint_aliases with a client certificate (node:https as
// openid-client's customFetch).
//
// Usage: node openid_client.mjs ISSUER SIGNETCTL WORKDIR
// (run from a directory whose node_modules holds tests/oauth/node's lock file;
// SIGNET_ENDPOINTS names scripts/run's endpoints.json: the demo CA, the mTLS
// listener's trust bundle)
import { execFileSync } from 'node:child_process';
import { X509Certificate, createHash, randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';

import * as client from 'openid-client';
import * as oauth from 'oauth4webapi';
import * as jose from 'jose';

const [ISSUER, SIGNETCTL, WORK] = process.argv.slice(2);
const API = 'https://api.signet.test';
const REDIRECT = 'http://127.0.0.1:9/callback';
const DEVICE = 'urn:ietf:params:oauth:grant-type:device_code';
const insecure = { execute: [client.allowInsecureRequests] };
let failures = 0;

async function check(name, f) {
  const t0 = Date.now();
  try {
    await f();
    console.log(`PASS  ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } catch (e) {
    failures += 1;
    console.log(`FAIL  ${name}`);
    const detail = [e?.stack ?? String(e)];
    if (e?.cause !== undefined) detail.push(`cause: ${JSON.stringify(e.cause)}`);
    if (e?.error) detail.push(`error: ${e.error} ${e.error_description ?? ''}`);
    console.log('      ' + detail.join('\n').replaceAll('\n', '\n      '));
  }
}

function assert(cond, ...what) {
  if (!cond) throw new Error('assertion failed: ' + what.map((w) => (typeof w === 'string' ? w : JSON.stringify(w))).join(' '));
}

function signetctl(args, input) {
  const out = execFileSync(SIGNETCTL, ['--json', ...args], { input, encoding: 'utf8' });
  return out.trim() ? JSON.parse(out) : null;
}

/** A browser: fetch without redirects, keeping cookies. */
class Browser {
  constructor() {
    this.jar = new Map();
  }

  async request(url, init = {}) {
    const headers = new Headers(init.headers);
    if (this.jar.size) headers.set('cookie', [...this.jar].map(([k, v]) => `${k}=${v}`).join('; '));
    const r = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of r.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      const [name, value] = [pair.slice(0, i).trim(), pair.slice(i + 1).trim()];
      if (value === '' || /max-age=0/i.test(c)) this.jar.delete(name);
      else this.jar.set(name, value);
    }
    const text = await r.text();
    return { status: r.status, headers: r.headers, text, url: String(url) };
  }

  get(url) {
    return this.request(url);
  }

  /** Posts the page's only form, its fields (name="..." value="...") overridden by `values`. */
  async submit(page, values) {
    const forms = [...page.text.matchAll(/<form[^>]*action="([^"]*)"[^>]*>([\s\S]*?)<\/form>/g)];
    assert(forms.length === 1, 'one form on the page', page.status, page.text.slice(0, 400));
    const [, action, body] = forms[0];
    const fields = new URLSearchParams();
    for (const [, name, value] of body.matchAll(/<input[^>]*name="([^"]*)"[^>]*value="([^"]*)"/g)) {
      fields.set(name, unescapeHtml(value));
    }
    for (const [k, v] of Object.entries(values)) fields.set(k, v);
    return this.request(new URL(unescapeHtml(action), page.url), { method: 'POST', body: fields });
  }
}

function unescapeHtml(s) {
  return s.replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&lt;', '<').replaceAll('&gt;', '>')
    .replaceAll('&amp;', '&');
}

// --- a user, a private_key_jwt client (ES256 key made here, JWKS by value), a public one ---
const PASSWORD = `alice-${randomUUID()}`;
const USER = `alice-${randomUUID().slice(0, 6)}`;
signetctl(['oauth', 'user', 'create', USER, '--name', 'Alice Example', '--email', 'alice@example.net', '--group',
  'admins', '--password-stdin'], PASSWORD + '\n');

const clientKeys = await jose.generateKeyPair('ES256', { extractable: true });
const clientJwk = { ...(await jose.exportJWK(clientKeys.publicKey)), alg: 'ES256', use: 'sig' };
clientJwk.kid = await jose.calculateJwkThumbprint(clientJwk);
const jwksFile = join(WORK, `node-client-${randomUUID().slice(0, 8)}.jwks.json`);
writeFileSync(jwksFile, JSON.stringify({ keys: [clientJwk] }));
const PKJ = `node-pkjwt-${randomUUID().slice(0, 8)}`;
signetctl(['oauth', 'client', 'create', PKJ, '--auth-method', 'private_key_jwt', '--jwks', jwksFile,
  '--grant-type', 'client_credentials', '--grant-type', 'authorization_code', '--grant-type', 'refresh_token',
  '--scope', 'openid', '--scope', 'profile', '--scope', 'email', '--scope', 'read', '--audience', API,
  '--redirect-uri', REDIRECT]);
const PUB = `node-public-${randomUUID().slice(0, 8)}`;
signetctl(['oauth', 'client', 'create', PUB, '--auth-method', 'none', '--grant-type', DEVICE, '--grant-type',
  'refresh_token', '--scope', 'openid', '--scope', 'read', '--audience', API]);

const privateKey = { key: clientKeys.privateKey, kid: clientJwk.kid };
let config;
const S = {};

// What the libraries sent and got back (through openid-client's customFetch): to see that the
// use_dpop_nonce round and the device flow's authorization_pending did happen, and where requests went.
const exchanges = [];
const recordingFetch = recording(fetch);
function recording(fetchImpl) {
  return (url, options) => recorded(fetchImpl, url, options);
}
async function recorded(fetchImpl, url, options) {
  const r = await fetchImpl(url, options);
  const body = await r.clone().text();
  let error;
  try {
    error = JSON.parse(body).error;
  } catch {
    error = undefined;
  }
  exchanges.push({ url: String(url), status: r.status, error, dpop: new Headers(options.headers).has('dpop'),
    dpopNonce: r.headers.get('dpop-nonce'), wwwAuthenticate: r.headers.get('www-authenticate') });
  return r;
}
function exchangesSince(n, path) {
  return exchanges.slice(n).filter((e) => new URL(e.url).pathname === path);
}

await check('openid-client discovery: issuer, endpoints, S256, DPoP, PAR, private_key_jwt; plain http only when allowed', async () => {
  let refused;
  try {
    await client.discovery(new URL(ISSUER), PKJ, undefined, client.PrivateKeyJwt(privateKey));
  } catch (e) {
    refused = e?.code;
  }
  assert(refused === 'OAUTH_HTTP_REQUEST_FORBIDDEN', 'http refused without allowInsecureRequests', refused);
  config = await client.discovery(new URL(ISSUER), PKJ, undefined, client.PrivateKeyJwt(privateKey), insecure);
  config[client.customFetch] = recordingFetch;
  // ID tokens (and JWT userinfo) verified against the JWKS too, not only their claims.
  client.enableNonRepudiationChecks(config);
  const m = config.serverMetadata();
  assert(m.issuer === ISSUER, m.issuer);
  assert(config.serverMetadata().supportsPKCE('S256'), 'PKCE S256', m.code_challenge_methods_supported);
  assert(m.token_endpoint_auth_methods_supported.includes('private_key_jwt'), m.token_endpoint_auth_methods_supported);
  assert(m.dpop_signing_alg_values_supported?.includes('ES256'), 'dpop_signing_alg_values_supported', m);
  assert(m.pushed_authorization_request_endpoint?.startsWith(ISSUER), 'PAR endpoint', m);
  assert(m.device_authorization_endpoint?.startsWith(ISSUER), 'device endpoint', m);
  assert(m.authorization_response_iss_parameter_supported === true, 'RFC 9207 iss', m);
});

async function verifyAccessToken(token) {
  const jwks = jose.createRemoteJWKSet(new URL(config.serverMetadata().jwks_uri));
  const { payload, protectedHeader } = await jose.jwtVerify(token, jwks, { issuer: ISSUER, audience: API,
    typ: 'at+jwt' });
  return { payload, protectedHeader };
}

await check('client_credentials with private_key_jwt (ES256 assertion); the token verified by jose', async () => {
  const tok = await client.clientCredentialsGrant(config, { scope: 'read', audience: API });
  assert(tok.token_type.toLowerCase() === 'bearer' && tok.expires_in > 0, tok);
  const { payload } = await verifyAccessToken(tok.access_token);
  assert(payload.client_id === PKJ && payload.sub === PKJ && payload.scope === 'read', payload);
  // A second assertion with the same jti is a replay: openid-client makes a fresh one each time.
  const again = await client.clientCredentialsGrant(config, { scope: 'read' });
  assert(again.access_token !== tok.access_token, 'a new token');
});

await check('PAR + code + PKCE through the sign-in and consent pages; code exchanged with DPoP (use_dpop_nonce handled): token_type DPoP, cnf.jkt', async () => {
  const dpopKeys = await client.randomDPoPKeyPair('ES256');
  const dpop = client.getDPoPHandle(config, dpopKeys);
  const verifier = client.randomPKCECodeVerifier();
  const nonce = client.randomNonce();
  const state = client.randomState();
  const url = await client.buildAuthorizationUrlWithPAR(config, {
    redirect_uri: REDIRECT, scope: 'openid profile email read', code_challenge:
      await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state, nonce,
  });
  assert(url.searchParams.get('request_uri')?.startsWith('urn:ietf:params:oauth:request_uri:'), String(url));
  assert(!url.searchParams.has('code_challenge'), 'PAR keeps the parameters off the URL', String(url));
  const browser = new Browser();
  const page = await browser.get(url);
  assert(page.status === 200 && page.text.includes('Sign in'), page.status, page.text.slice(0, 300));
  const consent = await browser.submit(page, { username: USER, password: PASSWORD });
  assert(consent.status === 200 && consent.text.includes('Allow access?'), consent.status, consent.text.slice(0, 300));
  const back = await browser.submit(consent, { decision: 'allow' });
  assert([302, 303].includes(back.status), back.status, back.text.slice(0, 300));
  const location = new URL(back.headers.get('location'));
  assert(location.href.startsWith(REDIRECT) && location.searchParams.get('code'), location.href);
  const n = exchanges.length;
  const tok = await client.authorizationCodeGrant(config, location, {
    pkceCodeVerifier: verifier, expectedNonce: nonce, expectedState: state, idTokenExpected: true,
  }, undefined, { DPoP: dpop });
  assert(tok.token_type.toLowerCase() === 'dpop', 'token_type', tok.token_type);
  const rounds = exchangesSince(n, '/token').map((e) => [e.status, e.error ?? '', e.dpop]);
  assert(JSON.stringify(rounds) === JSON.stringify([[400, 'use_dpop_nonce', true], [200, '', true]]),
    'a use_dpop_nonce round, then the token', rounds);
  assert(exchangesSince(n, '/token')[0].dpopNonce, 'the 400 carries DPoP-Nonce');
  const claims = tok.claims();
  assert(claims.sub === USER && claims.nonce === nonce && [claims.aud].flat().includes(PKJ), claims);
  const { payload } = await verifyAccessToken(tok.access_token);
  const jkt = await jose.calculateJwkThumbprint(await jose.exportJWK(dpopKeys.publicKey));
  assert(payload.cnf?.jkt === jkt, 'cnf.jkt', payload.cnf, jkt);
  assert(payload.sub === USER && payload.client_id === PKJ, payload);
  Object.assign(S, { dpop, dpopKeys, jkt, tok });
});

/** USER at `url` in `browser`: signs in and allows if asked; the redirect back to the client and the forms seen. */
async function codeThroughBrowser(url, browser = new Browser()) {
  const forms = [];
  let r = await browser.get(url);
  if (r.status === 200 && r.text.includes('Sign in')) {
    forms.push('sign-in');
    r = await browser.submit(r, { username: USER, password: PASSWORD });
  }
  if (r.status === 200 && r.text.includes('Allow access?')) {
    forms.push('consent');
    r = await browser.submit(r, { decision: 'allow' });
  }
  assert([302, 303].includes(r.status), r.status, r.text.slice(0, 300));
  return { location: new URL(r.headers.get('location')), forms };
}

async function redeemWith(pushed, dpop) {
  try {
    await client.authorizationCodeGrant(config, pushed.location, { pkceCodeVerifier: pushed.verifier,
      expectedState: pushed.state }, undefined, { DPoP: dpop });
    return 'redeemed';
  } catch (e) {
    return e?.error ?? String(e);
  }
}

/** A code for a pushed authorization request (PAR), through `browser`. */
async function pushedCode(browser, parameters, options) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const url = await client.buildAuthorizationUrlWithPAR(config, {
    redirect_uri: REDIRECT, scope: 'openid read', state, code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256', ...parameters,
  }, options);
  return { verifier, state, ...(await codeThroughBrowser(url, browser)) };
}

async function dpopKey() {
  const keys = await client.randomDPoPKeyPair('ES256');
  return { handle: client.getDPoPHandle(config, keys), jkt: await jose.calculateJwkThumbprint(await jose.exportJWK(keys.publicKey)) };
}

const signedIn = new Browser();
await check('dpop_jkt pushed with PAR (RFC 9449 §10), answered at once (signed in, consented): bound to that key; another key cannot redeem it', async () => {
  const [a, b] = [await dpopKey(), await dpopKey()];
  await pushedCode(signedIn, {}); // signs in and consents
  const first = await pushedCode(signedIn, { dpop_jkt: a.jkt });
  assert(first.forms.length === 0, 'no form this time', first.forms);
  const wrong = await redeemWith(first, b.handle);
  assert(wrong === 'invalid_grant', 'another key is refused', wrong);
  const second = await pushedCode(signedIn, { dpop_jkt: a.jkt });
  const right = await redeemWith(second, a.handle);
  assert(right === 'redeemed', 'the bound key redeems it', right);
});

// Two RFC 9449 bindings: dpop_jkt carried through the sign-in and consent forms (§10), and a DPoP
// proof on the PAR request binding the code as dpop_jkt would (§10.1).
{
  await check('dpop_jkt through the sign-in form (RFC 9449 §10): the code is bound to that key', async () => {
    const [a, b] = [await dpopKey(), await dpopKey()];
    const pushed = await pushedCode(new Browser(), { dpop_jkt: a.jkt });
    assert(pushed.forms.includes('sign-in'), 'through the sign-in form', pushed.forms);
    const wrong = await redeemWith(pushed, b.handle);
    assert(wrong === 'invalid_grant', 'another key is refused', wrong);
  });
  await check('a DPoP proof on the PAR request (RFC 9449 §10.1) binds the code to its key', async () => {
    const [a, b] = [await dpopKey(), await dpopKey()];
    const n = exchanges.length;
    const pushed = await pushedCode(signedIn, {}, { DPoP: a.handle });
    assert(exchangesSince(n, '/par').every((e) => e.dpop), 'openid-client sent the proof to /par');
    const wrong = await redeemWith(pushed, b.handle);
    assert(wrong === 'invalid_grant', 'another key is refused', wrong);
  });
}

await check('userinfo with DPoP through fetchUserInfo; without the proof it is refused', async () => {
  const info = await client.fetchUserInfo(config, S.tok.access_token, USER, { DPoP: S.dpop });
  assert(info.sub === USER && info.name === 'Alice Example' && info.email === 'alice@example.net', info);
  let refused;
  try {
    await client.fetchUserInfo(config, S.tok.access_token, USER);
  } catch (e) {
    refused = e;
  }
  assert(refused instanceof client.WWWAuthenticateChallengeError && refused.status === 401, 'refused', String(refused));
  assert(refused.cause.some((c) => c.scheme === 'dpop'), 'a DPoP challenge', refused.cause);
});

await check('oauth4webapi validateJwtAccessToken (RFC 9068 + RFC 9449 at a resource server) accepts the DPoP-bound token', async () => {
  const as = config.serverMetadata();
  const target = `${API}/resource`;
  const ath = jose.base64url.encode(new Uint8Array(await crypto.subtle.digest('SHA-256',
    new TextEncoder().encode(S.tok.access_token))));
  const proof = await new jose.SignJWT({ htm: 'GET', htu: target, jti: randomUUID(), ath })
    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await jose.exportJWK(S.dpopKeys.publicKey) })
    .setIssuedAt().sign(S.dpopKeys.privateKey);
  const request = new Request(target, { headers: { authorization: `DPoP ${S.tok.access_token}`, dpop: proof } });
  const claims = await oauth.validateJwtAccessToken(as, request, API, { [oauth.allowInsecureRequests]: true });
  assert(claims.sub === USER && claims.cnf.jkt === S.jkt, claims);
});

await check('refresh with DPoP: a new DPoP-bound token for the same key', async () => {
  const t2 = await client.refreshTokenGrant(config, S.tok.refresh_token, undefined, { DPoP: S.dpop });
  assert(t2.token_type.toLowerCase() === 'dpop' && t2.access_token !== S.tok.access_token, t2);
  const { payload } = await verifyAccessToken(t2.access_token);
  assert(payload.cnf?.jkt === S.jkt, payload.cnf);
  S.t2 = t2;
});

await check('introspection (openid-client) and revocation (oauth4webapi) with private_key_jwt', async () => {
  const live = await client.tokenIntrospection(config, S.t2.access_token);
  assert(live.active === true && live.sub === USER && live.client_id === PKJ, live);
  assert(live.token_type === 'DPoP' && live.cnf?.jkt === S.jkt, live);
  const rt = await client.tokenIntrospection(config, S.t2.refresh_token, { token_type_hint: 'refresh_token' });
  assert(rt.active === true, rt);
  const as = config.serverMetadata();
  const r = await oauth.revocationRequest(as, { client_id: PKJ }, oauth.PrivateKeyJwt(privateKey),
    S.t2.refresh_token, { [oauth.allowInsecureRequests]: true, additionalParameters: { token_type_hint: 'refresh_token' } });
  await oauth.processRevocationResponse(r);
  const dead = await client.tokenIntrospection(config, S.t2.refresh_token);
  assert(dead.active === false, dead);
  let refused;
  try {
    await client.refreshTokenGrant(config, S.t2.refresh_token, undefined, { DPoP: S.dpop });
  } catch (e) {
    refused = e?.error;
  }
  assert(refused === 'invalid_grant', 'a revoked refresh token', refused);
});

await check('device flow: initiateDeviceAuthorization, approval on the /device page, pollDeviceAuthorizationGrant', async () => {
  const pub = await client.discovery(new URL(ISSUER), PUB, undefined, client.None(), insecure);
  pub[client.customFetch] = recordingFetch;
  const n = exchanges.length;
  const d = await client.initiateDeviceAuthorization(pub, { scope: 'openid read' });
  assert(d.user_code && d.device_code && d.verification_uri_complete?.startsWith(ISSUER), d);
  const approve = (async () => {
    // The user comes after the device has polled once (openid-client waits `interval` first).
    for (let i = 0; i < 200 && !exchangesSince(n, '/token').length; i++) await new Promise((r) => setTimeout(r, 100));
    const browser = new Browser();
    const page = await browser.get(d.verification_uri_complete);
    assert(page.status === 200 && page.text.includes('Connect a device'), page.status, page.text.slice(0, 300));
    assert(page.text.includes(`value="${d.user_code}"`), 'the user code filled in');
    const consent = await browser.submit(page, { username: USER, password: PASSWORD });
    assert(consent.status === 200 && consent.text.includes('Allow this device?'), consent.status, consent.text.slice(0, 300));
    const done = await browser.submit(consent, { decision: 'allow' });
    assert(done.status === 200 && done.text.includes('Device approved'), done.status, done.text.slice(0, 300));
  })();
  const [tok] = await Promise.all([client.pollDeviceAuthorizationGrant(pub, d), approve]);
  assert(tok.token_type.toLowerCase() === 'bearer' && tok.refresh_token, tok);
  assert(tok.claims()?.sub === USER, tok.claims());
  const polls = exchangesSince(n, '/token').map((e) => e.error ?? e.status);
  assert(polls.length >= 2 && polls[0] === 'authorization_pending' && polls.at(-1) === 200, 'polled', polls);
  const { payload } = await verifyAccessToken(tok.access_token);
  assert(payload.sub === USER && payload.client_id === PUB && payload.scope.split(' ').includes('read'), payload);
});

// --- mutual TLS (RFC 8705): tls_client_auth with a demo-CA certificate, self_signed_tls_client_auth ---
const EP = JSON.parse(readFileSync(process.env.SIGNET_ENDPOINTS, 'utf8'));
const MTLS_CA = readFileSync(EP.tokend.mtls_ca_bundle);

/**
 * A Fetch API function for openid-client's customFetch: https: over node:https, trusting the mTLS
 * listener's CA and presenting `identity` ({ cert, key }: PEM, the chain leaf first; null: no
 * certificate); http: through the global fetch.
 */
function tlsFetch(identity) {
  return async (url, options = {}) => {
    const u = new URL(url);
    if (u.protocol !== 'https:') return fetch(url, options);
    const b = options.body;
    const body = b == null ? undefined : typeof b === 'string' || b instanceof URLSearchParams ? Buffer.from(String(b))
      : Buffer.from(b instanceof ArrayBuffer ? new Uint8Array(b) : b);
    const headers = Object.fromEntries(new Headers(options.headers));
    if (body) headers['content-length'] = String(body.length);
    return new Promise((resolve, reject) => {
      const req = https.request(u, { method: options.method ?? 'GET', headers, ca: MTLS_CA, cert: identity?.cert,
        key: identity?.key, agent: false, signal: options.signal }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) for (const one of [v].flat()) h.append(k, one);
          const empty = [204, 304].includes(res.statusCode);
          resolve(new Response(empty ? null : Buffer.concat(chunks), { status: res.statusCode, headers: h }));
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  };
}

/** base64url(SHA-256(DER)) of the first certificate in `pem`: cnf's x5t#S256. */
function x5t(pem) {
  return createHash('sha256').update(new X509Certificate(pem).raw).digest('base64url');
}

function openssl(...args) {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A P-256 key and a certificate for `dns` from the demo CA (signetctl cert issue --eku client-auth): { cert (leaf + issuing CA), key, leaf }. */
function demoCaCertificate(dns) {
  const [key, csr] = [join(WORK, `${dns}.key`), join(WORK, `${dns}.csr`)];
  openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key,
    '-subj', `/CN=${dns}`, '-addext', `subjectAltName=DNS:${dns}`, '-out', csr);
  const issued = signetctl(['--issuer', EP.ca.name, 'cert', 'issue', '--csr', csr, '--eku', 'client-auth']);
  const leaf = issued.certificate;
  const x509 = new X509Certificate(leaf);
  assert(x509.checkIssued(new X509Certificate(readFileSync(EP.ca.issuing))), 'issued by the demo CA', x509.issuer);
  assert(x509.keyUsage?.includes('1.3.6.1.5.5.7.3.2'), 'clientAuth EKU', x509.keyUsage);
  return { cert: leaf + readFileSync(EP.ca.issuing, 'utf8'), key: readFileSync(key, 'utf8'), leaf };
}

/** A self-signed P-256 certificate: { cert, key, leaf }. */
function selfSignedCertificate(name) {
  const [key, cert] = [join(WORK, `${name}.key`), join(WORK, `${name}.pem`)];
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-keyout',
    key, '-subj', `/CN=${name}`, '-out', cert);
  const pem = readFileSync(cert, 'utf8');
  return { cert: pem, key: readFileSync(key, 'utf8'), leaf: pem };
}

/** The OAuth error of a refused request: the error's own, or (a 401 with a WWW-Authenticate challenge) its response body's. */
async function oauthError(e) {
  if (e?.error) return { error: e.error, status: e.status };
  if (e instanceof client.WWWAuthenticateChallengeError) {
    const body = await e.response.json().catch(() => ({}));
    return { error: body.error, status: e.status };
  }
  return { error: String(e) };
}

/** openid-client configured for `id` through discovery, on the mTLS aliases, presenting `identity`. */
async function mtlsConfig(id, identity) {
  const config = await client.discovery(new URL(ISSUER), id, { use_mtls_endpoint_aliases: true },
    client.TlsClientAuth(), insecure);
  config[client.customFetch] = recording(tlsFetch(identity));
  return config;
}

const TLS_USER_CLIENT = `node-mtls-${randomUUID().slice(0, 8)}`;
const tlsIdentity = demoCaCertificate(`${TLS_USER_CLIENT}.signet.test`);
const M = {};

await check('tls_client_auth (RFC 8705 §2.1): a demo-CA certificate (signetctl cert issue --eku client-auth) gets a token through mtls_endpoint_aliases, bound to it (cnf.x5t#S256), verified by jose', async () => {
  signetctl(['oauth', 'client', 'create', TLS_USER_CLIENT, '--auth-method', 'tls_client_auth', '--tls-san-dns',
    `${TLS_USER_CLIENT}.signet.test`, '--grant-type', 'client_credentials', '--grant-type', 'authorization_code',
    '--scope', 'openid', '--scope', 'profile', '--scope', 'email', '--scope', 'read', '--audience', API,
    '--redirect-uri', REDIRECT]);
  const config = await mtlsConfig(TLS_USER_CLIENT, tlsIdentity);
  const m = config.serverMetadata();
  assert(m.tls_client_certificate_bound_access_tokens === true, 'bound tokens advertised', m);
  assert(m.token_endpoint_auth_methods_supported.includes('tls_client_auth'), m.token_endpoint_auth_methods_supported);
  assert(m.mtls_endpoint_aliases?.token_endpoint === `${EP.tokend.mtls_url}/token`, 'the alias', m.mtls_endpoint_aliases);
  const n = exchanges.length;
  const tok = await client.clientCredentialsGrant(config, { scope: 'read' });
  const sent = exchanges.slice(n).map((e) => e.url);
  assert(sent.length === 1 && sent[0] === `${EP.tokend.mtls_url}/token`, 'to the mTLS alias', sent);
  assert(tok.token_type.toLowerCase() === 'bearer', tok);
  const { payload } = await verifyAccessToken(tok.access_token);
  assert(payload.cnf?.['x5t#S256'] === x5t(tlsIdentity.leaf), 'cnf.x5t#S256', payload.cnf, x5t(tlsIdentity.leaf));
  assert(payload.sub === TLS_USER_CLIENT && payload.client_id === TLS_USER_CLIENT && payload.scope === 'read', payload);
  const live = await client.tokenIntrospection(config, tok.access_token);
  assert(live.active === true && live.cnf?.['x5t#S256'] === x5t(tlsIdentity.leaf), 'introspected (mTLS alias)', live);
  Object.assign(M, { config });
});

await check('tls_client_auth: another certificate (self-signed, or none) is invalid_client', async () => {
  for (const [what, identity] of [['self-signed', selfSignedCertificate(`node-stranger-${randomUUID().slice(0, 6)}`)], ['none', null]]) {
    const config = await mtlsConfig(TLS_USER_CLIENT, identity);
    let refused;
    try {
      await client.clientCredentialsGrant(config, { scope: 'read' });
    } catch (e) {
      refused = await oauthError(e);
    }
    assert(refused?.error === 'invalid_client' && refused?.status === 401, what, refused);
  }
});

await check('tls_client_auth code flow: the token is bound to the certificate; userinfo with it answers, without it (TLS without a certificate, or plain http) it is refused', async () => {
  const verifier = client.randomPKCECodeVerifier();
  const [nonce, state] = [client.randomNonce(), client.randomState()];
  const url = client.buildAuthorizationUrl(M.config, { redirect_uri: REDIRECT, scope: 'openid email read', nonce, state,
    code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' });
  const { location } = await codeThroughBrowser(url);
  const tok = await client.authorizationCodeGrant(M.config, location, { pkceCodeVerifier: verifier, expectedNonce: nonce,
    expectedState: state, idTokenExpected: true });
  const { payload } = await verifyAccessToken(tok.access_token);
  assert(payload.sub === USER && payload.cnf?.['x5t#S256'] === x5t(tlsIdentity.leaf), payload);
  const n = exchanges.length;
  const info = await client.fetchUserInfo(M.config, tok.access_token, USER);
  assert(info.sub === USER && info.email === 'alice@example.net', info);
  assert(exchanges[n].url === `${EP.tokend.mtls_url}/userinfo`, 'userinfo at the mTLS alias', exchanges[n]);
  const withoutCert = await mtlsConfig(TLS_USER_CLIENT, null);
  const plain = await client.discovery(new URL(ISSUER), TLS_USER_CLIENT, undefined, client.TlsClientAuth(), insecure);
  for (const [what, config] of [['TLS without a certificate', withoutCert], ['plain http', plain]]) {
    let refused;
    try {
      await client.fetchUserInfo(config, tok.access_token, USER);
    } catch (e) {
      refused = e;
    }
    assert(refused instanceof client.WWWAuthenticateChallengeError && refused.status === 401, what, String(refused));
    assert(refused.cause.some((c) => c.parameters.error === 'invalid_token'), what, refused.cause);
  }
});

await check('self_signed_tls_client_auth (RFC 8705 §2.2): a self-signed certificate whose key the client registered (JWKS with x5c) gets a token bound to it; introspected', async () => {
  const id = `node-selfsigned-${randomUUID().slice(0, 8)}`;
  const mine = selfSignedCertificate(id);
  const jwk = await jose.exportJWK(await jose.importX509(mine.leaf, 'ES256'));
  const x5c = [new X509Certificate(mine.leaf).raw.toString('base64')];
  const jwksPath = join(WORK, `${id}.jwks.json`);
  writeFileSync(jwksPath, JSON.stringify({ keys: [{ ...jwk, x5c }] }));
  signetctl(['oauth', 'client', 'create', id, '--auth-method', 'self_signed_tls_client_auth', '--jwks', jwksPath,
    '--scope', 'read', '--audience', API]);
  const config = await mtlsConfig(id, mine);
  assert(config.serverMetadata().token_endpoint_auth_methods_supported.includes('self_signed_tls_client_auth'));
  const tok = await client.clientCredentialsGrant(config, { scope: 'read' });
  const { payload } = await verifyAccessToken(tok.access_token);
  assert(payload.cnf?.['x5t#S256'] === x5t(mine.leaf) && payload.client_id === id, payload);
  const live = await client.tokenIntrospection(config, tok.access_token);
  assert(live.active === true && live.cnf?.['x5t#S256'] === x5t(mine.leaf), live);
  // The demo-CA certificate is not this client's key.
  const other = await mtlsConfig(id, tlsIdentity);
  let refused;
  try {
    await client.clientCredentialsGrant(other, { scope: 'read' });
  } catch (e) {
    refused = await oauthError(e);
  }
  assert(refused?.error === 'invalid_client' && refused?.status === 401, 'another certificate', refused);
});

process.exit(failures ? 1 : 0);
