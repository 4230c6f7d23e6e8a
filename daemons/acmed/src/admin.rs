//! The admin interface (Cap'n Proto, `acmed.capnp`) on its own Unix socket:
//! external account binding keys (RFC 8555 §7.3.4) for operators
//! (`signetctl acme eab ...`).
//!
//! Served on its own thread with a `LocalSet` (capnp-rpc is `!Send`; the
//! thread is `signet_runtime::service_thread`'s). Callers
//! are admitted by their peer credentials (SO_PEERCRED) against `[admin]`,
//! when they ask for the admin capability and again on every call (SIGHUP
//! reloads `[admin]`). Each change is one LMDB write transaction, committed
//! before the answer. The MAC key leaves acmed once, in the answer to its
//! creation, and is never logged.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use futures::FutureExt;
use rand_core::{OsRng, RngCore};
use signet_ipc::server::{serve_acmed, AcmeAdminService, AcmedService, AcmedSession, LocalResult, ServeOptions};
use signet_ipc::{AcmedHealth, EabKey, ErrorKind, IpcError, PeerCredentials};
use signet_runtime::principals::supplementary_groups;
use signet_store::StoreError;
use tokio_util::sync::CancellationToken;

use crate::db::{Db, EabRec};
use crate::Acme;

/// The longest key id acmed creates or looks up.
pub const MAX_KEY_ID: usize = 64;
/// The longest note, in bytes.
pub const MAX_NOTE: usize = 1024;
/// MAC key length: 256 bits, enough for HS512 too (RFC 7518 §3.2 asks for at
/// least the hash size of HS256).
pub const MAC_KEY_BYTES: usize = 32;

/// Who may use the admin interface; replaced on SIGHUP.
pub type Admins = signet_runtime::principals::Admins<crate::config::Config>;

/// Serves the admin interface on `listener` until `shutdown`. Runs on a
/// `LocalSet` (see `signet_runtime::service_thread`): capnp-rpc is `!Send`.
pub async fn serve(
    listener: tokio::net::UnixListener,
    acme: Arc<Acme>,
    admins: Arc<Admins>,
    shutdown: CancellationToken,
) {
    let service = Rc::new(Service { acme, admins, started: Instant::now() });
    serve_acmed(listener, service, ServeOptions::default(), shutdown).await;
}

struct Service {
    acme: Arc<Acme>,
    admins: Arc<Admins>,
    started: Instant,
}

impl AcmedService for Service {
    fn session(&self, peer: PeerCredentials) -> Rc<dyn AcmedSession> {
        Rc::new(Session {
            acme: self.acme.clone(),
            admins: self.admins.clone(),
            started: self.started,
            groups: supplementary_groups(peer.uid),
            peer,
        })
    }
}

struct Session {
    acme: Arc<Acme>,
    admins: Arc<Admins>,
    started: Instant,
    peer: PeerCredentials,
    groups: Vec<u32>,
}

impl AcmedSession for Session {
    fn health(&self) -> AcmedHealth {
        let db = &self.acme.db;
        let counts = db.store.read(|t| Ok((t.len(&db.accounts)?, t.len(&db.eab_keys)?)));
        AcmedHealth {
            ok: counts.is_ok(),
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_secs: self.started.elapsed().as_secs(),
            accounts: counts.as_ref().map_or(0, |c| c.0),
            eab_keys: counts.as_ref().map_or(0, |c| c.1),
            external_account_required: self.acme.cfg.external_account_required,
        }
    }

    fn admin(&self) -> LocalResult<Rc<dyn AcmeAdminService>> {
        let admin = Admin {
            acme: self.acme.clone(),
            admins: self.admins.clone(),
            peer: self.peer,
            groups: self.groups.clone(),
        };
        let outcome = admin.check().map(|()| Rc::new(admin) as Rc<dyn AcmeAdminService>);
        futures::future::ready(outcome).boxed_local()
    }
}

/// The admin capability of one connection.
struct Admin {
    acme: Arc<Acme>,
    admins: Arc<Admins>,
    peer: PeerCredentials,
    groups: Vec<u32>,
}

impl Admin {
    /// Whether the caller is (still) an admin.
    fn check(&self) -> Result<(), IpcError> {
        if self.admins.admits(self.peer.uid, self.peer.gid, &self.groups) {
            return Ok(());
        }
        tracing::warn!(uid = self.peer.uid, gid = self.peer.gid, pid = self.peer.pid, "admin refused");
        Err(IpcError::new(
            ErrorKind::PermissionDenied,
            format!("uid {} is not among acmed's [admin] users and groups", self.peer.uid),
        ))
    }

    fn shown(&self, key_id: String, rec: &EabRec) -> EabKey {
        EabKey {
            key_id,
            hmac_key: Vec::new(),
            created_unix_secs: rec.created,
            bound_account: rec.account.map(|a| self.acme.resource_url("acct", &a)).unwrap_or_default(),
            note: rec.note.clone(),
        }
    }

    /// Checks the caller, then runs `f` (an LMDB transaction, quick) here.
    fn run<T: 'static>(&self, f: impl FnOnce(&Self) -> Result<T, IpcError>) -> LocalResult<T> {
        futures::future::ready(self.check().and_then(|()| f(self))).boxed_local()
    }
}

impl AcmeAdminService for Admin {
    fn eab_create(&self, key_id: String, note: String) -> LocalResult<EabKey> {
        self.run(|me| {
            let (key_id, rec) = create_key(&me.acme.db, &key_id, &note, me.acme.clock.unix_seconds())?;
            tracing::info!(uid = me.peer.uid, key_id = %key_id, "EAB key created");
            Ok(EabKey { hmac_key: rec.key.clone(), ..me.shown(key_id, &rec) })
        })
    }

    fn eab_list(&self) -> LocalResult<Vec<EabKey>> {
        self.run(|me| Ok(list_keys(&me.acme.db)?.into_iter().map(|(id, rec)| me.shown(id, &rec)).collect()))
    }

    fn eab_show(&self, key_id: String) -> LocalResult<EabKey> {
        self.run(|me| {
            let rec = show_key(&me.acme.db, &key_id)?;
            Ok(me.shown(key_id, &rec))
        })
    }

    fn eab_delete(&self, key_id: String) -> LocalResult<EabKey> {
        self.run(|me| {
            let rec = delete_key(&me.acme.db, &key_id).inspect_err(|e| {
                tracing::warn!(uid = me.peer.uid, key_id = %key_id, error = %e, "EAB key not deleted");
            })?;
            tracing::info!(uid = me.peer.uid, key_id = %key_id, "EAB key deleted");
            Ok(me.shown(key_id, &rec))
        })
    }

    /// See [`crate::cas`]: asks signd and ocspd, commits, then switches.
    fn use_issuer(&self, name: String) -> LocalResult<String> {
        let allowed = self.check();
        let (acme, uid) = (self.acme.clone(), self.peer.uid);
        async move {
            allowed?;
            let out = acme.use_issuer(&name).await;
            match &out {
                Ok(_) => tracing::info!(uid, issuer = %name, "issuer switched"),
                Err(e) => tracing::warn!(uid, issuer = %name, error = %e, "issuer not switched"),
            }
            out
        }
        .boxed_local()
    }
}

// --- the store operations -------------------------------------------------------

fn store_error(what: &str, e: StoreError) -> IpcError {
    tracing::error!(error = %e, "{what}");
    IpcError::internal(format!("{what}: {e}"))
}

/// A key id acmed creates: 1 to [`MAX_KEY_ID`] of `A-Z a-z 0-9 . _ -`,
/// starting with a letter or digit (an id starting with `-` would read as an
/// option to certbot, lego and signetctl).
pub fn check_new_key_id(id: &str) -> Result<(), IpcError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let ok_first = id.starts_with(|c: char| c.is_ascii_alphanumeric());
    if !ok_first || id.len() > MAX_KEY_ID || !id.chars().all(ok_char) {
        return Err(IpcError::invalid(format!(
            "key id {id:?}: 1 to {MAX_KEY_ID} of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        )));
    }
    Ok(())
}

/// `n` random bytes whose base64url form starts with a letter or digit, so
/// that it can follow a command-line flag as a separate argument. Redrawing
/// when the first character would be `-` or `_` costs 0.05 bits of the
/// 8·`n`.
fn random_for_command_lines(n: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    loop {
        OsRng.fill_bytes(&mut bytes);
        // The first base64 character is the top six bits of the first byte:
        // 62 is '-', 63 is '_'.
        if bytes[0] >> 2 < 62 {
            return bytes;
        }
    }
}

/// A key id to look up: any key put in the store before this interface
/// existed must stay reachable, so only emptiness and length are checked.
fn check_lookup_key_id(id: &str) -> Result<(), IpcError> {
    if id.is_empty() || id.len() > 4 * MAX_KEY_ID {
        return Err(IpcError::invalid(format!("key id {id:?}: 1 to {} bytes", 4 * MAX_KEY_ID)));
    }
    Ok(())
}

fn check_note(note: &str) -> Result<(), IpcError> {
    if note.len() > MAX_NOTE || note.chars().any(char::is_control) {
        return Err(IpcError::invalid(format!("a note has at most {MAX_NOTE} bytes and no control characters")));
    }
    Ok(())
}

/// Creates a key with a random MAC key under `key_id` (empty: a random id of
/// 16 bytes, base64url); committed when this returns.
pub fn create_key(db: &Db, key_id: &str, note: &str, now: i64) -> Result<(String, EabRec), IpcError> {
    let key_id =
        if key_id.is_empty() { URL_SAFE_NO_PAD.encode(random_for_command_lines(16)) } else { key_id.to_owned() };
    check_new_key_id(&key_id)?;
    check_note(note)?;
    let key = random_for_command_lines(MAC_KEY_BYTES);
    let rec = EabRec { key, created: now, account: None, note: note.to_owned() };
    let inserted = db
        .write(|t| -> Result<bool, StoreError> {
            if t.get(&db.eab_keys, &key_id)?.is_some() {
                return Ok(false);
            }
            t.put(&db.eab_keys, &key_id, &rec)?;
            Ok(true)
        })
        .map_err(|e| store_error("storing the EAB key", e))?;
    if !inserted {
        return Err(IpcError::new(ErrorKind::AlreadyExists, format!("an EAB key with id {key_id:?} exists")));
    }
    Ok((key_id, rec))
}

/// Every key, ordered by id.
pub fn list_keys(db: &Db) -> Result<Vec<(String, EabRec)>, IpcError> {
    db.store.read(|t| t.range(&db.eab_keys, None, usize::MAX)).map_err(|e| store_error("reading EAB keys", e))
}

fn not_found(key_id: &str) -> IpcError {
    IpcError::new(ErrorKind::NotFound, format!("no EAB key with id {key_id:?}"))
}

/// One key.
pub fn show_key(db: &Db, key_id: &str) -> Result<EabRec, IpcError> {
    check_lookup_key_id(key_id)?;
    db.store
        .read(|t| t.get(&db.eab_keys, &key_id.to_owned()))
        .map_err(|e| store_error("reading EAB keys", e))?
        .ok_or_else(|| not_found(key_id))
}

/// Deletes a key that has not bound an account; committed when this returns.
/// The check and the deletion are one transaction, so a newAccount binding
/// the key at the same moment either finds it gone or makes this refuse.
pub fn delete_key(db: &Db, key_id: &str) -> Result<EabRec, IpcError> {
    check_lookup_key_id(key_id)?;
    let id = key_id.to_owned();
    db
        .write(|t| -> Result<Result<EabRec, IpcError>, StoreError> {
            let Some(rec) = t.get(&db.eab_keys, &id)? else {
                return Ok(Err(not_found(key_id)));
            };
            if rec.account.is_some() {
                return Ok(Err(IpcError::new(
                    ErrorKind::AlreadyExists,
                    format!(
                        "EAB key {key_id:?} is bound to an account already: it cannot bind another, and it is kept as the record of the binding"
                    ),
                )));
            }
            t.delete(&db.eab_keys, &id)?;
            Ok(Ok(rec))
        })
        .map_err(|e| store_error("deleting the EAB key", e))?
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn random_ids_and_mac_keys_never_read_as_options() {
        // Without the redraw, 1 in 32 would start with '-' or '_': 2000 draws
        // would all but certainly show one.
        for _ in 0..2000 {
            let enc = URL_SAFE_NO_PAD.encode(random_for_command_lines(MAC_KEY_BYTES));
            assert!(enc.starts_with(|c: char| c.is_ascii_alphanumeric()), "{enc}");
        }
    }

    #[test]
    fn create_list_show_delete() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let (id, rec) = create_key(&db, "", "customer 42", 100).unwrap();
        assert_eq!((id.len(), rec.key.len(), rec.account), (22, MAC_KEY_BYTES, None));
        let (named, _) = create_key(&db, "team-a.1_x", "", 101).unwrap();
        assert_eq!(named, "team-a.1_x");
        assert_eq!(create_key(&db, "team-a.1_x", "", 102).unwrap_err().kind, ErrorKind::AlreadyExists);
        for bad in ["has space", "slash/", &"x".repeat(65), "-leading-dash", "_x", ".x"] {
            assert_eq!(create_key(&db, bad, "", 1).unwrap_err().kind, ErrorKind::InvalidArgument, "{bad}");
        }
        assert_eq!(create_key(&db, "n", "two\nlines", 1).unwrap_err().kind, ErrorKind::InvalidArgument);
        assert_eq!(create_key(&db, "n", &"x".repeat(MAX_NOTE + 1), 1).unwrap_err().kind, ErrorKind::InvalidArgument);

        let mut ids: Vec<String> = list_keys(&db).unwrap().into_iter().map(|(id, _)| id).collect();
        let mut want = vec![id.clone(), named.clone()];
        want.sort();
        ids.sort();
        assert_eq!(ids, want);
        assert_eq!(show_key(&db, &id).unwrap().note, "customer 42");
        assert_eq!(show_key(&db, "nope").unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(show_key(&db, "").unwrap_err().kind, ErrorKind::InvalidArgument);

        // A bound key stays; an unbound one goes.
        db.write(|t| {
            let mut r = t.get(&db.eab_keys, &named)?.unwrap();
            r.account = Some([7; 16]);
            t.put(&db.eab_keys, &named, &r)
        })
        .unwrap();
        assert_eq!(delete_key(&db, &named).unwrap_err().kind, ErrorKind::AlreadyExists);
        assert_eq!(delete_key(&db, &id).unwrap().note, "customer 42");
        assert_eq!(delete_key(&db, &id).unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(list_keys(&db).unwrap().len(), 1);
    }
}
