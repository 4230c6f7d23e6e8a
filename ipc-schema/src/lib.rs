//! Cap'n Proto schemas, typed conversions and the Unix-socket transport: the only crate that knows capnp types.
