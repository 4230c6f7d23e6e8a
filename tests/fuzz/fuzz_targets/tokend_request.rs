//! Arbitrary bytes as a token request (an `Authorization` line, then the form
//! body): the form and Basic parsers and the grant rules must refuse, never
//! panic, and never grant a scope or an audience the client does not hold.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tokend::fuzz::token_request(data);
});
