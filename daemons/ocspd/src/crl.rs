//! CRL publishing: per issuer, a full CRL, one CRL per shard (when the
//! profile partitions them) and a delta CRL, all signed through signd and
//! stored in LMDB.
//!
//! All CRLs of an issuer share one cRLNumber sequence (RFC 5280 5.2.3). They
//! are rebuilt together: within moments of a revocation or release from
//! hold, and otherwise when half of their validity has passed. Delta CRLs
//! list the revocations recorded since their base, a full CRL chosen at most
//! every `crl_base_interval_seconds`; every full CRL issued since then has a
//! number at least the base's, so any of them works with the delta. The full
//! CRL names the delta in its freshestCRL extension (RFC 5280 5.2.6).
//!
//! Releases from hold: a released certificate leaves the `revoked` index, so
//! the next full CRL and its shard omit it. When a base is chosen, the serials
//! it lists on hold are recorded with it (`base_holds`, in the same
//! transaction as the base); each delta CRL lists those that are released now
//! with reason removeFromCRL, until the next base, which no longer lists them.
//! Both are in LMDB, so a restart picks up exactly where it was.

use std::sync::Arc;
use std::time::Duration;

use signet_ca::{build_tbs_crl, CrlParams, CrlReason, RevokedEntry};
use signet_ipc::IpcError;

use crate::core::{Core, LoadedIssuer, CERTIFICATE_HOLD};
use crate::db::{CrlKind, Released, RevokedRecord, StoredCrl};

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
            // A full store is logged once (SpaceWatch), not every retry.
            Err(e) if core.db.space.is_full() => {
                tracing::debug!(issuer = %iss.name, error = %e, "cannot publish CRLs; retrying");
                RETRY
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
    let (state, (holds, releases), revoked) = tokio::task::spawn_blocking(move || {
        // The counters and the base's holds first, the revoked index after: a
        // change in between is seen by the next run (every change wakes the
        // publisher), and meanwhile the CRLs only say more, never less.
        let (state, holds) = db.store.read(|t| Ok((db.state(t, id)?, db.base_holds(t, id)?)))?;
        let revoked = db.revoked_all(id)?;
        Ok::<_, signet_store::StoreError>((state, holds, revoked))
    })
    .await
    .map_err(|e| IpcError::internal(format!("CRL task: {e}")))?
    .map_err(|e| IpcError::internal(format!("ocspd store: {e}")))?;

    let now = core.now_secs();
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
    let full = sign(core, iss, &times, number, &full_entries, Scope::Full(&iss.delta_crl_url)).await?;
    built.push((CrlKind::Full, full));
    for shard in 0..iss.profile.crl_shards {
        let entries: Vec<RevokedEntry> =
            live.iter().filter(|(_, r)| r.shard == shard).map(|(s, r)| entry(s, r)).collect();
        number += 1;
        let url = iss.shard_url(shard);
        built.push((
            CrlKind::Shard(shard),
            sign(core, iss, &times, number, &entries, Scope::Shard(url.as_deref())).await?,
        ));
    }
    // A new base when there is none, when the old one is due, or when which
    // certificates it lists on hold was not recorded (a store from before
    // releases existed). The new base is the full CRL just built, which covers
    // every change up to `state.revocation_seq`.
    let mut new_state = state.clone();
    let rebase = state.base_number == 0
        || holds.base_number != state.base_number
        || now - state.base_time >= iss.settings.crl_base_interval_seconds as i64;
    let mut new_holds = None;
    if rebase {
        new_state.base_number = full_number;
        new_state.base_seq = state.revocation_seq;
        new_state.base_time = now;
        new_holds = Some(
            live.iter()
                .filter(|(_, r)| r.revoked.reason == CERTIFICATE_HOLD)
                .map(|(s, _)| s.clone())
                .collect::<Vec<_>>(),
        );
    }
    let mut delta_entries: Vec<RevokedEntry> =
        live.iter().filter(|(_, r)| r.revoked.seq > new_state.base_seq).map(|(s, r)| entry(s, r)).collect();
    if !rebase {
        delta_entries.extend(removals(&holds.serials, &releases, &revoked, now));
    }
    number += 1;
    let delta = sign(core, iss, &times, number, &delta_entries, Scope::Delta(new_state.base_number)).await?;
    built.push((CrlKind::Delta, delta));
    new_state.crl_number = number;

    let count = built.len();
    let db = core.db.clone();
    tokio::task::spawn_blocking(move || {
        db.write(|t| {
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
            // The base and the record of its holds change together.
            if let Some(serials) = &new_holds {
                db.put_base_holds(t, id, merged.base_number, serials)?;
            }
            Ok(())
        })
    })
    .await
    .map_err(|e| IpcError::internal(format!("CRL task: {e}")))?
    .map_err(|e| IpcError::internal(format!("ocspd store: {e}")))?;
    Ok(count)
}

/// The removeFromCRL entries of a delta CRL (RFC 5280 5.3.1: that reason
/// appears in delta CRLs only): every certificate the base lists on hold
/// (`base_holds`, in key order, with `releases` beside it) that is no longer
/// revoked, i.e. was released. One that is still revoked is either on hold as
/// the base says or was revoked again since, and then the delta lists it with
/// its new reason. The entry's revocationDate is the release time.
fn removals(
    base_holds: &[Vec<u8>],
    releases: &[Option<Released>],
    revoked: &[(Vec<u8>, RevokedRecord)],
    now: i64,
) -> Vec<RevokedEntry> {
    base_holds
        .iter()
        .zip(releases)
        .filter(|(serial, _)| revoked.binary_search_by(|(s, _)| s.as_slice().cmp(serial.as_slice())).is_err())
        .map(|(serial, released)| RevokedEntry {
            serial: serial.clone(),
            // No release read: it was committed between the two reads in
            // `publish`, a moment ago (and the next run, which it woke, has
            // its exact time).
            revocation_time: std::time::UNIX_EPOCH
                + Duration::from_secs(released.map_or(now, |r| r.time).max(0) as u64),
            reason: Some(CrlReason::RemoveFromCRL),
        })
        .collect()
}

/// Which CRL is being signed.
enum Scope<'a> {
    /// The full CRL; its freshestCRL names where the delta is.
    Full(&'a str),
    /// One shard, with its distribution point URL.
    Shard(Option<&'a str>),
    /// The delta CRL against the base with this cRLNumber.
    Delta(u64),
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
    scope: Scope<'_>,
) -> Result<StoredCrl, IpcError> {
    let params = CrlParams {
        this_update: t.this_update,
        next_update: t.next_update,
        crl_number: u128::from(number),
        shard_url: match scope {
            Scope::Shard(url) => url,
            _ => None,
        },
        delta_base: match scope {
            Scope::Delta(base) => Some(u128::from(base)),
            _ => None,
        },
        freshest_crl_url: match scope {
            Scope::Full(url) => Some(url),
            _ => None,
        },
        revoked: entries,
    };
    // A million entries take a few hundred ms: let the runtime move this
    // worker's other tasks (HTTP connections) elsewhere meanwhile. ocspd's
    // runtime is multi-threaded, which block_in_place requires.
    let tbs = tokio::task::block_in_place(|| build_tbs_crl(&iss.ca, &params))
        .map_err(|e| IpcError::internal(format!("cannot build a CRL: {e}")))?;
    let der = core.signd.sign_crl(&iss.name, tbs).await?;
    let next = t.now + iss.settings.crl_validity_seconds as i64;
    Ok(StoredCrl {
        etag: crate::db::etag(&der),
        der,
        number,
        this_update: t.now,
        next_update: next,
        entries: entries.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Revoked;

    fn revoked(serial: u8, reason: u8) -> (Vec<u8>, RevokedRecord) {
        (vec![serial], RevokedRecord { revoked: Revoked { time: 1, reason, seq: 1 }, shard: 0, not_after: i64::MAX })
    }

    #[test]
    fn removals_name_released_base_holds_only() {
        // The base listed 1, 2 and 3 on hold. 1 is still on hold, 2 was
        // released, 3 was released and then revoked for keyCompromise.
        let holds = vec![vec![1], vec![2], vec![3]];
        let released = Released { time: 1_800_000_000, held_since: 1, seq: 2 };
        let releases = vec![None, Some(released), None];
        let index = vec![revoked(1, CERTIFICATE_HOLD), revoked(3, 1), revoked(9, 4)];
        let out = removals(&holds, &releases, &index, 5);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].serial, vec![2]);
        assert_eq!(out[0].reason, Some(CrlReason::RemoveFromCRL));
        assert_eq!(out[0].revocation_time, std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    }
}
