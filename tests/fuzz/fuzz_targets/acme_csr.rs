//! Arbitrary bytes as the CSR of an ACME finalize request (the base64url-decoded
//! `csr` member), as acmed hands it to signet-ca: parsing and verifying must
//! return a value or an error, never panic; PEM input goes the same way.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(csr) = signet_ca::parse_csr(data) {
        // A CSR that parses names a key acmed can compare with the account key.
        assert!(!csr.spki_der.is_empty());
        let _ = csr.key_algorithm.name();
    }
});
