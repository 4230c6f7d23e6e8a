//! Arbitrary bytes through the CT encodings ctlogd and its clients read:
//! tile paths from URLs, SCTs and SCT lists, Merkle tree leaves, data tiles,
//! signed notes and checkpoints. Each must parse or fail cleanly, and what
//! parses must re-encode to the same bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    signet_ct::fuzz::fuzz_tile_path(data);
    signet_ct::fuzz::fuzz_tls(data);
    signet_ct::fuzz::fuzz_data_tile(data);
    signet_ct::fuzz::fuzz_note(data);
    signet_ct::fuzz::fuzz_certificate(data);
});
