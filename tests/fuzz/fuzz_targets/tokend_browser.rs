//! Arbitrary bytes as a browser request to tokend's authorization endpoint
//! (a `Cookie` line, then the query): the cookie and form parsers and the
//! authorization request's checks must refuse, never panic, never accept an
//! unregistered redirect URI or a scope the client does not hold, and never
//! send an error to a URI that is not registered.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tokend::fuzz::browser_request(data);
});
