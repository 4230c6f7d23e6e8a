//! Who a config entry means: users and groups by name or id, resolved once at
//! load and matched against a caller's peer credentials (SO_PEERCRED).

use std::collections::HashSet;

use serde::Deserialize;

/// A user or group, by name or numeric id.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Principal {
    /// A numeric uid or gid.
    Id(u32),
    /// A name looked up in the system's user or group database.
    Name(String),
}

/// `users = [...]` and `groups = [...]` as written in config.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Principals {
    /// Users, by name or uid.
    #[serde(default)]
    pub users: Vec<Principal>,
    /// Groups (primary or supplementary), by name or gid.
    #[serde(default)]
    pub groups: Vec<Principal>,
}

/// [`Principals`] with every name resolved to its id.
#[derive(Clone, Debug, Default)]
pub struct ResolvedPrincipals {
    uids: HashSet<u32>,
    gids: HashSet<u32>,
}

impl Principals {
    /// Resolves names through the system databases (NSS); an unknown name is an error naming it.
    pub fn resolve(&self) -> Result<ResolvedPrincipals, String> {
        let uids = self.users.iter().map(|p| resolve(p, lookup_user, "user")).collect::<Result<_, _>>()?;
        let gids = self.groups.iter().map(|p| resolve(p, lookup_group, "group")).collect::<Result<_, _>>()?;
        Ok(ResolvedPrincipals { uids, gids })
    }
}

fn resolve(p: &Principal, lookup: fn(&str) -> Option<u32>, what: &str) -> Result<u32, String> {
    match p {
        Principal::Id(id) => Ok(*id),
        Principal::Name(n) => lookup(n).ok_or_else(|| format!("no such {what} `{n}`")),
    }
}

impl ResolvedPrincipals {
    /// Whether a caller with `uid`, primary `gid` and supplementary `groups` is among these.
    pub fn admits(&self, uid: u32, gid: u32, groups: &[u32]) -> bool {
        self.uids.contains(&uid) || self.gids.contains(&gid) || groups.iter().any(|g| self.gids.contains(g))
    }

    /// Whether no one at all is admitted.
    pub fn is_empty(&self) -> bool {
        self.uids.is_empty() && self.gids.is_empty()
    }
}

/// The uid of user `name`.
pub fn lookup_user(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name).ok().flatten().map(|u| u.uid.as_raw())
}

/// The gid of group `name`.
pub fn lookup_group(name: &str) -> Option<u32> {
    nix::unistd::Group::from_name(name).ok().flatten().map(|g| g.gid.as_raw())
}

/// Supplementary groups of `uid`, from the system's group database.
pub fn supplementary_groups(uid: u32) -> Vec<u32> {
    let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) else {
        return Vec::new();
    };
    let Ok(name) = std::ffi::CString::new(user.name) else {
        return Vec::new();
    };
    nix::unistd::getgrouplist(&name, user.gid).map(|g| g.into_iter().map(|g| g.as_raw()).collect()).unwrap_or_default()
}

/// Who may use a daemon's admin interface (its `[admin]`), shared by the
/// admin thread and the lifecycle: SIGHUP re-reads the config and
/// [`Reload::reload`](crate::lifecycle::Reload::reload) replaces the set,
/// which every admin call checks again.
pub struct Admins<C> {
    principals: std::sync::RwLock<ResolvedPrincipals>,
    resolve: fn(&C) -> Result<ResolvedPrincipals, String>,
}

impl<C> Admins<C> {
    /// Admits whom `resolve` finds in `config`; a reload resolves the new config the same way.
    pub fn new(config: &C, resolve: fn(&C) -> Result<ResolvedPrincipals, String>) -> Result<Self, String> {
        Ok(Self { principals: std::sync::RwLock::new(resolve(config)?), resolve })
    }

    /// Whether a caller with `uid`, primary `gid` and supplementary `groups` is admitted now.
    pub fn admits(&self, uid: u32, gid: u32, groups: &[u32]) -> bool {
        self.principals.read().unwrap_or_else(std::sync::PoisonError::into_inner).admits(uid, gid, groups)
    }
}

impl<C: crate::config::DaemonConfig> crate::lifecycle::Reload for Admins<C> {
    type Config = C;
    const WHAT: &'static str = "[admin]";

    fn reload(&self, config: C) -> Result<(), String> {
        let principals = (self.resolve)(&config)?;
        *self.principals.write().unwrap_or_else(std::sync::PoisonError::into_inner) = principals;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_resolve_and_admit() {
        let p: Principals = toml::from_str("users = [1234, \"root\"]\ngroups = [77]").unwrap();
        let r = p.resolve().unwrap();
        assert!(r.admits(1234, 5, &[]));
        assert!(r.admits(0, 5, &[]));
        assert!(r.admits(9, 77, &[]));
        assert!(r.admits(9, 8, &[3, 77]));
        assert!(!r.admits(9, 8, &[3]));
        assert!(!r.is_empty());
    }

    #[test]
    fn unknown_names_are_named() {
        let p: Principals = toml::from_str("users = [\"no-such-user-signet\"]").unwrap();
        assert_eq!(p.resolve().unwrap_err(), "no such user `no-such-user-signet`");
        let bad = toml::from_str::<Principals>("user = [1]");
        assert!(bad.is_err());
    }
}
