//! The registry interface (Cap'n Proto, `ocspd.capnp`): issuers record
//! issuance, revocation and releases from hold here. Served on a `LocalSet`
//! thread (capnp-rpc is `!Send`); each call runs on the main runtime and its
//! answer comes back.

use std::rc::Rc;
use std::sync::Arc;

use futures::FutureExt;
use signet_ipc::server::{LocalResult, OcspdService, OcspdSession, RegistryService};
use signet_ipc::{CertStatus, CrlSelector, IpcError, IssuedCert, IssuerInfo, OcspdHealth, PeerCredentials, Revocation};
use signet_runtime::principals::supplementary_groups;
use tokio::runtime::Handle;

use crate::core::{Core, LoadedIssuer};

/// The service: one session per connection.
pub struct Registry {
    core: Arc<Core>,
    runtime: Handle,
}

impl Registry {
    /// Serves `core`, running calls on `runtime`.
    pub fn new(core: Arc<Core>, runtime: Handle) -> Self {
        Self { core, runtime }
    }
}

impl OcspdService for Registry {
    fn session(&self, peer: PeerCredentials) -> Rc<dyn OcspdSession> {
        Rc::new(Session {
            core: self.core.clone(),
            runtime: self.runtime.clone(),
            groups: supplementary_groups(peer.uid),
            peer,
        })
    }
}

struct Session {
    core: Arc<Core>,
    runtime: Handle,
    peer: PeerCredentials,
    groups: Vec<u32>,
}

impl OcspdSession for Session {
    fn health(&self) -> OcspdHealth {
        self.core.health()
    }

    fn registry(&self, name: String) -> LocalResult<Rc<dyn RegistryService>> {
        let (uid, gid) = (self.peer.uid, self.peer.gid);
        let outcome = self.core.issuer_for(&name, |i| i.admits(uid, gid, &self.groups));
        if let Err(e) = &outcome {
            tracing::warn!(uid, pid = self.peer.pid, issuer = %name, error = %e, "registry refused");
        }
        let (core, runtime) = (self.core.clone(), self.runtime.clone());
        let peer = self.peer;
        futures::future::ready(
            outcome.map(|issuer| Rc::new(IssuerRegistry { core, runtime, issuer, peer }) as Rc<dyn RegistryService>),
        )
        .boxed_local()
    }
}

struct IssuerRegistry {
    core: Arc<Core>,
    runtime: Handle,
    issuer: Arc<LoadedIssuer>,
    peer: PeerCredentials,
}

impl IssuerRegistry {
    /// Runs `f` on the main runtime and waits for it here.
    fn run<T, F, Fut>(&self, f: F) -> LocalResult<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Core>, Arc<LoadedIssuer>) -> Fut,
        Fut: std::future::Future<Output = Result<T, IpcError>> + Send + 'static,
    {
        let task = self.runtime.spawn(f(self.core.clone(), self.issuer.clone()));
        async move { task.await.map_err(|e| IpcError::internal(format!("ocspd task failed: {e}")))? }.boxed_local()
    }
}

impl RegistryService for IssuerRegistry {
    fn record_issued(&self, cert: IssuedCert) -> LocalResult<CertStatus> {
        tracing::debug!(uid = self.peer.uid, issuer = %self.issuer.name, serial = %hex::encode(&cert.serial), "record issued");
        self.run(move |core, iss| async move { core.record_issued(iss, cert).await })
    }

    fn revoke(&self, revocation: Revocation) -> LocalResult<CertStatus> {
        let uid = self.peer.uid;
        self.run(move |core, iss| async move {
            let out = core.revoke(iss, revocation).await;
            if let Err(e) = &out {
                tracing::warn!(uid, error = %e, "revocation refused");
            }
            out
        })
    }

    fn release_hold(&self, serial: Vec<u8>) -> LocalResult<CertStatus> {
        let uid = self.peer.uid;
        self.run(move |core, iss| async move {
            let out = core.release_hold(iss, serial).await;
            if let Err(e) = &out {
                tracing::warn!(uid, error = %e, "release from hold refused");
            }
            out
        })
    }

    fn status(&self, serial: Vec<u8>) -> LocalResult<CertStatus> {
        self.run(move |core, iss| async move { core.status(&iss, serial).await })
    }

    fn crl(&self, which: CrlSelector) -> LocalResult<Vec<u8>> {
        self.run(move |core, iss| async move { core.crl(&iss, which).await })
    }

    fn info(&self) -> LocalResult<IssuerInfo> {
        let info = self.issuer.info();
        futures::future::ready(Ok(info)).boxed_local()
    }

    fn refresh_responder(&self) -> LocalResult<IssuerInfo> {
        let uid = self.peer.uid;
        self.run(move |core, iss| async move {
            let out = core.refresh_responder(iss).await;
            if let Err(e) = &out {
                tracing::warn!(uid, error = %e, "responder refresh failed");
            }
            out
        })
    }

    fn add_successor(&self, name: String) -> LocalResult<IssuerInfo> {
        let uid = self.peer.uid;
        self.run(move |core, iss| async move {
            let out = core.add_successor(iss, name).await;
            if let Err(e) = &out {
                tracing::warn!(uid, error = %e, "successor issuer refused");
            }
            out
        })
    }
}
