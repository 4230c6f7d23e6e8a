//! tokend checks tls_client_auth certificates' revocation through OCSP
//! (`[tls] ocsp_url`, `ocsp_aia`): a real signd holding the demo CA, ocspd
//! answering for it, tokend asking ocspd on every token request; client
//! certificates issued with `signetctl cert issue` and revoked with
//! `signetctl cert revoke`, token requests made with curl.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};
use signet_tests::pki::Pki;
use signet_tests::tokend::{curl, signd_role, tls_table, Tokend};
use signet_tests::{run, Backend};

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// The demo CA with ocspd, and tokend beside it.
struct Stack {
    pki: Pki,
    tokend: Tokend,
    origin: String,
    cacert: PathBuf,
    _dir: tempfile::TempDir,
}

impl Stack {
    /// The stack with `ocsp(&pki)` in tokend's `[tls]` (client_ca_file: the
    /// CA's chain), and a tls_client_auth client for each of `names` (its SAN
    /// dNSName) with a certificate from the CA: per name (certificate, key, serial).
    fn start(ocsp: impl Fn(&Pki) -> String, names: &[&str]) -> (Stack, Vec<(PathBuf, PathBuf, String)>) {
        let pki = Pki::start_with_signd(Backend::Openssl, "ecdsa-p256", "", &signd_role());
        let dir = tempfile::tempdir().unwrap();
        let (tls, port, cacert) = tls_table(dir.path(), Some(&pki.ca("chain.pem")));
        let tokend =
            Tokend::start(&pki.signd, dir.path(), "tok-es256", "ecdsa-p256", &format!("{tls}{}\n", ocsp(&pki)));
        let mut certs = Vec::new();
        for name in names {
            let (cert, serial) = pki.issue(name);
            let key = pki.dir.join(format!("{name}.key"));
            tokend.create_client(
                name,
                &["--auth-method", "tls_client_auth", "--tls-san-dns", name, "--audience", "api", "--scope", "read"],
            );
            certs.push((cert, key, serial));
        }
        let origin = format!("https://127.0.0.1:{port}");
        (Stack { pki, tokend, origin, cacert, _dir: dir }, certs)
    }

    /// client_credentials for `client` on the mTLS listener with `cert`/`key`: (status, body).
    fn token(&self, client: &str, cert: &Path, key: &Path) -> (u16, Value) {
        let form = format!("grant_type=client_credentials&client_id={client}&scope=read");
        let url = format!("{}/token", self.origin);
        let (st, body) = curl(&[
            "--cacert",
            self.cacert.to_str().unwrap(),
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            "--data-binary",
            &form,
            &url,
        ]);
        (st, json_of(&body))
    }

    fn revoke(&self, serial: &str) {
        let (st, out, err) = run(self.pki.signetctl().args(["cert", "revoke", serial, "--reason", "key-compromise"]));
        assert!(st.success(), "revoke: {out}{err}");
    }

    /// Asserts `client` is refused with `error` (and no token), `why` in the description.
    fn refused(&self, client: &str, cert: &Path, key: &Path, status: u16, error: &str, why: &str) {
        let (st, body) = self.token(client, cert, key);
        assert_eq!((st, body["error"].as_str()), (status, Some(error)), "{body}\n{}", self.tokend.log());
        assert!(body.get("access_token").is_none(), "{body}");
        let description = body["error_description"].as_str().unwrap_or_default();
        assert!(description.contains(why), "{description}");
    }
}

fn x5t_of(pem_file: &Path) -> String {
    let cert = openssl::x509::X509::from_pem(&std::fs::read(pem_file).unwrap()).unwrap();
    URL_SAFE_NO_PAD.encode(openssl::sha::sha256(&cert.to_der().unwrap()))
}

/// The claims of a JWT, unverified (tests/tests/tokend.rs verifies tokend's signatures).
fn claims_of(token: &str) -> Value {
    json_of(&String::from_utf8(URL_SAFE_NO_PAD.decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap())
}

#[test]
fn a_revoked_certificate_gets_no_token_within_a_second_and_an_unreachable_responder_fails_closed() {
    let ocsp_url = |pki: &Pki| format!("ocsp_url = \"{}\"", pki.url("/ocsp"));
    let (mut s, certs) = Stack::start(ocsp_url, &["alpha.signet.test", "beta.signet.test"]);
    let mut config = std::fs::read_to_string(&s.tokend.config).unwrap();
    let [(alpha, alpha_key, alpha_serial), (beta, beta_key, _)] = &certs[..] else { unreachable!() };

    // Good: a token bound to the certificate.
    let (st, body) = s.token("alpha.signet.test", alpha, alpha_key);
    assert_eq!(st, 200, "{body}\n{}", s.tokend.log());
    let claims = claims_of(body["access_token"].as_str().unwrap());
    assert_eq!(claims["cnf"]["x5t#S256"], json!(x5t_of(alpha)));

    // Revoked: refused as invalid_client within a second of the revocation's acknowledgement.
    s.revoke(alpha_serial);
    let revoked_at = Instant::now();
    loop {
        let (st, body) = s.token("alpha.signet.test", alpha, alpha_key);
        if st == 401 {
            assert_eq!(body["error"], json!("invalid_client"), "{body}");
            break;
        }
        assert_eq!(st, 200, "{body}");
        assert!(revoked_at.elapsed() < Duration::from_secs(1), "a token 1 s after the revocation: {body}");
    }
    assert!(revoked_at.elapsed() < Duration::from_secs(1));
    s.refused("alpha.signet.test", alpha, alpha_key, 401, "invalid_client", "revoked (KeyCompromise)");
    // The other certificate of the same CA is still good.
    let (st, body) = s.token("beta.signet.test", beta, beta_key);
    assert_eq!(st, 200, "{body}");

    // The responder down: fail closed, 503 temporarily_unavailable, no token for anyone.
    s.pki.kill9_ocspd();
    s.refused(
        "beta.signet.test",
        beta,
        beta_key,
        503,
        "temporarily_unavailable",
        "revocation status could not be checked",
    );
    assert!(s.tokend.log().contains("revocation status is unknown"), "{}", s.tokend.log());

    // ocsp_soft_fail = true: the same outage lets clients through (the revoked one too:
    // that is what soft fail gives up); the responder back, the revocation counts again.
    config.push_str("ocsp_soft_fail = true\n");
    std::fs::write(&s.tokend.config, &config).unwrap();
    s.tokend.kill9();
    s.tokend.spawn();
    let (st, body) = s.token("beta.signet.test", beta, beta_key);
    assert_eq!(st, 200, "soft fail: {body}");
    let (st, body) = s.token("alpha.signet.test", alpha, alpha_key);
    assert_eq!(st, 200, "soft fail, revoked but unchecked: {body}");
    s.pki.start_ocspd();
    s.refused("alpha.signet.test", alpha, alpha_key, 401, "invalid_client", "revoked");
    let (st, body) = s.token("beta.signet.test", beta, beta_key);
    assert_eq!(st, 200, "{body}");
}

#[test]
fn the_responder_a_certificate_names_is_asked_with_ocsp_aia() {
    // ocsp_aia alone: the demo CA puts ocspd's URL in each certificate's AIA.
    let (s, certs) = Stack::start(|_| "ocsp_aia = true".into(), &["gamma.signet.test"]);
    let (cert, key, serial) = &certs[0];
    let aia = openssl::x509::X509::from_pem(&std::fs::read(cert).unwrap()).unwrap();
    let named: Vec<String> = aia.ocsp_responders().unwrap().iter().map(|u| u.to_string()).collect();
    assert_eq!(named, vec![s.pki.url("/ocsp")]);
    let (st, body) = s.token("gamma.signet.test", cert, key);
    assert_eq!(st, 200, "{body}\n{}", s.tokend.log());
    s.revoke(serial);
    s.refused("gamma.signet.test", cert, key, 401, "invalid_client", "revoked");
}
