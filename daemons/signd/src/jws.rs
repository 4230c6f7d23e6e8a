//! What a `sign-jws` role may sign: JWS signing inputs (RFC 7515 §5.1) for
//! the key it names, and nothing else.
//!
//! tokend's role holds `sign-jws` and not `sign`, so a compromised tokend can
//! make signd sign JWTs (which verifiers already have to judge by their
//! claims) but never a certificate, a CRL, an SCT or an arbitrary digest with
//! its keys. A signing input passes when it is
//! `BASE64URL(header) "." BASE64URL(payload)` (no padding, nothing else),
//! the header is a JSON object whose `kid` is the key's id and whose `alg`
//! fits the key and the scheme asked for, it has no `crit`, and the payload
//! is a JSON object.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use signet_ipc::{IpcError, KeyAlgorithm, SignatureScheme};
use signet_jose::Algorithm;

/// The longest signing input accepted, in bytes.
pub const MAX_SIGNING_INPUT: usize = 64 * 1024;

/// Checks that `input` is a JWS signing input `key_id` may sign with `scheme`.
pub fn check_signing_input(
    input: &[u8],
    key_id: &str,
    key: KeyAlgorithm,
    scheme: SignatureScheme,
) -> Result<(), IpcError> {
    let refuse = |why: &str| Err(IpcError::invalid(format!("not a JWS signing input for `{key_id}`: {why}")));
    if input.len() > MAX_SIGNING_INPUT {
        return refuse("too long");
    }
    let Some(dot) = input.iter().position(|&b| b == b'.') else { return refuse("no `.`") };
    let (header, payload) = (&input[..dot], &input[dot + 1..]);
    let (Ok(header), Ok(payload)) = (URL_SAFE_NO_PAD.decode(header), URL_SAFE_NO_PAD.decode(payload)) else {
        return refuse("a part is not base64url without padding");
    };
    let Ok(serde_json::Value::Object(header)) = serde_json::from_slice(&header) else {
        return refuse("the header is not a JSON object");
    };
    if !matches!(serde_json::from_slice(&payload), Ok(serde_json::Value::Object(_))) {
        return refuse("the payload is not a JSON object");
    }
    if header.contains_key("crit") {
        return refuse("`crit` is not signed");
    }
    if header.get("kid").and_then(|k| k.as_str()) != Some(key_id) {
        return refuse("the header's `kid` is not the key's id");
    }
    let Some(alg) = header.get("alg").and_then(|a| a.as_str()) else { return refuse("the header has no `alg`") };
    let Ok(alg) = Algorithm::from_name(alg) else { return refuse("unsupported `alg`") };
    if !alg.fits_key(key) || alg.scheme() != scheme {
        return refuse(&format!("`alg` {} does not fit the key ({key}) and scheme ({scheme:?})", alg.name()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(header: &str, payload: &str) -> Vec<u8> {
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload)).into_bytes()
    }

    fn check(header: &str, payload: &str) -> Result<(), IpcError> {
        check_signing_input(&input(header, payload), "tok-1", KeyAlgorithm::EcP256, SignatureScheme::EcdsaSha256)
    }

    #[test]
    fn a_jwt_for_the_key_passes() {
        check(r#"{"alg":"ES256","kid":"tok-1","typ":"at+jwt"}"#, r#"{"sub":"a"}"#).unwrap();
    }

    #[test]
    fn everything_else_is_refused() {
        let refused = [
            (r#"{"alg":"ES256","kid":"tok-2"}"#, r#"{}"#),
            (r#"{"alg":"ES256"}"#, r#"{}"#),
            (r#"{"alg":"ES384","kid":"tok-1"}"#, r#"{}"#),
            (r#"{"alg":"RS256","kid":"tok-1"}"#, r#"{}"#),
            (r#"{"alg":"none","kid":"tok-1"}"#, r#"{}"#),
            (r#"{"alg":"HS256","kid":"tok-1"}"#, r#"{}"#),
            (r#"{"alg":"ES256","kid":"tok-1","crit":["x"]}"#, r#"{}"#),
            (r#"{"alg":"ES256","kid":"tok-1"}"#, r#"[1]"#),
            (r#"{"alg":"ES256","kid":"tok-1"}"#, "not json"),
            (r#"["ES256"]"#, r#"{}"#),
        ];
        for (h, p) in refused {
            assert!(check(h, p).is_err(), "{h} . {p} was accepted");
        }
        let raw = |b: &[u8]| check_signing_input(b, "tok-1", KeyAlgorithm::EcP256, SignatureScheme::EcdsaSha256);
        assert!(raw(&[0x30, 0x82, 0x01, 0x00]).is_err(), "a DER TBSCertificate prefix");
        assert!(raw(b"eyJhbGciOiJFUzI1NiJ9").is_err(), "no dot");
        let mut padded = input(r#"{"alg":"ES256","kid":"tok-1"}"#, r#"{}"#);
        padded.extend_from_slice(b"==");
        assert!(raw(&padded).is_err(), "padding");
        assert!(raw(&vec![b'a'; MAX_SIGNING_INPUT + 1]).is_err(), "too long");
    }
}
