//! One small LMDB write transaction at a time through `signet_store` (what each signd
//! audit record costs), with `MDB_WRITEMAP` and the disk space reserved ahead of it
//! (signd's setting) against plain `write(2)` commits, both with process durability.
//!
//! `store_commit/write_map_reserved` and `store_commit/pwrite`: one 200-byte record per
//! transaction into a table keyed by sequence number, in a store on the temp directory's
//! filesystem (`TMPDIR`).
#![forbid(unsafe_code)]
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use criterion::{Criterion, Throughput};
use signet_store::{Durability, Store, StoreOptions};

fn main() {
    let mut c = Criterion::default().configure_from_args().measurement_time(Duration::from_secs(5));
    let mut group = c.benchmark_group("store_commit");
    group.throughput(Throughput::Elements(1));
    for (name, write_map) in [("write_map_reserved", true), ("pwrite", false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StoreOptions::new("bench", 1);
        opts.durability = Durability::Process { flush_interval: Duration::from_millis(100) };
        opts.write_map = write_map;
        let store = Store::open(dir.path(), opts).unwrap();
        let table = store.table::<u64, Vec<u8>>("audit").unwrap();
        let record = vec![7u8; 200];
        group.bench_function(name, |b| {
            b.iter(|| {
                store
                    .write(|txn| {
                        let seq = txn.next_u64_key(&table)?;
                        txn.insert_new(&table, &seq, &record)
                    })
                    .unwrap()
            })
        });
    }
    group.finish();
    c.final_summary();
}
