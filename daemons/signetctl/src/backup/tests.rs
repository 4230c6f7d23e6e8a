//! Backup and restore on real LMDB stores and files in temporary directories
//! (the daemons themselves: tests/tests/backup.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::manifest::{self, Kind};
use super::plan::{holds_private_key, plan, tree_path};
use super::restore::{map_path, rewrite_config, PathMap, RestoreArgs};
use super::{BackupArgs, BackupError};
use crate::output::Printer;

const KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n";
const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n";

/// A small appliance on disk: signd (a store, a key file, an issuer
/// certificate), acmed (a store, a TLS certificate and key, a bundle that
/// hides a key), ctlogd (a store, a local log with tiles and a checkpoint,
/// and an S3 log). Configs in `<root>/etc`.
fn appliance(root: &Path) -> PathBuf {
    let etc = root.join("etc");
    std::fs::create_dir_all(etc.join("ca")).unwrap();
    let w = |p: &Path, s: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    for (name, dir) in [("signd", "signd/db"), ("acmed", "acmed"), ("ctlogd", "ctlogd")] {
        let store =
            signet_store::Store::open(&root.join("state").join(dir), signet_store::StoreOptions::new(name, 2)).unwrap();
        let t = store.table::<String, String>("t").unwrap();
        store.write(|txn| txn.put(&t, &"k".to_string(), &format!("{name} data"))).unwrap();
    }
    w(&root.join("state/signd/keys/ca.pem"), KEY_PEM);
    std::fs::set_permissions(root.join("state/signd/keys/ca.pem"), std::fs::Permissions::from_mode(0o600)).unwrap();
    w(&root.join("state/signd/keys/new.pem.tmp"), KEY_PEM);
    w(&etc.join("ca/issuing.pem"), CERT_PEM);
    w(&etc.join("acmed/tls.pem"), CERT_PEM);
    w(&etc.join("acmed/tls.key"), KEY_PEM);
    w(&etc.join("acmed/bundle.pem"), &format!("{CERT_PEM}{KEY_PEM}"));
    w(&root.join("state/tiles/tile/0/000.p/3"), "hashes");
    w(&root.join("state/tiles/tile/data/000.p/3"), "entries");
    w(&root.join("state/tiles/checkpoint"), "a checkpoint");
    w(&root.join("state/tiles/tile/0/.tmp-1-2"), "half written");
    let r = root.display();
    w(
        &etc.join("signd.toml"),
        &format!(
            "# signd\nsocket = \"{r}/run/signd.sock\"\nstate_dir = \"{r}/state/signd\"\n\
             [issuers.demo]\nkey = \"ca\"\ncertificate = \"{r}/etc/ca/issuing.pem\"\n"
        ),
    );
    w(
        &etc.join("acmed.toml"),
        &format!(
            "state_dir = '{r}/state/acmed'\ntls_certificate = \"{r}/etc/acmed/tls.pem\"\n\
             tls_key = \"{r}/etc/acmed/tls.key\"\nchain = \"{r}/etc/acmed/bundle.pem\"\n\
             issuer = \"demo\" # not a path\nmissing = \"{r}/etc/acmed/gone.pem\"\n"
        ),
    );
    w(
        &etc.join("ctlogd.toml"),
        &format!(
            "state_dir = \"{r}/state/ctlogd\"\nroots = [\"{r}/etc/ca/issuing.pem\"]\n\
             [logs.local]\nstorage = {{ dir = \"{r}/state/tiles\" }}\n\
             [logs.remote]\nstorage = {{ s3 = {{ endpoint = \"https://s3.test\", bucket = \"ct\", \
             access_key_id = \"a\", secret_access_key_file = \"{r}/etc/s3.secret\", prefix = \"r\" }} }}\n"
        ),
    );
    w(&etc.join("s3.secret"), "hunter2");
    etc
}

#[test]
fn plans_follow_the_configs_and_leave_private_material_out_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let etc = appliance(dir.path());
    let r = dir.path();
    assert!(plan("tokend", &etc, false).unwrap().is_none(), "not configured");

    let signd = plan("signd", &etc, false).unwrap().unwrap();
    assert_eq!(signd.store, r.join("state/signd/db"));
    assert_eq!(signd.key_dir, None);
    assert_eq!(signd.left_out.len(), 1);
    assert_eq!(signd.left_out[0].path, r.join("state/signd/keys"));
    assert_eq!(signd.files.len(), 1, "{:?}", signd.files);
    assert_eq!((signd.files[0].key.as_str(), signd.files[0].private), ("issuers.demo.certificate", false));
    assert_eq!(plan("signd", &etc, true).unwrap().unwrap().key_dir, Some(r.join("state/signd/keys")));

    let acmed = plan("acmed", &etc, false).unwrap().unwrap();
    let files: Vec<_> = acmed.files.iter().map(|f| f.path.clone()).collect();
    assert_eq!(files, vec![r.join("etc/acmed/tls.pem")]);
    let left: Vec<_> = acmed.left_out.iter().map(|l| l.path.clone()).collect();
    // chain: named like a public file, holding a key all the same.
    assert!(left.contains(&r.join("etc/acmed/tls.key")) && left.contains(&r.join("etc/acmed/bundle.pem")), "{left:?}");
    assert!(acmed.notes.iter().any(|n| n.contains("gone.pem")), "{:?}", acmed.notes);
    let acmed = plan("acmed", &etc, true).unwrap().unwrap();
    assert_eq!(acmed.files.iter().filter(|f| f.private).count(), 2);

    let ctlogd = plan("ctlogd", &etc, false).unwrap().unwrap();
    assert_eq!(ctlogd.tile_dirs, vec![("local".to_string(), r.join("state/tiles"))]);
    assert!(ctlogd.notes.iter().any(|n| n.contains("log remote") && n.contains("bucket ct")), "{:?}", ctlogd.notes);
    assert!(ctlogd.left_out.iter().any(|l| l.path == r.join("etc/s3.secret")), "{:?}", ctlogd.left_out);
    // A shard added through ctlogd's admin interface: its tiles under state_dir/shards.
    std::fs::create_dir_all(r.join("state/ctlogd/shards/2027h1/tile")).unwrap();
    let ctlogd = plan("ctlogd", &etc, false).unwrap().unwrap();
    assert_eq!(
        ctlogd.tile_dirs,
        vec![
            ("local".to_string(), r.join("state/tiles")),
            ("2027h1".to_string(), r.join("state/ctlogd/shards/2027h1"))
        ]
    );

    // Keys on an NSS token: the flag is refused, saying what to do instead.
    let toml = std::fs::read_to_string(etc.join("signd.toml")).unwrap();
    std::fs::write(etc.join("signd.toml"), format!("{toml}[nss]\ndatabase = \"sql:/var/lib/nssdb\"\n")).unwrap();
    match plan("signd", &etc, true) {
        Err(BackupError::Usage(m)) => assert!(m.contains("NSS") && m.contains("token's own tools"), "{m}"),
        other => panic!("{other:?}"),
    }
    let signd = plan("signd", &etc, false).unwrap().unwrap();
    assert!(signd.notes.iter().any(|n| n.contains("sql:/var/lib/nssdb")), "{:?}", signd.notes);

    assert!(tree_path(Path::new("/a/../b")).is_err());
    assert_eq!(tree_path(Path::new("/var/lib/x")).unwrap(), PathBuf::from("tree/var/lib/x"));
    assert!(holds_private_key(b"x\n-----BEGIN EC PRIVATE KEY-----\n") && !holds_private_key(CERT_PEM.as_bytes()));
}

#[test]
fn paths_map_by_the_longest_prefix_and_configs_keep_their_text() {
    let maps = vec![
        PathMap { old: "/srv/old".into(), new: "/srv/new".into() },
        PathMap { old: "/srv/old/ca".into(), new: "/etc/ca".into() },
    ];
    assert_eq!(map_path(Path::new("/srv/old/db/data.mdb"), &maps), PathBuf::from("/srv/new/db/data.mdb"));
    assert_eq!(map_path(Path::new("/srv/old/ca/root.pem"), &maps), PathBuf::from("/etc/ca/root.pem"));
    assert_eq!(map_path(Path::new("/srv/older/x"), &maps), PathBuf::from("/srv/older/x"));
    assert_eq!(map_path(Path::new("/srv/old"), &maps), PathBuf::from("/srv/new"));

    let text =
        "# the state\nstate_dir = \"/srv/old/db\" # LMDB\nname = \"/srv/older\"\nroots = ['/srv/old/ca/root.pem']\n\
                [nss]\ndatabase = \"sql:/srv/old/nss\"\n";
    let out = rewrite_config(Path::new("x.toml"), text, &maps).unwrap();
    assert_eq!(
        out,
        "# the state\nstate_dir = \"/srv/new/db\" # LMDB\nname = \"/srv/older\"\nroots = ['/etc/ca/root.pem']\n\
         [nss]\ndatabase = \"sql:/srv/new/nss\"\n"
    );
    // Written with an escape: the text cannot be patched, the config is written afresh.
    let out = rewrite_config(Path::new("x.toml"), "state_dir = \"/srv/old/\\u0064b\"\n", &maps).unwrap();
    let t: toml::Table = toml::from_str(&out).unwrap();
    assert_eq!(t["state_dir"].as_str(), Some("/srv/new/db"));
    assert!(out.starts_with("# Paths mapped by signetctl restore"), "{out}");
    // Nothing to map: unchanged.
    assert_eq!(rewrite_config(Path::new("x.toml"), text, &[]).unwrap(), text);
}

fn backup_args(dir: &Path, etc: &Path, keys: bool) -> BackupArgs {
    BackupArgs { dir: dir.to_path_buf(), config_dir: etc.to_path_buf(), include_private_keys: keys }
}

fn restore_args(dir: &Path, maps: Vec<PathMap>) -> RestoreArgs {
    RestoreArgs { dir: dir.to_path_buf(), maps, verify_only: false }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_backup_restores_under_a_new_root_and_refuses_to_write_over_anything() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old");
    let etc = appliance(&old);
    let out = Printer { json: true };

    // Without private keys: none in the tree, and the manifest says so.
    let plain = dir.path().join("plain");
    super::backup(&backup_args(&plain, &etc, false), &out).map_err(|f| f.message).unwrap();
    let m = manifest::read_and_verify(&plain).unwrap();
    assert!(!m.private_keys);
    assert!(m.files.iter().all(|f| f.kind != Kind::PrivateKey));
    for f in files_under(&plain) {
        assert!(!holds_private_key(&std::fs::read(&f).unwrap()), "{} holds a private key", f.display());
    }
    assert!(!plain.join(tree_path(&old.join("state/signd/keys")).unwrap()).exists());
    // The checkpoint and ctlogd's temporary files are not taken; tiles are.
    let kinds = |k: Kind| m.files.iter().filter(|f| f.kind == k).map(|f| f.original.clone()).collect::<Vec<_>>();
    let mut tiles = kinds(Kind::CtTile);
    tiles.sort();
    assert_eq!(tiles, vec![old.join("state/tiles/tile/0/000.p/3"), old.join("state/tiles/tile/data/000.p/3")]);
    assert_eq!(kinds(Kind::Lmdb).len(), 3);
    assert_eq!(kinds(Kind::Config).len(), 3);
    let tokend = m.daemons.iter().find(|d| d.name == "tokend").unwrap();
    assert!(tokend.config.is_none() && tokend.notes[0].contains("not configured"), "{tokend:?}");
    // An existing, non-empty target is refused.
    let again = super::backup(&backup_args(&plain, &etc, false), &out).err().unwrap();
    assert_eq!(again.code, 2, "{}", again.message);

    // With them: signd's key file (0600; not the .tmp one), acmed's TLS key.
    let full = dir.path().join("full");
    super::backup(&backup_args(&full, &etc, true), &out).map_err(|f| f.message).unwrap();
    let m = manifest::read_and_verify(&full).unwrap();
    assert!(m.private_keys);
    let private: Vec<_> = m.files.iter().filter(|f| f.kind == Kind::PrivateKey).map(|f| f.original.clone()).collect();
    assert!(private.contains(&old.join("state/signd/keys/ca.pem")), "{private:?}");
    assert!(!private.iter().any(|p| p.to_string_lossy().ends_with(".tmp")), "{private:?}");
    let key = m.files.iter().find(|f| f.original == old.join("state/signd/keys/ca.pem")).unwrap();
    assert_eq!(key.mode, 0o600);
    assert_eq!(std::fs::metadata(full.join(&key.path)).unwrap().permissions().mode() & 0o777, 0o600);

    // Restore under a new root: stores open with their data, configs point there.
    let new = dir.path().join("new");
    let maps = vec![PathMap { old: old.clone(), new: new.clone() }];
    super::restore(&restore_args(&full, maps.clone()), &out).map_err(|f| f.message).unwrap();
    let store = signet_store::Store::open(&new.join("state/signd/db"), signet_store::StoreOptions::new("signd", 2))
        .expect("restored store");
    let t = store.table::<String, String>("t").unwrap();
    assert_eq!(store.read(|txn| txn.get(&t, &"k".to_string())).unwrap().as_deref(), Some("signd data"));
    drop(store);
    let signd_toml = std::fs::read_to_string(new.join("etc/signd.toml")).unwrap();
    assert!(signd_toml.starts_with("# signd\n") && signd_toml.contains(&format!("\"{}/state/signd\"", new.display())));
    assert!(!signd_toml.contains(&old.display().to_string()), "{signd_toml}");
    assert_eq!(std::fs::read_to_string(new.join("state/signd/keys/ca.pem")).unwrap(), KEY_PEM);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&new.join("state/signd/keys/ca.pem")), 0o600);
    assert_eq!(mode(&new.join("state/signd/keys")), mode(&old.join("state/signd/keys")));
    assert_eq!(std::fs::read(new.join("state/tiles/tile/0/000.p/3")).unwrap(), b"hashes");

    // Again into the same place: refused (exit 2), nothing changed.
    let before = std::fs::read(new.join("state/acmed/data.mdb")).unwrap();
    let e = super::restore(&restore_args(&full, maps.clone()), &out).err().unwrap();
    assert_eq!(e.code, 2, "{}", e.message);
    assert!(e.message.contains("is not empty"), "{}", e.message);
    assert_eq!(std::fs::read(new.join("state/acmed/data.mdb")).unwrap(), before);

    // A flipped byte in a store copy: refused naming the file, before anything is written.
    let lmdb = m.files.iter().find(|f| f.kind == Kind::Lmdb && f.daemons == ["acmed"]).unwrap();
    let copy = full.join(&lmdb.path);
    let mut bytes = std::fs::read(&copy).unwrap();
    bytes[5000] ^= 0x40;
    std::fs::write(&copy, &bytes).unwrap();
    let fresh = dir.path().join("fresh");
    let e = super::restore(&restore_args(&full, vec![PathMap { old, new: fresh.clone() }]), &out).err().unwrap();
    assert_eq!(e.code, 1, "{}", e.message);
    assert!(e.message.contains(&copy.display().to_string()) && e.message.contains("damaged"), "{}", e.message);
    assert!(!fresh.exists(), "restore wrote before it had checked the backup");

    // No manifest: not a (finished) backup.
    std::fs::remove_file(full.join(manifest::MANIFEST)).unwrap();
    let e = super::restore(&restore_args(&full, vec![]), &out).err().unwrap();
    assert!(e.code == 1 && e.message.contains("did not finish"), "{}", e.message);
}
