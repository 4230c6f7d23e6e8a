//! LMDB store layer: one environment per daemon, typed tables, serde encoding, schema versioning.
//!
//! Each daemon opens one [`Store`] at startup, checks that it holds the
//! daemon's own data at the expected schema version, obtains its [`Table`]
//! handles, and then runs closures in read or write transactions:
//!
//! ```
//! use signet_store::{Store, StoreOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), StoreOptions::new("example", 1))?;
//! let audit = store.table::<u64, String>("audit")?;
//! let id = store.write(|txn| {
//!     let id = txn.next_u64_key(&audit)?;
//!     txn.insert_new(&audit, &id, &"issued".to_string())?;
//!     Ok(id)
//! })?;
//! assert_eq!(store.read(|txn| txn.get(&audit, &id))?.as_deref(), Some("issued"));
//! # Ok(())
//! # }
//! ```

// `unsafe` only in `copy`: the one LMDB call lmdb-rkv does not wrap
// (mdb_env_copyfd2), with its SAFETY comment.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod copy;
mod error;
mod group;
mod key;
mod reserve;
mod store;
mod txn;

pub use copy::{copy_environment, inspect, EnvCopy, DATA_FILE};
pub use error::StoreError;
pub use key::Key;
pub use reserve::{SpaceEvent, SpaceWatch, ROOM_AGAIN_BYTES};
pub use store::{Durability, Store, StoreOptions};
pub use txn::{ReadTxn, Table, WriteTxn, MAX_KEY_LEN};

#[cfg(test)]
mod tests;
