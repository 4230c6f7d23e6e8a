//! Who may do what: config roles resolved to uids and gids, checked against a
//! caller's peer credentials. Pure logic apart from the one-time name lookup.

use std::collections::{BTreeMap, HashSet};

use signet_ipc::PeerCredentials;

use crate::config::{Operation, Principal, RoleConfig};

/// Roles with their principals resolved to numeric ids.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    roles: Vec<Role>,
}

/// One resolved role.
#[derive(Clone, Debug)]
pub struct Role {
    /// The role's name.
    pub name: String,
    uids: HashSet<u32>,
    gids: HashSet<u32>,
    keys: Vec<String>,
    operations: HashSet<Operation>,
    /// Whether the role may manage keys and read the audit log.
    pub admin: bool,
}

/// A policy that names an unknown user or group.
#[derive(Debug, thiserror::Error)]
#[error("role `{role}`: {detail}")]
pub struct PolicyError {
    role: String,
    detail: String,
}

impl Policy {
    /// Resolves user and group names through the system databases (NSS).
    pub fn resolve(roles: &BTreeMap<String, RoleConfig>) -> Result<Self, PolicyError> {
        Self::resolve_with(roles, &|name| lookup_user(name), &|name| lookup_group(name))
    }

    /// Resolves names with the given lookups (tests supply their own).
    pub fn resolve_with(
        roles: &BTreeMap<String, RoleConfig>,
        user: &dyn Fn(&str) -> Option<u32>,
        group: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<Self, PolicyError> {
        let mut out = Vec::new();
        for (name, cfg) in roles {
            let err = |detail: String| PolicyError { role: name.clone(), detail };
            if !valid_role_name(name) {
                return Err(err("role names are [a-z0-9-]{1,32}".into()));
            }
            let mut uids = HashSet::new();
            for p in &cfg.users {
                uids.insert(match p {
                    Principal::Id(id) => *id,
                    Principal::Name(n) => user(n).ok_or_else(|| err(format!("no such user `{n}`")))?,
                });
            }
            let mut gids = HashSet::new();
            for p in &cfg.groups {
                gids.insert(match p {
                    Principal::Id(id) => *id,
                    Principal::Name(n) => group(n).ok_or_else(|| err(format!("no such group `{n}`")))?,
                });
            }
            out.push(Role {
                name: name.clone(),
                uids,
                gids,
                keys: cfg.keys.clone(),
                operations: cfg.operations.iter().copied().collect(),
                admin: cfg.admin,
            });
        }
        Ok(Self { roles: out })
    }

    /// Roles held by a caller, given its credentials and supplementary groups.
    pub fn roles_for(&self, peer: &PeerCredentials, groups: &[u32]) -> Vec<&Role> {
        self.roles
            .iter()
            .filter(|r| {
                r.uids.contains(&peer.uid) || r.gids.contains(&peer.gid) || groups.iter().any(|g| r.gids.contains(g))
            })
            .collect()
    }

    /// A role by name.
    pub fn role(&self, name: &str) -> Option<&Role> {
        self.roles.iter().find(|r| r.name == name)
    }
}

impl Role {
    /// Whether this role may use `key_id`, whose own role list is `key_roles`.
    pub fn may_use(&self, key_id: &str, key_roles: &[String]) -> bool {
        key_roles.contains(&self.name)
            || self.keys.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => key_id.starts_with(prefix),
                None => p == key_id,
            })
    }

    /// Whether this role may perform `op`.
    pub fn allows(&self, op: Operation) -> bool {
        self.operations.contains(&op)
    }
}

/// Role names as they may appear in config and key metadata.
pub fn valid_role_name(name: &str) -> bool {
    (1..=32).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

pub use signet_runtime::principals::supplementary_groups;
use signet_runtime::principals::{lookup_group, lookup_user};

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(toml_text: &str) -> Result<Policy, PolicyError> {
        let roles: BTreeMap<String, RoleConfig> = toml::from_str(toml_text).unwrap();
        Policy::resolve_with(&roles, &|n| (n == "acmed").then_some(900), &|n| (n == "signet-clients").then_some(800))
    }

    fn peer(uid: u32, gid: u32) -> PeerCredentials {
        PeerCredentials { uid, gid, pid: 1 }
    }

    #[test]
    fn roles_by_uid_gid_and_supplementary_group() {
        let p = policy(
            r#"
            [issuer]
            users = ["acmed"]
            keys = ["ca-*"]
            operations = ["sign"]
            [reader]
            groups = ["signet-clients"]
            keys = ["ocsp"]
            "#,
        )
        .unwrap();
        let names = |r: Vec<&Role>| r.into_iter().map(|r| r.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(p.roles_for(&peer(900, 1), &[])), ["issuer"]);
        assert_eq!(names(p.roles_for(&peer(5, 800), &[])), ["reader"]);
        assert_eq!(names(p.roles_for(&peer(5, 5), &[800])), ["reader"]);
        assert!(p.roles_for(&peer(65534, 65534), &[]).is_empty());
        let issuer = p.role("issuer").unwrap();
        assert!(issuer.may_use("ca-root", &[]));
        assert!(!issuer.may_use("ocsp", &[]));
        assert!(issuer.may_use("ocsp", &["issuer".into()]));
        assert!(issuer.allows(Operation::Sign) && !issuer.allows(Operation::List));
    }

    #[test]
    fn unknown_names_are_errors() {
        let e = policy("[a]\nusers = [\"nobody-here\"]\n").unwrap_err();
        assert!(e.to_string().contains("nobody-here"), "{e}");
        assert!(policy("[Bad_Name]\n").is_err());
    }
}
