//! Arbitrary bytes as an RFC 6962 `add-chain` / `add-pre-chain` body, as
//! ctlogd receives them over HTTP, then the log entry built from the chain
//! (precertificate detection, issuer key hash, poison removal): each step
//! returns a value or an error, never panics.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| signet_ct::fuzz::fuzz_add_chain_body(data));
