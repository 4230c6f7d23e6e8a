//! The fuzz entry point: arbitrary bytes as a compact JWS / JWT, and as a JWK
//! set. Used by the `jose_jwt` libFuzzer target and by the seeded mutation
//! test on stable.

use openssl::pkey::{Id, PKey};
use serde_json::json;

use crate::jwt::{verify_jwt, Validation};
use crate::{b64_decode, compact, encode_signing_input, Algorithm, CompactJws, JoseError, Jwk, Jwks};

/// The stable-toolchain stand-in for a fuzzer that Signet's parsers' tests
/// share: `rounds` inputs, each a seed (taken in turn) with 1 to 4 byte
/// mutations (a byte changed, removed, inserted from a set of syntax bytes,
/// or the rest cut), from a fixed xorshift seeded with `rng_seed`, so that
/// every run tries the same inputs; each goes to `f`.
pub fn mutate_seeds<S: AsRef<[u8]>>(seeds: &[S], rounds: usize, rng_seed: u64, mut f: impl FnMut(&[u8])) {
    let mut x = rng_seed.max(1);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..rounds {
        let Some(seed) = seeds.get(round % seeds.len().max(1)) else { return };
        let mut data = seed.as_ref().to_vec();
        for _ in 0..=(next() % 4) {
            if data.is_empty() {
                break;
            }
            let at = (next() % data.len() as u64) as usize;
            match next() % 4 {
                0 => data[at] = next() as u8,
                1 => {
                    data.remove(at);
                }
                2 => data.insert(at, b"{}[]\",:=.-_A0&%+\n"[(next() % 16) as usize]),
                _ => data.truncate(at),
            }
        }
        f(&data);
    }
}

/// The public half (`x`) of the Ed25519 key tokens are verified with: the key
/// of RFC 8037 Appendix A.1, whose private half ([`TOKEN_KEY_D`]) signs the
/// seeds, so that mutations of a seed reach the claim checks.
pub const TOKEN_KEY_X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
/// The private half (`d`) of [`TOKEN_KEY_X`] (published in RFC 8037).
pub const TOKEN_KEY_D: &str = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A";
/// The `kid` of that key in the fuzz JWK set.
pub const TOKEN_KID: &str = "fuzz";
/// "Now" for the claim checks.
pub const NOW: u64 = 1_800_000_000;

/// Parses `data` as a compact JWS and verifies it as a JWT with the fixed
/// key; parses it as a JWK set too. Must never panic.
pub fn jwt_input(data: &[u8]) {
    if let Ok(jwks) = Jwks::parse(data) {
        for alg in Algorithm::ALL {
            if let Some(jwk) = jwks.find(None, alg) {
                let _ = jwk.thumbprint();
            }
        }
    }
    let Ok(token) = std::str::from_utf8(data) else { return };
    let Ok(jwks) = jwks() else { return };
    if let Ok(jws) = CompactJws::parse(token) {
        let _ = jws.verify_mac(b"0123456789abcdef0123456789abcdef");
        if let Some(jwk) = &jws.header().jwk {
            let _ = jws.verify(jwk);
        }
    }
    let v = Validation {
        issuer: Some("https://tokend.example".into()),
        audience: Some("https://api.example".into()),
        now: NOW,
        leeway: 60,
        typ: Some("at+jwt".into()),
    };
    if let Ok(claims) = verify_jwt(token, &jwks, &v) {
        assert!(claims.exp.is_some_and(|exp| NOW < exp.saturating_add(60)), "an expired token was accepted");
        assert!(claims.aud.iter().any(|a| a == "https://api.example"), "a token for another audience was accepted");
    }
}

/// The JWK set of the fixed key.
pub fn jwks() -> Result<Jwks, JoseError> {
    let set = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": TOKEN_KEY_X, "kid": TOKEN_KID, "use": "sig"}]});
    Jwks::parse(set.to_string().as_bytes())
}

/// Real tokens to seed the fuzzer with: a valid access token, one without
/// `kid`, an expired one, and one with an array `aud` and a `cnf`; plus the
/// JWK set.
pub fn seed_tokens() -> Result<Vec<Vec<u8>>, JoseError> {
    let internal = |e: openssl::error::ErrorStack| JoseError::Internal(e.to_string());
    let d = b64_decode(TOKEN_KEY_D).map_err(|e| JoseError::Internal(e.to_string()))?;
    let key = PKey::private_key_from_raw_bytes(&d, Id::ED25519).map_err(internal)?;
    let claims = |exp: u64| {
        json!({"iss": "https://tokend.example", "sub": "alice", "aud": "https://api.example", "exp": exp,
               "iat": NOW - 10, "client_id": "c1", "scope": "read"})
    };
    let bound = json!({"iss": "https://tokend.example", "aud": ["https://api.example", "x"], "exp": NOW + 60,
                       "nbf": NOW, "cnf": {"x5t#S256": "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"}});
    let header = json!({"alg": "EdDSA", "kid": TOKEN_KID, "typ": "at+jwt"});
    let mut seeds = Vec::new();
    for (header, payload) in [
        (header.clone(), claims(NOW + 300)),
        (json!({"alg": "EdDSA", "typ": "at+jwt"}), claims(NOW + 300)),
        (header.clone(), claims(NOW - 300)),
        (header, bound),
    ] {
        let input = encode_signing_input(&header, payload.to_string().as_bytes());
        let sig = Algorithm::EdDsa.sign(&key, input.as_bytes())?;
        seeds.push(compact(&input, &sig).into_bytes());
    }
    let public = Jwk::from_json(&json!({"kty": "OKP", "crv": "Ed25519", "x": TOKEN_KEY_X}))?;
    let mut entry = public.to_json();
    entry["kid"] = TOKEN_KID.into();
    seeds.push(json!({"keys": [entry]}).to_string().into_bytes());
    Ok(seeds)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

    use super::*;

    /// A small deterministic PRNG (xorshift) for the mutations.
    #[test]
    fn seeds_verify() {
        let seeds = seed_tokens().unwrap();
        let jwks = jwks().unwrap();
        let v = Validation { now: NOW, leeway: 60, ..Validation::default() };
        let token = |i: usize| std::str::from_utf8(&seeds[i]).unwrap().to_owned();
        verify_jwt(&token(0), &jwks, &v).unwrap();
        verify_jwt(&token(1), &jwks, &v).unwrap();
        assert_eq!(verify_jwt(&token(2), &jwks, &v), Err(JoseError::Expired));
        verify_jwt(&token(3), &jwks, &v).unwrap();
        assert_eq!(Jwks::parse(&seeds[4]).unwrap().len(), 1);
        for seed in &seeds {
            jwt_input(seed);
        }
    }

    /// Writes the seed corpus of the `jose_jwt` fuzz target:
    /// `SIGNET_WRITE_FUZZ_SEEDS=tests/fuzz/corpus/jose_jwt cargo test -p signet-jose -- --ignored`.
    #[test]
    #[ignore = "writes files; run by hand to refresh the fuzz corpus"]
    fn write_fuzz_seeds() {
        let Some(dir) = std::env::var_os("SIGNET_WRITE_FUZZ_SEEDS") else { return };
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let names = ["access-token", "no-kid", "expired", "bound", "jwks"];
        for (name, seed) in names.iter().zip(seed_tokens().unwrap()) {
            std::fs::write(dir.join(name), seed).unwrap();
        }
    }

    #[test]
    fn mutated_seeds_never_panic() {
        let seeds = seed_tokens().unwrap();
        mutate_seeds(&seeds, 3000, 0x5eed_1057, jwt_input);
        for garbage in [&b""[..], b"..", b"a.b.c", b"{}", b"null", b"{\"keys\":[{}]}", &[0xff; 64]] {
            jwt_input(garbage);
        }
    }
}
