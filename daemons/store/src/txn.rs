//! Typed tables and the read and write transactions that use them.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_uint;

use lmdb::{Cursor, Database, RoCursor, RoTransaction, RwTransaction, Transaction, WriteFlags};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Key, StoreError};

/// Longest key LMDB accepts in its default build (`mdb_env_get_maxkeysize`).
pub const MAX_KEY_LEN: usize = 511;

// `MDB_cursor_op` values from lmdb.h, fixed by LMDB's ABI; lmdb-rkv does not
// re-export them and only iterates forwards itself.
const MDB_LAST: c_uint = 6;
const MDB_PREV: c_uint = 12;
const MDB_SET_RANGE: c_uint = 17;

/// A handle to one named table whose keys are `K` and whose values are `V`
/// (encoded with postcard).
///
/// Obtained once from [`Store::table`](crate::Store::table) and copied freely;
/// valid only with transactions of the store it came from.
pub struct Table<K, V> {
    pub(crate) db: Database,
    pub(crate) name: &'static str,
    pub(crate) store_id: u64,
    // `fn() -> _` keeps the handle Send + Sync + Copy whatever K and V are.
    pub(crate) _types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Table<K, V> {
    /// The table's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl<K, V> Clone for Table<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for Table<K, V> {}

impl<K, V> fmt::Debug for Table<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table").field("name", &self.name).field("store_id", &self.store_id).finish()
    }
}

/// A read-only snapshot, passed to the closure of [`Store::read`](crate::Store::read).
#[derive(Debug)]
pub struct ReadTxn<'env> {
    txn: RoTransaction<'env>,
    store_id: u64,
}

/// The write transaction, passed to the closure of
/// [`Store::write`](crate::Store::write). Reads see its own uncommitted writes.
#[derive(Debug)]
pub struct WriteTxn<'env> {
    txn: RwTransaction<'env>,
    store_id: u64,
}

/// The read operations, identical on both transaction types.
macro_rules! read_methods {
    () => {
        /// The value stored under `key`, if any.
        pub fn get<K: Key, V: DeserializeOwned>(&self, table: &Table<K, V>, key: &K) -> Result<Option<V>, StoreError> {
            get(&self.txn, self.store_id, table, key)
        }

        /// Up to `limit` entries in ascending key order, from `start`
        /// (inclusive) or from the first key.
        pub fn range<K: Key, V: DeserializeOwned>(
            &self,
            table: &Table<K, V>,
            start: Option<&K>,
            limit: usize,
        ) -> Result<Vec<(K, V)>, StoreError> {
            range(&self.txn, self.store_id, table, start, limit)
        }

        /// Up to `limit` entries in descending key order from the last key
        /// (newest first in an append-only table).
        pub fn range_rev<K: Key, V: DeserializeOwned>(
            &self,
            table: &Table<K, V>,
            limit: usize,
        ) -> Result<Vec<(K, V)>, StoreError> {
            range_rev(&self.txn, self.store_id, table, None, limit)
        }

        /// Up to `limit` entries in descending key order from `end`
        /// (inclusive) or from the last key; for paging backwards.
        pub fn range_rev_from<K: Key, V: DeserializeOwned>(
            &self,
            table: &Table<K, V>,
            end: Option<&K>,
            limit: usize,
        ) -> Result<Vec<(K, V)>, StoreError> {
            range_rev(&self.txn, self.store_id, table, end, limit)
        }

        /// The entry with the greatest key, if the table is not empty.
        pub fn last<K: Key, V: DeserializeOwned>(&self, table: &Table<K, V>) -> Result<Option<(K, V)>, StoreError> {
            Ok(range_rev(&self.txn, self.store_id, table, None, 1)?.pop())
        }

        /// The number of entries in the table.
        pub fn len<K, V>(&self, table: &Table<K, V>) -> Result<u64, StoreError> {
            check_store(self.store_id, table)?;
            let stat = self.txn.stat(table.db).map_err(StoreError::lmdb("table stat"))?;
            // usize is at most 64 bits on every supported target.
            Ok(stat.entries() as u64)
        }
    };
}

impl<'env> ReadTxn<'env> {
    pub(crate) fn new(txn: RoTransaction<'env>, store_id: u64) -> Self {
        Self { txn, store_id }
    }

    read_methods!();
}

impl<'env> WriteTxn<'env> {
    pub(crate) fn new(txn: RwTransaction<'env>, store_id: u64) -> Self {
        Self { txn, store_id }
    }

    pub(crate) fn into_inner(self) -> RwTransaction<'env> {
        self.txn
    }

    read_methods!();

    /// Stores `value` under `key`, replacing any previous value.
    pub fn put<K: Key, V: Serialize>(&mut self, table: &Table<K, V>, key: &K, value: &V) -> Result<(), StoreError> {
        self.put_with(table, key, value, WriteFlags::empty())
    }

    /// Stores `value` under `key` only if the key is absent; otherwise fails
    /// with [`StoreError::AlreadyExists`] and changes nothing.
    pub fn insert_new<K: Key, V: Serialize>(
        &mut self,
        table: &Table<K, V>,
        key: &K,
        value: &V,
    ) -> Result<(), StoreError> {
        self.put_with(table, key, value, WriteFlags::NO_OVERWRITE)
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete<K: Key, V>(&mut self, table: &Table<K, V>, key: &K) -> Result<bool, StoreError> {
        check_store(self.store_id, table)?;
        let key = encode_key(table, key)?;
        optional(self.txn.del(table.db, &key, None), "delete").map(|found| found.is_some())
    }

    /// The key after the table's last key, or 1 for an empty table: the next
    /// id in an append-only table such as an audit log. Ids are gap-free
    /// because the write lock is held until commit.
    pub fn next_u64_key<V: DeserializeOwned>(&self, table: &Table<u64, V>) -> Result<u64, StoreError> {
        check_store(self.store_id, table)?;
        // Only the key is needed; skip decoding the value.
        let mut cursor = open_cursor(&self.txn, table)?;
        match position(&mut cursor, None, MDB_LAST, table.name)? {
            None => Ok(1),
            Some((key, _)) => u64::decode(key)
                .map_err(|e| e.in_table(table.name))?
                .checked_add(1)
                .ok_or(StoreError::KeySpaceExhausted { table: table.name }),
        }
    }

    fn put_with<K: Key, V: Serialize>(
        &mut self,
        table: &Table<K, V>,
        key: &K,
        value: &V,
        flags: WriteFlags,
    ) -> Result<(), StoreError> {
        check_store(self.store_id, table)?;
        let key = encode_key(table, key)?;
        let value =
            postcard::to_stdvec(value).map_err(|e| StoreError::Encode { table: table.name, detail: e.to_string() })?;
        match self.txn.put(table.db, &key, &value, flags) {
            Err(lmdb::Error::KeyExist) => Err(StoreError::AlreadyExists { table: table.name }),
            other => other.map_err(StoreError::lmdb("put")),
        }
    }
}

fn check_store<K, V>(store_id: u64, table: &Table<K, V>) -> Result<(), StoreError> {
    if table.store_id == store_id {
        Ok(())
    } else {
        Err(StoreError::ForeignTable { table: table.name })
    }
}

fn encode_key<'k, K: Key, V>(table: &Table<K, V>, key: &'k K) -> Result<Cow<'k, [u8]>, StoreError> {
    let bytes = key.encode();
    if bytes.is_empty() || bytes.len() > MAX_KEY_LEN {
        return Err(StoreError::KeySize { table: table.name, len: bytes.len() });
    }
    Ok(bytes)
}

fn decode_value<K, V: DeserializeOwned>(table: &Table<K, V>, bytes: &[u8]) -> Result<V, StoreError> {
    let corrupt = |detail: String| StoreError::Corrupt { table: table.name, detail };
    let (value, rest) = postcard::take_from_bytes(bytes).map_err(|e| corrupt(format!("value: {e}")))?;
    if !rest.is_empty() {
        return Err(corrupt(format!("value: {} trailing bytes", rest.len())));
    }
    Ok(value)
}

fn decode_entry<K: Key, V: DeserializeOwned>(
    table: &Table<K, V>,
    key: &[u8],
    value: &[u8],
) -> Result<(K, V), StoreError> {
    let key = K::decode(key).map_err(|e| e.in_table(table.name))?;
    Ok((key, decode_value(table, value)?))
}

fn get<T: Transaction, K: Key, V: DeserializeOwned>(
    txn: &T,
    store_id: u64,
    table: &Table<K, V>,
    key: &K,
) -> Result<Option<V>, StoreError> {
    check_store(store_id, table)?;
    let key = encode_key(table, key)?;
    match optional(txn.get(table.db, &key), "get")? {
        None => Ok(None),
        Some(bytes) => decode_value(table, bytes).map(Some),
    }
}

fn range<T: Transaction, K: Key, V: DeserializeOwned>(
    txn: &T,
    store_id: u64,
    table: &Table<K, V>,
    start: Option<&K>,
    limit: usize,
) -> Result<Vec<(K, V)>, StoreError> {
    check_store(store_id, table)?;
    let start = start.map(|k| encode_key(table, k)).transpose()?;
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let mut cursor = open_cursor(txn, table)?;
    let iter = match &start {
        Some(start) => cursor.iter_from(start),
        None => cursor.iter_start(),
    };
    for item in iter.take(limit) {
        let (key, value) = item.map_err(StoreError::lmdb("range"))?;
        out.push(decode_entry(table, key, value)?);
    }
    Ok(out)
}

fn range_rev<T: Transaction, K: Key, V: DeserializeOwned>(
    txn: &T,
    store_id: u64,
    table: &Table<K, V>,
    end: Option<&K>,
    limit: usize,
) -> Result<Vec<(K, V)>, StoreError> {
    check_store(store_id, table)?;
    let end = end.map(|k| encode_key(table, k)).transpose()?;
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let mut cursor = open_cursor(txn, table)?;
    let mut entry = match &end {
        None => position(&mut cursor, None, MDB_LAST, table.name)?,
        // The first key >= end; if it is past end, step back one.
        Some(end) => match position(&mut cursor, Some(end), MDB_SET_RANGE, table.name)? {
            None => position(&mut cursor, None, MDB_LAST, table.name)?,
            Some((key, value)) if key == &end[..] => Some((key, value)),
            Some(_) => position(&mut cursor, None, MDB_PREV, table.name)?,
        },
    };
    while let Some((key, value)) = entry {
        out.push(decode_entry(table, key, value)?);
        if out.len() == limit {
            break;
        }
        entry = position(&mut cursor, None, MDB_PREV, table.name)?;
    }
    Ok(out)
}

fn open_cursor<'txn, T: Transaction, K, V>(txn: &'txn T, table: &Table<K, V>) -> Result<RoCursor<'txn>, StoreError> {
    txn.open_ro_cursor(table.db).map_err(StoreError::lmdb("open cursor"))
}

/// A key and value as stored.
type RawEntry<'txn> = (&'txn [u8], &'txn [u8]);

/// Moves the cursor with `op`; `None` when there is no such entry.
fn position<'txn>(
    cursor: &mut RoCursor<'txn>,
    key: Option<&[u8]>,
    op: c_uint,
    table: &'static str,
) -> Result<Option<RawEntry<'txn>>, StoreError> {
    match optional(cursor.get(key, None, op), "cursor")? {
        None => Ok(None),
        Some((Some(key), value)) => Ok(Some((key, value))),
        // LMDB always returns the key for these operations.
        Some((None, _)) => {
            Err(StoreError::Lmdb { operation: "cursor", detail: format!("table {table}: cursor returned no key") })
        }
    }
}

/// Turns LMDB's `NotFound` into `None`.
pub(crate) fn optional<T>(res: lmdb::Result<T>, operation: &'static str) -> Result<Option<T>, StoreError> {
    match res {
        Ok(v) => Ok(Some(v)),
        Err(lmdb::Error::NotFound) => Ok(None),
        Err(e) => Err(StoreError::lmdb(operation)(e)),
    }
}
