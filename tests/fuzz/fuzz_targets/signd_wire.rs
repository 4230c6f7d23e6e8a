//! Arbitrary bytes from a hostile client into signd's capnp-rpc server and
//! request decoding.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    signet_ipc::fuzz::server_input(data);
});
