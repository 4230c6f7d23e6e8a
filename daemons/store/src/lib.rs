//! LMDB store layer: one environment per daemon, typed tables, serde encoding, schema versioning.
