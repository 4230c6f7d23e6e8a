//! Compiles the Cap'n Proto schemas with Debian's `capnp` compiler.

fn main() {
    println!("cargo:rerun-if-changed=schema");
    if let Err(e) = capnpc::CompilerCommand::new()
        .src_prefix("schema")
        .file("schema/signd.capnp")
        .file("schema/ocspd.capnp")
        .file("schema/acmed.capnp")
        .file("schema/tokend.capnp")
        .file("schema/ctlogd.capnp")
        .run()
    {
        // A build script reports failure by exiting non-zero; say what is missing.
        eprintln!("failed to compile the schemas in schema/: {e}\n(is the `capnp` compiler installed? apt-get install capnproto)");
        std::process::exit(1);
    }
}
