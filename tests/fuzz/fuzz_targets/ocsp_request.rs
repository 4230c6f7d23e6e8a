//! Arbitrary bytes as an OCSP request, as ocspd receives them over HTTP:
//! parsing must return a value or an error, never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(req) = signet_ca::parse_ocsp_request(data) {
        // What ocspd does next with a parsed request must hold too.
        assert!((1..=signet_ca::MAX_OCSP_REQUESTS).contains(&req.cert_ids.len()));
        assert!(req.cert_ids.iter().all(|id| !id.serial.is_empty()));
        assert!(req.nonce.as_ref().is_none_or(|n| n.len() <= 128));
    }
});
