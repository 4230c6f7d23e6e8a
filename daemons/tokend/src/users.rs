//! Local users: names, and passwords kept as argon2id hashes (RFC 9106).
//!
//! People choose their passwords, so they are hashed with a slow,
//! memory-hard KDF: argon2id with 19 MiB, 2 passes, 1 lane (the OWASP
//! minimum), a 16-byte random salt, all recorded in the PHC string so the
//! parameters can be raised later without invalidating old hashes.
//! Verification of an unknown user still runs one hash, so timing does not
//! tell which names exist.

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

/// Checks `name` and `password` against the local users (blocking: argon2id
/// takes tens of milliseconds; call on a blocking thread).
pub fn authenticate(db: &Db, name: &str, password: &str) -> Result<UserRec, LoginError> {
    let rec = if valid_name(name) {
        db.store.read(|txn| txn.get(&db.users, &name.to_owned())).map_err(|e| LoginError::Unavailable(e.to_string()))?
    } else {
        None
    };
    match rec {
        Some(rec) if verify_password(&rec.password, password) && !rec.disabled => Ok(rec),
        Some(_) => Err(LoginError::Refused),
        None => {
            let _ = verify_password(decoy(), password);
            Err(LoginError::Refused)
        }
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
        assert_eq!(authenticate(&db, "alice", "pw-alice").unwrap().name.as_deref(), Some("Alice"));
        assert!(matches!(authenticate(&db, "alice", "nope"), Err(LoginError::Refused)));
        assert!(matches!(authenticate(&db, "bob", "pw-alice"), Err(LoginError::Refused)));
        assert!(matches!(authenticate(&db, "bad name", "x"), Err(LoginError::Refused)));
        let mut off = rec;
        off.disabled = true;
        db.write(|txn| txn.put(&db.users, &"alice".to_owned(), &off)).unwrap();
        assert!(matches!(authenticate(&db, "alice", "pw-alice"), Err(LoginError::Refused)));
    }
}
