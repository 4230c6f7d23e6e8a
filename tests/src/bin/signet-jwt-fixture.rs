//! Writes a JWK set and JWTs for libpki's C test (tests/c/jwt.c), signed with
//! fresh OpenSSL keys: ES256, EdDSA, RS256, PS256 and ML-DSA-44.
//!
//! Usage: `signet-jwt-fixture DIR`. Writes into DIR:
//! - `jwks.json`: the public keys, `kid` = the algorithm name;
//! - `good-<ALG>.jwt`: valid now, for [`ISSUER`] and [`AUDIENCE`], with
//!   `sub` alice, `client_id` client-1, `scope` "read write";
//! - `expired.jwt`, `not-yet-valid.jwt`, `wrong-audience.jwt`,
//!   `wrong-issuer.jwt`, `unknown-kid.jwt` (signed by a key not in the set),
//!   `alg-none.jwt`, `hs256.jwt`, `garbage.jwt`.
//!
//! tokend will later mint real tokens for the same C program.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use openssl::ec::{EcGroup, EcKey};
use openssl::nid::Nid;
use openssl::pkey::{KeyType, PKey, Private};
use openssl::rsa::Rsa;
use serde_json::{json, Value};
use signet_jose::{b64_encode, compact, encode_signing_input, jwk_json, Algorithm, MacAlgorithm};

/// The `iss` of the tokens.
const ISSUER: &str = "https://tokend.test";
/// The `aud` of the tokens.
const AUDIENCE: &str = "https://api.test";

fn main() -> Result<()> {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        bail!("usage: signet-jwt-fixture DIR");
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();

    let algs = [Algorithm::Es256, Algorithm::EdDsa, Algorithm::Rs256, Algorithm::Ps256, Algorithm::MlDsa44];
    let mut keys = Vec::new();
    let mut entries = Vec::new();
    for alg in algs {
        let key = generate(alg)?;
        entries.push(jwk_json(&key.public_key_to_der()?, alg.name(), alg)?);
        keys.push((alg, key));
    }
    write(&dir, "jwks.json", json!({ "keys": entries }).to_string())?;

    let claims = |exp: u64, nbf: u64, iss: &str, aud: Value| {
        json!({"iss": iss, "sub": "alice", "aud": aud, "client_id": "client-1", "scope": "read write",
               "iat": now, "nbf": nbf, "exp": exp, "jti": format!("{now}")})
    };
    let good = claims(now + 3600, now - 5, ISSUER, json!([AUDIENCE, "https://other.test"]));
    for (alg, key) in &keys {
        write(&dir, &format!("good-{}.jwt", alg.name()), sign(*alg, key, alg.name(), &good)?)?;
    }
    let (es, es_key) = (Algorithm::Es256, &keys[0].1);
    let cases = [
        ("expired.jwt", claims(now - 600, now - 3600, ISSUER, json!(AUDIENCE))),
        ("not-yet-valid.jwt", claims(now + 7200, now + 3600, ISSUER, json!(AUDIENCE))),
        ("wrong-audience.jwt", claims(now + 3600, now, ISSUER, json!("https://elsewhere.test"))),
        ("wrong-issuer.jwt", claims(now + 3600, now, "https://evil.test", json!(AUDIENCE))),
    ];
    for (name, c) in cases {
        write(&dir, name, sign(es, es_key, es.name(), &c)?)?;
    }
    // Signed by a key the set does not hold, under a kid it does not know.
    write(&dir, "unknown-kid.jwt", sign(es, &generate(es)?, "retired", &good)?)?;
    let unsigned = encode_signing_input(&json!({"alg": "none"}), good.to_string().as_bytes());
    write(&dir, "alg-none.jwt", format!("{unsigned}."))?;
    let input = encode_signing_input(&json!({"alg": "HS256", "kid": "ES256"}), good.to_string().as_bytes());
    write(&dir, "hs256.jwt", compact(&input, &MacAlgorithm::Hs256.mac(&[7u8; 32], input.as_bytes())?))?;
    write(&dir, "garbage.jwt", format!("{}.not-base64!.{}", b64_encode(b"{\"alg\":\"ES256\"}"), b64_encode(b"x")))?;
    Ok(())
}

/// A compact JWS of `claims` with header `{alg, kid, typ: at+jwt}`.
fn sign(alg: Algorithm, key: &PKey<Private>, kid: &str, claims: &Value) -> Result<String> {
    let input =
        encode_signing_input(&json!({"alg": alg.name(), "kid": kid, "typ": "at+jwt"}), claims.to_string().as_bytes());
    Ok(compact(&input, &alg.sign(key, input.as_bytes())?))
}

fn generate(alg: Algorithm) -> Result<PKey<Private>> {
    Ok(match alg {
        Algorithm::Es256 => {
            let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
            PKey::from_ec_key(EcKey::generate(&group)?)?
        }
        Algorithm::EdDsa => PKey::generate_ed25519()?,
        Algorithm::Rs256 | Algorithm::Ps256 => PKey::from_rsa(Rsa::generate(2048)?)?,
        Algorithm::MlDsa44 => {
            let mut seed = [0u8; 32];
            openssl::rand::rand_bytes(&mut seed)?;
            PKey::private_key_from_seed(None, KeyType::ML_DSA_44, None, &seed)?
        }
        other => bail!("the fixture makes no {other} key"),
    })
}

fn write(dir: &Path, name: &str, contents: String) -> Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))
}
