//! Work in progress, in memory: which authorizations are being validated
//! and which orders finalized. A claim is what makes `ready` show as
//! `processing` (and a pending challenge as `processing`); it lives only in
//! memory, so a crash mid-way leaves the order ready or the challenge
//! pending, to be tried again.

use std::sync::Arc;

use crate::db::Id;

/// Work in progress, in memory: authorizations being validated (with the
/// challenge index) and orders being finalized. A claim ends when dropped.
#[derive(Default)]
pub struct InFlight {
    /// Authorization id → challenge index.
    pub validating: std::sync::Mutex<std::collections::HashMap<Id, usize>>,
    /// Order ids.
    pub finalizing: std::sync::Mutex<std::collections::HashMap<Id, usize>>,
}

/// A claim on one entry of an [`InFlight`] map.
pub struct Claim {
    owner: Arc<InFlight>,
    finalizing: bool,
    id: Id,
}

impl InFlight {
    /// Claims `id` in `map` unless already claimed.
    pub fn claim(
        self: &Arc<Self>,
        map: &std::sync::Mutex<std::collections::HashMap<Id, usize>>,
        id: Id,
        value: usize,
    ) -> Option<Claim> {
        let mut m = map.lock().unwrap_or_else(|p| p.into_inner());
        if m.contains_key(&id) {
            return None;
        }
        m.insert(id, value);
        let finalizing = std::ptr::eq(map, &self.finalizing);
        Some(Claim { owner: self.clone(), finalizing, id })
    }

    /// The value of a current claim on `id`.
    pub fn holds(&self, map: &std::sync::Mutex<std::collections::HashMap<Id, usize>>, id: &Id) -> Option<usize> {
        map.lock().unwrap_or_else(|p| p.into_inner()).get(id).copied()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let map = if self.finalizing { &self.owner.finalizing } else { &self.owner.validating };
        map.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}
