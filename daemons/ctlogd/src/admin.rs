//! The admin interface (Cap'n Proto, `ctlogd.capnp`) on its own Unix socket:
//! temporal shards added while ctlogd serves (`signetctl ct shard add`).
//!
//! Served on its own thread with a `LocalSet` (capnp-rpc is `!Send`; the
//! thread is `signet_runtime::service_thread`'s). Callers are admitted by
//! their peer credentials (SO_PEERCRED) against `[admin]`, when they ask for
//! the admin capability and again on every call (SIGHUP reloads `[admin]`).
//! The work of an add runs on the daemon's runtime ([`crate::shards`]), where
//! the sequencers live.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;
use signet_ipc::server::{serve_ctlogd, CtAdminService, CtlogdService, CtlogdSession, LocalResult, ServeOptions};
use signet_ipc::{CtShard, CtShardSpec, CtlogdHealth, ErrorKind, IpcError, PeerCredentials};
use signet_runtime::principals::supplementary_groups;
use tokio_util::sync::CancellationToken;

use crate::shards::{shown, Shards};

/// Who may use the admin interface; replaced on SIGHUP.
pub type Admins = signet_runtime::principals::Admins<crate::config::Config>;

/// Serves the admin interface on `listener` until `shutdown`; each add runs
/// on `runtime` (the daemon's).
pub async fn serve(
    listener: tokio::net::UnixListener,
    shards: Shards,
    admins: Arc<Admins>,
    runtime: tokio::runtime::Handle,
    shutdown: CancellationToken,
) {
    let service = Rc::new(Service { shards, admins, runtime, started: Instant::now() });
    serve_ctlogd(listener, service, ServeOptions::default(), shutdown).await;
}

struct Service {
    shards: Shards,
    admins: Arc<Admins>,
    runtime: tokio::runtime::Handle,
    started: Instant,
}

impl CtlogdService for Service {
    fn session(&self, peer: PeerCredentials) -> Rc<dyn CtlogdSession> {
        Rc::new(Admin {
            shards: self.shards.clone(),
            admins: self.admins.clone(),
            runtime: self.runtime.clone(),
            started: self.started,
            groups: supplementary_groups(peer.uid),
            peer,
        })
    }
}

/// One connection: its health, and the admin capability once admitted.
#[derive(Clone)]
struct Admin {
    shards: Shards,
    admins: Arc<Admins>,
    runtime: tokio::runtime::Handle,
    started: Instant,
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
            format!("uid {} is not among ctlogd's [admin] users and groups", self.peer.uid),
        ))
    }
}

impl CtlogdSession for Admin {
    fn health(&self) -> CtlogdHealth {
        CtlogdHealth {
            ok: true,
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_secs: self.started.elapsed().as_secs(),
            logs: u32::try_from(self.shards.set.snapshot().len()).unwrap_or(u32::MAX),
        }
    }

    fn admin(&self) -> LocalResult<Rc<dyn CtAdminService>> {
        let outcome = self.check().map(|()| Rc::new(self.clone()) as Rc<dyn CtAdminService>);
        futures::future::ready(outcome).boxed_local()
    }
}

impl CtAdminService for Admin {
    fn add_shard(&self, spec: CtShardSpec) -> LocalResult<CtShard> {
        let allowed = self.check();
        let (shards, runtime, uid) = (self.shards.clone(), self.runtime.clone(), self.peer.uid);
        async move {
            allowed?;
            let name = spec.name.clone();
            let outcome = runtime
                .spawn(async move { shards.add(spec).await })
                .await
                .map_err(|e| IpcError::internal(format!("adding the shard: {e}")))?;
            if let Err(e) = &outcome {
                tracing::warn!(uid, log = %name, error = %e, "shard not added");
            }
            outcome
        }
        .boxed_local()
    }

    fn list_shards(&self) -> LocalResult<Vec<CtShard>> {
        let outcome = self.check().map(|()| {
            let mut all: Vec<CtShard> = self.shards.set.snapshot().iter().map(shown).collect();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            all
        });
        futures::future::ready(outcome).boxed_local()
    }
}
