//! Arbitrary bytes as a compact JWS / JWT (as libpki and tokend receive them)
//! and as a JWK set: parsing, verification and the claim checks must refuse,
//! never panic, and never accept an expired token or one for another audience.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    signet_jose::fuzz::jwt_input(data);
});
