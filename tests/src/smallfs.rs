//! A small tmpfs mounted over a directory, to fill up: how the tests put a daemon's
//! state on a full filesystem.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::run;

/// A tmpfs of a given size mounted over a directory (its contents copied in, sparse files
/// kept sparse); unmounted (lazily: a daemon may still hold files) on drop.
pub struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, e.g. "8m") over `dir`. `None` where this
    /// process may not mount (not root, no CAP_SYS_ADMIN): the caller skips its test.
    pub fn over(dir: &Path, size: &str) -> Option<Self> {
        let saved = dir.with_extension("before-tmpfs");
        std::fs::rename(dir, &saved).unwrap();
        std::fs::create_dir(dir).unwrap();
        let (st, _, err) =
            run(Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(dir));
        if !st.success() {
            eprintln!("cannot mount a tmpfs ({err}); skipping");
            std::fs::remove_dir(dir).unwrap();
            std::fs::rename(&saved, dir).unwrap();
            return None;
        }
        let (st, _, err) = run(Command::new("cp").args(["-a", "--sparse=always"]).arg(saved.join(".")).arg(dir));
        assert!(st.success(), "copying into the tmpfs: {err}");
        Some(Self { dir: dir.to_owned() })
    }

    /// Fills the filesystem to the last byte.
    pub fn fill(&self) {
        let (_, _, err) = run(Command::new("dd")
            .arg("if=/dev/zero")
            .arg(format!("of={}", self.dir.join("filler").display()))
            .arg("bs=4k"));
        assert!(err.contains("No space left"), "{err}");
    }

    /// Frees what [`Self::fill`] took.
    pub fn free(&self) {
        std::fs::remove_file(self.dir.join("filler")).unwrap();
    }

    /// Makes the directory read-only: a read-only bind mount over it, so every new
    /// open for writing, create, rename and unlink fails with `EROFS`. (A read-only
    /// remount of the tmpfs itself is refused with `EBUSY` while a daemon holds a file
    /// open for writing; such files, an LMDB's, stay writable through their descriptors.)
    pub fn read_only(&self) {
        let (st, _, err) = run(Command::new("mount").arg("--bind").arg(&self.dir).arg(&self.dir));
        assert!(st.success(), "bind mount: {err}");
        let (st, _, err) = run(Command::new("mount").args(["-o", "remount,bind,ro"]).arg(&self.dir));
        assert!(st.success(), "read-only remount: {err}");
    }

    /// Undoes [`Self::read_only`].
    pub fn writable(&self) {
        let (st, _, err) = run(Command::new("umount").arg(&self.dir));
        assert!(st.success(), "umount of the read-only bind mount: {err}");
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // The read-only bind mount, if any, then the tmpfs.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let at = self.dir.to_string_lossy().into_owned();
        for _ in mounts.lines().filter(|l| l.split(' ').nth(1) == Some(at.as_str())) {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}
