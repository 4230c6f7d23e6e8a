//! Regenerates include/libpki.h with cbindgen and fails on any difference
//! from the committed header. With `LIBPKI_BLESS=1`, writes the new header.
#![allow(clippy::expect_used)]

use std::path::Path;

#[test]
fn committed_header_matches_cbindgen() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header_path = crate_dir.join("../include/libpki.h");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");

    if std::env::var_os("LIBPKI_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&header_path, &generated).expect("write include/libpki.h");
        return;
    }
    let committed = std::fs::read_to_string(&header_path).unwrap_or_default();
    if committed != generated {
        let first = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "include/libpki.h is out of date (first difference at line {}); regenerate it with\n\
             LIBPKI_BLESS=1 cargo test --release -p libpki-ffi --test header",
            first + 1
        );
    }
}
