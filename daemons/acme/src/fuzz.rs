//! The fuzz entry point: arbitrary bytes through everything acmed does with a
//! request body before it trusts it. Used by the `acme_jws` libFuzzer target
//! and by the seeded mutation test on stable.

use serde_json::Value;

use crate::jws::{verify_key_change, ExternalAccountBinding, Jwk, KeyRef, SignedRequest};
use crate::types::Account;

/// The public half (`x`) of the Ed25519 key that `kid` requests are verified
/// with: the key of RFC 8037 Appendix A.1, whose private half
/// ([`ACCOUNT_KEY_D`]) signs the seed corpus, so that mutations of a seed reach
/// the code behind a verified signature.
pub const ACCOUNT_KEY_X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
/// The private half (`d`) of [`ACCOUNT_KEY_X`] (published in RFC 8037).
pub const ACCOUNT_KEY_D: &str = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A";
/// The MAC key external account bindings are verified with.
pub const EAB_MAC_KEY: &[u8] = b"fuzz-mac-key";

/// Parses and verifies `data` as an ACME request body; follows a verified
/// payload into key change and external account binding. Must never panic.
pub fn jws_input(data: &[u8]) {
    // A JWK on its own, as it may arrive in a key-change payload.
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        if let Ok(jwk) = Jwk::from_json(&value) {
            let _ = jwk.thumbprint();
            let round_trip = jwk.to_spki_der().ok().and_then(|der| Jwk::from_spki_der(&der).ok());
            assert!(round_trip.is_none_or(|k| k == jwk), "SPKI round trip changed the key");
        }
    }
    let Ok(request) = SignedRequest::parse(data) else {
        return;
    };
    let _ = request.check_url("https://acme.example/acme/new-account");
    let url = request.header().url.clone();
    let problem = match &request.header().key {
        KeyRef::Jwk(jwk) => {
            let jwk = jwk.clone();
            match request.verify_embedded() {
                Ok(verified) => {
                    // newAccount: the payload may carry an external account binding.
                    if let Ok(account) = verified.payload_json::<Account>() {
                        if let Some(eab) = account.external_account_binding.as_ref() {
                            if let Ok(binding) = ExternalAccountBinding::parse(eab) {
                                let _ = binding.verify(EAB_MAC_KEY, &url, &jwk);
                            }
                        }
                    }
                    return;
                }
                Err(e) => e.problem(),
            }
        }
        KeyRef::Kid(kid) => {
            // A kid request names an account: its key is the fixed one above.
            let kid = kid.clone();
            let Ok(key) = Jwk::from_json(&serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": ACCOUNT_KEY_X}))
            else {
                return;
            };
            match request.verify(&key) {
                Ok(verified) => {
                    let _ = verify_key_change(&verified, &kid, &key);
                    return;
                }
                Err(e) => e.problem(),
            }
        }
    };
    assert!((400..600).contains(&problem.http_status()));
}

/// Real signed requests to seed the fuzzer with (and the mutation test):
/// newAccount (Ed25519 and ES256 `jwk`), newAccount with an external account
/// binding, newOrder by `kid`, and a keyChange. The `kid`
/// requests are signed with [`ACCOUNT_KEY_D`].
pub fn seed_requests() -> Result<Vec<Vec<u8>>, crate::JwsError> {
    use crate::jws::sign::{self, Signer};
    use crate::jws::{Algorithm, MacAlgorithm};
    use openssl::pkey::{Id, PKey};

    let internal = |e: openssl::error::ErrorStack| crate::JwsError::Internal(e.to_string());
    let d = crate::jws::b64_decode(ACCOUNT_KEY_D).map_err(|e| crate::JwsError::Internal(e.to_string()))?;
    let account_key = PKey::private_key_from_raw_bytes(&d, Id::ED25519).map_err(internal)?;
    let account_jwk = sign::public_jwk(&account_key)?;
    let group = openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).map_err(internal)?;
    let ec_key = openssl::ec::EcKey::generate(&group).and_then(PKey::from_ec_key).map_err(internal)?;
    let base = "https://acme.example/acme";
    let acct = format!("{base}/acct/1");
    let nonce = Some("oFvnlFP1wIhRlYS2jTaXbA");
    let new_account = serde_json::json!({"termsOfServiceAgreed": true, "contact": ["mailto:admin@example.org"]});
    let eab = sign::external_account_binding(
        MacAlgorithm::Hs256,
        "kid-1",
        EAB_MAC_KEY,
        &format!("{base}/new-account"),
        &account_jwk,
    )?;
    let with_eab = serde_json::json!({"termsOfServiceAgreed": true, "externalAccountBinding": eab});
    let order = serde_json::json!({"identifiers": [{"type": "dns", "value": "www.example.org"}, {"type": "ip", "value": "192.0.2.1"}]});
    let inner = sign::key_change(Algorithm::Es256, &ec_key, &format!("{base}/key-change"), &acct, &account_jwk)?;
    let requests = [
        sign::request(
            Algorithm::EdDsa,
            &account_key,
            Signer::Jwk,
            nonce,
            &format!("{base}/new-account"),
            new_account.to_string().as_bytes(),
        )?,
        sign::request(
            Algorithm::Es256,
            &ec_key,
            Signer::Jwk,
            nonce,
            &format!("{base}/new-account"),
            new_account.to_string().as_bytes(),
        )?,
        sign::request(
            Algorithm::EdDsa,
            &account_key,
            Signer::Jwk,
            nonce,
            &format!("{base}/new-account"),
            with_eab.to_string().as_bytes(),
        )?,
        sign::request(
            Algorithm::EdDsa,
            &account_key,
            Signer::Kid(&acct),
            nonce,
            &format!("{base}/new-order"),
            order.to_string().as_bytes(),
        )?,
        sign::request(Algorithm::EdDsa, &account_key, Signer::Kid(&acct), nonce, &format!("{base}/order/1"), b"")?,
        sign::request(
            Algorithm::EdDsa,
            &account_key,
            Signer::Kid(&acct),
            nonce,
            &format!("{base}/key-change"),
            inner.to_string().as_bytes(),
        )?,
    ];
    Ok(requests.iter().map(|r| r.to_string().into_bytes()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic PRNG (xorshift) for the mutations.
    #[test]
    fn seeds_verify() {
        for seed in seed_requests().unwrap() {
            let request = SignedRequest::parse(&seed).unwrap();
            let verified = match request.header().key.clone() {
                KeyRef::Jwk(_) => request.verify_embedded().unwrap(),
                KeyRef::Kid(_) => {
                    let key = Jwk::from_json(&serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": ACCOUNT_KEY_X}))
                        .unwrap();
                    request.verify(&key).unwrap()
                }
            };
            if verified.header().url.ends_with("/key-change") {
                let old = verified.kid().map(str::to_owned).unwrap();
                let key =
                    Jwk::from_json(&serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": ACCOUNT_KEY_X})).unwrap();
                verify_key_change(&verified, &old, &key).unwrap();
            }
            jws_input(&seed);
        }
    }

    /// Writes the seed corpus of the `acme_jws` fuzz target:
    /// `SIGNET_WRITE_FUZZ_SEEDS=tests/fuzz/corpus/acme_jws cargo test -p signet-acme -- --ignored`.
    #[test]
    #[ignore = "writes files; run by hand to refresh the fuzz corpus"]
    fn write_fuzz_seeds() {
        let Some(dir) = std::env::var_os("SIGNET_WRITE_FUZZ_SEEDS") else { return };
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let names = ["new-account-eddsa", "new-account-es256", "new-account-eab", "new-order-kid", "key-change"];
        for (name, seed) in names.iter().zip(seed_requests().unwrap()) {
            std::fs::write(dir.join(format!("{name}.json")), seed).unwrap();
        }
    }

    #[test]
    fn mutated_seeds_never_panic() {
        let seeds = seed_requests().unwrap();
        signet_jose::fuzz::mutate_seeds(&seeds, 3000, 0x5eed_ac3e, jws_input);
        for garbage in [&b""[..], b"{}", b"null", b"[]", b"{\"protected\":1}", &[0xff; 64]] {
            jws_input(garbage);
        }
    }
}
