//! Arbitrary bytes as an ACME request body, as acmed receives them over HTTP:
//! JWS parsing and verification (and, behind a verified signature, key change
//! and external account binding) must refuse with a problem, never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    signet_acme::fuzz::jws_input(data);
});
