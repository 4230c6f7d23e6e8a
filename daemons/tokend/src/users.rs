//! Local users: names, and passwords kept as argon2id hashes (RFC 9106).
//!
//! People choose their passwords, so they are hashed with a slow,
//! memory-hard KDF: argon2id with 19 MiB, 2 passes, 1 lane (the OWASP
//! minimum), a 16-byte random salt, all recorded in the PHC string so the
//! parameters can be raised later without invalidating old hashes.
//! Verification of an unknown user still runs one hash, so timing does not
//! tell which names exist.
//!
//! With `[ldap]`, a name that is not a local user signs in against the
//! directory ([`crate::ldap`]): on success a *shadow* user is kept in the
//! same table ([`LDAP_SHADOW`] in place of a password, so it never verifies
//! locally) with the directory's name, email and groups, refreshed at each
//! sign-in; the token flows read it as they read any user.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

use crate::db::{Db, UserRec};

/// The memory cost, KiB.
const M_COST: u32 = 19 * 1024;
/// Passes.
const T_COST: u32 = 2;
/// Lanes.
const P_COST: u32 = 1;

/// The longest password accepted (argon2 takes more; a form field should not).
pub const MAX_PASSWORD: usize = 1024;

/// The `password` of a shadow of a directory user: not a PHC string, so no
/// password verifies against it locally.
pub const LDAP_SHADOW: &str = "!ldap";

/// Where users sign in besides the local table.
#[derive(Clone, Debug, Default)]
pub struct Directory {
    /// `[ldap]`, when configured.
    pub ldap: Option<crate::ldap::Ldap>,
}

impl Directory {
    /// The directory of `[ldap]`, if any.
    pub fn new(config: Option<&crate::config::LdapConfig>) -> Result<Self, String> {
        Ok(Self { ldap: config.map(crate::ldap::Ldap::new).transpose()? })
    }
}

/// Why a user could not sign in.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Unknown user, wrong password or disabled user: one answer for all.
    #[error("the user name or password is wrong")]
    Refused,
    /// The store cannot be read.
    #[error("the user directory is unavailable: {0}")]
    Unavailable(String),
}

fn argon2() -> Argon2<'static> {
    // The constants are within argon2's bounds; `Params::DEFAULT` is the same family.
    let params = Params::new(M_COST, T_COST, P_COST, None).unwrap_or(Params::DEFAULT);
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// A user name tokend accepts: 1 to 64 of `[A-Za-z0-9._@-]`, not starting with `-`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
}

/// The PHC string of `password` under a fresh salt.
pub fn hash_password(password: &str) -> Result<String, String> {
    if password.is_empty() || password.len() > MAX_PASSWORD {
        return Err(format!("a password must be 1 to {MAX_PASSWORD} bytes"));
    }
    let mut salt = [0u8; 16];
    openssl::rand::rand_bytes(&mut salt).map_err(|e| format!("random: {e}"))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
    argon2().hash_password(password.as_bytes(), &salt).map(|h| h.to_string()).map_err(|e| e.to_string())
}

/// Whether `password` matches the PHC string `phc`.
pub fn verify_password(phc: &str, password: &str) -> bool {
    if password.len() > MAX_PASSWORD {
        return false;
    }
    PasswordHash::new(phc).is_ok_and(|h| argon2().verify_password(password.as_bytes(), &h).is_ok())
}

/// A hash no password matches, verified against for unknown users so that
/// they take as long as known ones.
fn decoy() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("tokend decoy password").unwrap_or_default())
}

/// Checks `name` and `password` against the local users, then, for a name
/// that is not a local user (or is a directory user's shadow), against the
/// directory; a directory user's shadow is written before this returns
/// (blocking: argon2id takes tens of milliseconds and the directory up to its
/// timeout; call on a blocking thread).
pub fn authenticate(db: &Db, dir: &Directory, name: &str, password: &str) -> Result<UserRec, LoginError> {
    let rec = if valid_name(name) {
        db.store.read(|txn| txn.get(&db.users, &name.to_owned())).map_err(|e| LoginError::Unavailable(e.to_string()))?
    } else {
        None
    };
    match (rec, &dir.ldap) {
        (Some(rec), _) if rec.password != LDAP_SHADOW => {
            if verify_password(&rec.password, password) && !rec.disabled {
                Ok(rec)
            } else {
                Err(LoginError::Refused)
            }
        }
        (shadow, Some(ldap)) if valid_name(name) => {
            let found = ldap.authenticate_blocking(name, password)?;
            if shadow.as_ref().is_some_and(|s| s.disabled) {
                return Err(LoginError::Refused);
            }
            upsert_shadow(db, name, found)
        }
        _ => {
            let _ = verify_password(decoy(), password);
            Err(LoginError::Refused)
        }
    }
}

/// The first scope `group:<g>` among `scopes` whose group `g` the user (none:
/// a deleted one) is not a member of: such a scope is never granted.
pub fn missing_group<'a>(scopes: &'a [String], user: Option<&UserRec>) -> Option<&'a str> {
    scopes
        .iter()
        .map(String::as_str)
        .find(|s| s.strip_prefix("group:").is_some_and(|g| !user.is_some_and(|u| u.groups.iter().any(|m| m == g))))
}

/// Writes (or refreshes) the shadow of a directory user who just bound. A
/// local user of that name made meanwhile is left alone, and refused here.
fn upsert_shadow(db: &Db, name: &str, found: crate::ldap::DirectoryUser) -> Result<UserRec, LoginError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let key = name.to_owned();
    let written = db.write(|txn| {
        let old = txn.get(&db.users, &key)?;
        let rec = match old {
            Some(old) if old.password != LDAP_SHADOW || old.disabled => return Ok(None),
            old => UserRec {
                password: LDAP_SHADOW.into(),
                name: found.name,
                email: found.email,
                groups: found.groups,
                created: old.map_or(now, |o| o.created),
                password_set: now,
                disabled: false,
            },
        };
        txn.put(&db.users, &key, &rec)?;
        Ok(Some(rec))
    });
    match written {
        Ok(Some(rec)) => Ok(rec),
        Ok(None) => Err(LoginError::Refused),
        Err(e) => Err(LoginError::Unavailable(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_hash_with_argon2id_and_verify() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(verify_password(&h, "correct horse"));
        assert!(!verify_password(&h, "correct horsf"));
        assert!(!verify_password("not a phc string", "x"));
        let again = hash_password("correct horse").unwrap();
        assert_ne!(h, again, "a fresh salt each time");
        assert!(hash_password("").is_err());
        assert!(hash_password(&"x".repeat(MAX_PASSWORD + 1)).is_err());
    }

    #[test]
    fn group_scopes_need_membership() {
        let rec = UserRec {
            password: LDAP_SHADOW.into(),
            name: None,
            email: None,
            groups: vec!["ops".into()],
            created: 1,
            password_set: 1,
            disabled: false,
        };
        let scopes = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(missing_group(&scopes(&["openid", "group:ops"]), Some(&rec)), None);
        assert_eq!(missing_group(&scopes(&["group:ops", "group:dev"]), Some(&rec)), Some("group:dev"));
        assert_eq!(missing_group(&scopes(&["group:ops"]), None), Some("group:ops"));
        assert_eq!(missing_group(&scopes(&["groups", "group:"]), Some(&rec)), Some("group:"));
        assert!(!verify_password(LDAP_SHADOW, ""), "a shadow never verifies locally");
    }

    #[test]
    fn user_names_are_checked() {
        assert!(valid_name("alice"));
        assert!(valid_name("alice.smith@example.net"));
        assert!(!valid_name(""));
        assert!(!valid_name("-rf"));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"a".repeat(65)));
    }

    #[test]
    fn unknown_disabled_and_wrong_are_one_answer() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let rec = UserRec {
            password: hash_password("pw-alice").unwrap(),
            name: Some("Alice".into()),
            email: None,
            groups: vec!["admins".into()],
            created: 1,
            password_set: 1,
            disabled: false,
        };
        db.write(|txn| txn.put(&db.users, &"alice".to_owned(), &rec)).unwrap();
        assert_eq!(
            authenticate(&db, &Directory::default(), "alice", "pw-alice").unwrap().name.as_deref(),
            Some("Alice")
        );
        assert!(matches!(authenticate(&db, &Directory::default(), "alice", "nope"), Err(LoginError::Refused)));
        assert!(matches!(authenticate(&db, &Directory::default(), "bob", "pw-alice"), Err(LoginError::Refused)));
        assert!(matches!(authenticate(&db, &Directory::default(), "bad name", "x"), Err(LoginError::Refused)));
        let mut off = rec;
        off.disabled = true;
        db.write(|txn| txn.put(&db.users, &"alice".to_owned(), &off)).unwrap();
        assert!(matches!(authenticate(&db, &Directory::default(), "alice", "pw-alice"), Err(LoginError::Refused)));
    }

    #[test]
    fn shadows_never_sign_in_locally_and_a_dead_directory_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let shadow = UserRec {
            password: LDAP_SHADOW.into(),
            name: None,
            email: None,
            groups: Vec::new(),
            created: 1,
            password_set: 1,
            disabled: false,
        };
        db.write(|txn| txn.put(&db.users, &"carol".to_owned(), &shadow)).unwrap();
        let none = Directory::default();
        for pw in ["", "!ldap", "x"] {
            assert!(matches!(authenticate(&db, &none, "carol", pw), Err(LoginError::Refused)));
        }
        // A closed port: a directory user is Unavailable, a local one is not affected.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let text = format!("url = \"ldap://127.0.0.1:{closed}\"\nuser_dn = \"uid={{user}},dc=x\"");
        let ldap = Directory::new(Some(&toml::from_str(&text).unwrap())).unwrap();
        assert!(matches!(authenticate(&db, &ldap, "carol", "pw"), Err(LoginError::Unavailable(_))));
        assert!(matches!(authenticate(&db, &ldap, "nobody", "pw"), Err(LoginError::Unavailable(_))));
        assert!(matches!(authenticate(&db, &ldap, "carol", ""), Err(LoginError::Refused)));
        assert!(matches!(authenticate(&db, &ldap, "bad name", "pw"), Err(LoginError::Refused)));
        let local = UserRec { password: hash_password("pw-dave").unwrap(), ..shadow };
        db.write(|txn| txn.put(&db.users, &"dave".to_owned(), &local)).unwrap();
        assert!(authenticate(&db, &ldap, "dave", "pw-dave").is_ok());
        assert!(matches!(authenticate(&db, &ldap, "dave", "pw"), Err(LoginError::Refused)));
    }
}
