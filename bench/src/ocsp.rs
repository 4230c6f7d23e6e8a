//! OCSP over HTTP for the `ocsp-load` generator, without I/O: the GET request
//! path (RFC 6960 appendix A.1, RFC 5019 section 5) and the checks made on
//! every response.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use der::Decode as _;
use x509_ocsp::{BasicOcspResponse, OcspResponse, OcspResponseStatus};

/// The media type of an OCSP response (RFC 6960 appendix A.2).
pub const RESPONSE_CONTENT_TYPE: &str = "application/ocsp-response";

/// The media type of an OCSP request sent by POST (RFC 6960 appendix A.1).
pub const REQUEST_CONTENT_TYPE: &str = "application/ocsp-request";

/// The path of a GET request for `der` under the responder's `base_path`:
/// `base_path` without its trailing slashes, `/`, then the URL-encoded
/// standard base64 of the DER request.
pub fn get_path(base_path: &str, der: &[u8]) -> String {
    let base = base_path.trim_end_matches('/');
    let encoded = STANDARD.encode(der);
    let mut path = String::with_capacity(base.len() + 1 + encoded.len() + encoded.len() / 8);
    path.push_str(base);
    path.push('/');
    // Base64's alphabet is URL-safe except for these three.
    for c in encoded.chars() {
        match c {
            '+' => path.push_str("%2B"),
            '/' => path.push_str("%2F"),
            '=' => path.push_str("%3D"),
            c => path.push(c),
        }
    }
    path
}

/// Why a response did not count as a good OCSP response.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BadResponse {
    /// The HTTP status was not 200.
    HttpStatus(u16),
    /// The Content-Type was missing or not `application/ocsp-response`.
    ContentType,
    /// The body is not one DER SEQUENCE starting with an OCSPResponseStatus.
    NotOcspResponse,
    /// The OCSPResponseStatus is not successful (the value is the status).
    OcspStatus(u8),
    /// The body failed the full parse given to a sample of responses.
    Parse(String),
}

impl fmt::Display for BadResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::HttpStatus(code) => write!(f, "http_status_{code}"),
            Self::ContentType => f.write_str("content_type"),
            Self::NotOcspResponse => f.write_str("not_ocsp_response"),
            Self::OcspStatus(status) => write!(f, "ocsp_status_{}", status_name(*status)),
            Self::Parse(why) => write!(f, "parse: {why}"),
        }
    }
}

/// Checks a response cheaply: HTTP 200, the OCSP Content-Type (parameters
/// allowed), and [`response_status`] successful with responseBytes present.
pub fn check_response(status: u16, content_type: Option<&[u8]>, body: &[u8]) -> Result<(), BadResponse> {
    if status != 200 {
        return Err(BadResponse::HttpStatus(status));
    }
    let media_type = content_type.map(|v| v.split(|&b| b == b';').next().unwrap_or_default().trim_ascii());
    if !media_type.is_some_and(|t| t.eq_ignore_ascii_case(RESPONSE_CONTENT_TYPE.as_bytes())) {
        return Err(BadResponse::ContentType);
    }
    match response_status(body) {
        Some((0, true)) => Ok(()),
        Some((0, false)) | None => Err(BadResponse::NotOcspResponse),
        Some((status, _)) => Err(BadResponse::OcspStatus(status)),
    }
}

/// The OCSPResponseStatus of a DER OCSPResponse, read from its first bytes
/// only, and whether anything (the responseBytes) follows it. `None` unless
/// the body is exactly one SEQUENCE whose first element is a one-byte
/// ENUMERATED.
pub fn response_status(body: &[u8]) -> Option<(u8, bool)> {
    let (&tag, rest) = body.split_first()?;
    if tag != 0x30 {
        return None;
    }
    let (len, content) = der_length(rest)?;
    if content.len() != len {
        return None;
    }
    match content {
        [0x0a, 0x01, status, more @ ..] => Some((*status, !more.is_empty())),
        _ => None,
    }
}

/// Parses a response in full with x509-ocsp: an OCSPResponse whose status is
/// successful, carrying a BasicOCSPResponse with at least one SingleResponse.
pub fn parse_response(body: &[u8]) -> Result<(), BadResponse> {
    let parse = |what: &str, e: der::Error| BadResponse::Parse(format!("{what}: {e}"));
    let response = OcspResponse::from_der(body).map_err(|e| parse("OCSPResponse", e))?;
    if response.response_status != OcspResponseStatus::Successful {
        return Err(BadResponse::OcspStatus(response.response_status as u8));
    }
    let bytes = response.response_bytes.ok_or_else(|| BadResponse::Parse("no responseBytes".into()))?;
    if bytes.response_type != const_oid::db::rfc6960::ID_PKIX_OCSP_BASIC {
        return Err(BadResponse::Parse(format!("response type {}", bytes.response_type)));
    }
    let basic = BasicOcspResponse::from_der(bytes.response.as_bytes()).map_err(|e| parse("BasicOCSPResponse", e))?;
    if basic.tbs_response_data.responses.is_empty() {
        return Err(BadResponse::Parse("no SingleResponse".into()));
    }
    Ok(())
}

/// RFC 6960's name for an OCSPResponseStatus value.
pub fn status_name(status: u8) -> &'static str {
    match status {
        0 => "successful",
        1 => "malformedRequest",
        2 => "internalError",
        3 => "tryLater",
        5 => "sigRequired",
        6 => "unauthorized",
        _ => "unknown",
    }
}

/// A DER length (short or long form, up to 4 bytes) and what follows it.
fn der_length(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let (&first, rest) = bytes.split_first()?;
    if first < 0x80 {
        return Some((usize::from(first), rest));
    }
    let n = usize::from(first & 0x7f);
    if n == 0 || n > 4 || rest.len() < n {
        return None;
    }
    let (len, rest) = rest.split_at(n);
    Some((len.iter().fold(0usize, |acc, &b| acc << 8 | usize::from(b)), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_path_percent_encodes_base64() {
        // 0xfb 0xff 0xbf encodes to "+/+/"; one byte more needs padding.
        assert_eq!(get_path("/", &[0xfb, 0xff, 0xbf]), "/%2B%2F%2B%2F");
        assert_eq!(get_path("", &[0xfb, 0xff, 0xbf, 0x30]), "/%2B%2F%2B%2FMA%3D%3D");
        assert_eq!(get_path("/ocsp/", &[0x30, 0x00]), "/ocsp/MAA%3D");
        assert_eq!(get_path("/ocsp", &[0x30, 0x00]), "/ocsp/MAA%3D");
    }

    #[test]
    fn response_status_reads_the_enumerated() {
        assert_eq!(response_status(&[0x30, 0x03, 0x0a, 0x01, 0x01]), Some((1, false)));
        assert_eq!(response_status(&[0x30, 0x05, 0x0a, 0x01, 0x00, 0xa0, 0x00]), Some((0, true)));
        // Long-form length.
        let mut long = vec![0x30, 0x81, 0x83, 0x0a, 0x01, 0x00];
        long.extend([0u8; 0x80]);
        assert_eq!(response_status(&long), Some((0, true)));
        // Truncated, trailing garbage, wrong tags.
        assert_eq!(response_status(&[0x30, 0x05, 0x0a, 0x01, 0x00]), None);
        assert_eq!(response_status(&[0x30, 0x03, 0x0a, 0x01, 0x00, 0x00]), None);
        assert_eq!(response_status(&[0x31, 0x03, 0x0a, 0x01, 0x00]), None);
        assert_eq!(response_status(&[0x30, 0x03, 0x02, 0x01, 0x00]), None);
        assert_eq!(response_status(b"<html>"), None);
        assert_eq!(response_status(&[]), None);
    }

    #[test]
    fn check_response_kinds() {
        let good = [0x30, 0x05, 0x0a, 0x01, 0x00, 0xa0, 0x00];
        let ct = Some(RESPONSE_CONTENT_TYPE.as_bytes());
        assert_eq!(check_response(200, ct, &good), Ok(()));
        assert_eq!(check_response(200, Some(b"Application/OCSP-Response; x=y"), &good), Ok(()));
        assert_eq!(check_response(404, ct, &good), Err(BadResponse::HttpStatus(404)));
        assert_eq!(check_response(200, None, &good), Err(BadResponse::ContentType));
        assert_eq!(check_response(200, Some(b"text/html"), &good), Err(BadResponse::ContentType));
        assert_eq!(check_response(200, ct, &[0x30, 0x03, 0x0a, 0x01, 0x00]), Err(BadResponse::NotOcspResponse));
        assert_eq!(check_response(200, ct, &[0x30, 0x03, 0x0a, 0x01, 0x06]), Err(BadResponse::OcspStatus(6)));
        assert_eq!(BadResponse::OcspStatus(6).to_string(), "ocsp_status_unauthorized");
    }

    #[test]
    fn parse_response_rejects_non_successful() {
        assert_eq!(parse_response(&[0x30, 0x03, 0x0a, 0x01, 0x03]), Err(BadResponse::OcspStatus(3)));
        assert!(matches!(parse_response(&[0x30, 0x05, 0x0a, 0x01, 0x00, 0xa0, 0x00]), Err(BadResponse::Parse(_))));
    }
}
