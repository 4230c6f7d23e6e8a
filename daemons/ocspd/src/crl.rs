//! CRL publishing: per issuer, a full CRL, one CRL per shard (when the
//! profile partitions them) and a delta CRL, all signed through signd and
//! stored in LMDB.
//!
//! All CRLs of an issuer share one cRLNumber sequence (RFC 5280 5.2.3). They
//! are rebuilt together: within moments of a revocation, and otherwise
//! when half of their validity has passed. Delta CRLs list the revocations
//! recorded since their base, a full CRL chosen at most every
//! `crl_base_interval_seconds`; every full CRL issued since then has a number
//! at least the base's, so any of them works with the delta.

use std::sync::Arc;
use std::time::Duration;

use signet_ca::{build_tbs_crl, CrlParams, RevokedEntry};
use signet_ipc::IpcError;

use crate::core::{now_secs, Core, LoadedIssuer};
use crate::db::{CrlKind, RevokedRecord, StoredCrl};

/// Wait after a revocation before rebuilding, so a burst makes one set of CRLs.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// Wait before retrying after a failure (signd down).
const RETRY: Duration = Duration::from_secs(5);

/// Keeps `iss`'s CRLs current until the task is dropped.
pub async fn publisher(core: Arc<Core>, iss: Arc<LoadedIssuer>) {
    loop {
        let wait = match publish(&core, &iss).await {
            Ok(n) => {
                tracing::debug!(issuer = %iss.name, crls = n, "CRLs published");
                Duration::from_secs((iss.settings.crl_validity_seconds / 2).max(1))
            }
            Err(e) => {
                tracing::warn!(issuer = %iss.name, error = %e, "cannot publish CRLs; retrying");
                RETRY
            }
        };
        tokio::select! {
            () = iss.crl_dirty.notified() => tokio::time::sleep(DEBOUNCE).await,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

fn entry(serial: &[u8], r: &RevokedRecord) -> RevokedEntry {
    RevokedEntry {
        serial: serial.to_vec(),
        revocation_time: std::time::UNIX_EPOCH + Duration::from_secs(r.revoked.time.max(0) as u64),
        reason: crate::core::crl_reason(r.revoked.reason),
    }
}

/// Builds, signs and stores every CRL of `iss`; returns how many.
pub async fn publish(core: &Core, iss: &LoadedIssuer) -> Result<usize, IpcError> {
    let db = core.db.clone();
    let id = iss.id;
    let (state, revoked) = tokio::task::spawn_blocking(move || {
        let state = db.store.read(|t| db.state(t, id))?;
        let revoked = db.revoked_all(id)?;
        Ok::<_, signet_store::StoreError>((state, revoked))
    })
    .await
    .map_err(|e| IpcError::internal(format!("CRL task: {e}")))?
    .map_err(|e| IpcError::internal(format!("ocspd store: {e}")))?;

    let now = now_secs();
    // Expired certificates leave the CRL (RFC 5280 3.3 allows it).
    let live: Vec<&(Vec<u8>, RevokedRecord)> = revoked.iter().filter(|(_, r)| r.not_after >= now).collect();
    let this_update = std::time::UNIX_EPOCH + Duration::from_secs(now as u64);
    let next_update = this_update + Duration::from_secs(iss.settings.crl_validity_seconds);
    let mut number = state.crl_number;
    let mut built: Vec<(CrlKind, StoredCrl)> = Vec::new();
    let times = Times { now, this_update, next_update };

    let full_entries: Vec<RevokedEntry> = live.iter().map(|(s, r)| entry(s, r)).collect();
    number += 1;
    let full_number = number;
    built.push((CrlKind::Full, sign(core, iss, &times, number, &full_entries, None, None).await?));
    for shard in 0..iss.profile.crl_shards {
        let entries: Vec<RevokedEntry> = live.iter().filter(|(_, r)| r.shard == shard).map(|(s, r)| entry(s, r)).collect();
        number += 1;
        let url = iss.shard_url(shard);
        built.push((CrlKind::Shard(shard), sign(core, iss, &times, number, &entries, url.as_deref(), None).await?));
    }
    // A new base when there is none or the old one is due; the new base is the
    // full CRL just built, which covers every revocation up to `state.revocation_seq`.
    let mut new_state = state.clone();
    let rebase = state.base_number == 0 || now - state.base_time >= iss.settings.crl_base_interval_seconds as i64;
    if rebase {
        new_state.base_number = full_number;
        new_state.base_seq = state.revocation_seq;
        new_state.base_time = now;
    }
    let delta_entries: Vec<RevokedEntry> =
        live.iter().filter(|(_, r)| r.revoked.seq > new_state.base_seq).map(|(s, r)| entry(s, r)).collect();
    number += 1;
    built.push((CrlKind::Delta, sign(core, iss, &times, number, &delta_entries, None, Some(new_state.base_number)).await?));
    new_state.crl_number = number;

    let count = built.len();
    let db = core.db.clone();
    tokio::task::spawn_blocking(move || {
        db.store.write(|t| {
            // Another publisher run may have raced ahead; never go backwards.
            let current = db.state_w(t, id)?;
            if current.crl_number >= new_state.crl_number {
                return Ok(());
            }
            let mut merged = new_state;
            merged.revocation_seq = current.revocation_seq;
            db.put_state(t, id, &merged)?;
            for (kind, crl) in &built {
                db.put_crl(t, id, *kind, crl)?;
            }
            Ok(())
        })
    })
    .await
    .map_err(|e| IpcError::internal(format!("CRL task: {e}")))?
    .map_err(|e| IpcError::internal(format!("ocspd store: {e}")))?;
    Ok(count)
}

struct Times {
    now: i64,
    this_update: std::time::SystemTime,
    next_update: std::time::SystemTime,
}

async fn sign(
    core: &Core,
    iss: &LoadedIssuer,
    t: &Times,
    number: u64,
    entries: &[RevokedEntry],
    shard_url: Option<&str>,
    delta_base: Option<u64>,
) -> Result<StoredCrl, IpcError> {
    let params = CrlParams {
        this_update: t.this_update,
        next_update: t.next_update,
        crl_number: u128::from(number),
        shard_url,
        delta_base: delta_base.map(u128::from),
        revoked: entries,
    };
    // A million entries take a few hundred ms: let the runtime move this
    // worker's other tasks (HTTP connections) elsewhere meanwhile. ocspd's
    // runtime is multi-threaded, which block_in_place requires.
    let tbs = tokio::task::block_in_place(|| build_tbs_crl(&iss.ca, &params))
        .map_err(|e| IpcError::internal(format!("cannot build a CRL: {e}")))?;
    let der = core.signd.sign_crl(&iss.name, tbs).await?;
    let next = t.now + iss.settings.crl_validity_seconds as i64;
    Ok(StoredCrl { etag: crate::db::etag(&der), der, number, this_update: t.now, next_update: next, entries: entries.len() as u64 })
}
