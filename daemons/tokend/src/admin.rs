//! Placeholder until the admin interface lands.
use std::sync::{Arc, RwLock};

use signet_runtime::principals::ResolvedPrincipals;
use tokio_util::sync::CancellationToken;

use crate::db::Db;
use crate::keys::Keys;

/// Who may use the admin interface.
#[derive(Default)]
pub struct Admins(RwLock<ResolvedPrincipals>);

impl Admins {
    /// Admits `principals`.
    pub fn new(principals: ResolvedPrincipals) -> Self {
        Self(RwLock::new(principals))
    }
    /// Replaces who is admitted.
    pub fn replace(&self, principals: ResolvedPrincipals) {
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = principals;
    }
}

/// Serves nothing yet.
pub async fn serve(_l: tokio::net::UnixListener, _db: Db, _k: Arc<Keys>, _a: Arc<Admins>, stop: CancellationToken) {
    stop.cancelled().await;
}
