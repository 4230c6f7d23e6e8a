//! A small filesystem mounted over a directory, to fill up or to make read-only: how the
//! tests put a daemon's state on a full disk, or on a disk that fails.
//!
//! Two kinds: a tmpfs ([`SmallFs::over`]), and an ext4 image on a loop device mounted with
//! `errors=remount-ro` ([`SmallFs::ext4_over`]), which [`SmallFs::fail`] makes read-only
//! the way a disk error does: every write, through descriptors already open too (an
//! LMDB's), fails with `EROFS` until the filesystem is checked and mounted again
//! ([`SmallFs::repair`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::run;

/// A tmpfs of a given size mounted over a directory (its contents copied in, sparse files
/// kept sparse); unmounted (lazily: a daemon may still hold files) on drop.
pub struct SmallFs {
    dir: PathBuf,
    /// The ext4 image, for [`SmallFs::ext4_over`].
    image: Option<PathBuf>,
}

impl SmallFs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, e.g. "8m") over `dir`. `None` where this
    /// process may not mount (not root, no CAP_SYS_ADMIN): the caller skips its test.
    pub fn over(dir: &Path, size: &str) -> Option<Self> {
        let fs = Self { dir: dir.to_owned(), image: None };
        fs.mount_over_contents("a tmpfs", || {
            let (st, _, err) =
                run(Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(dir));
            if st.success() {
                Ok(())
            } else {
                Err(err)
            }
        })
        .then_some(fs)
    }

    /// Mounts a new ext4 filesystem of `size` (`truncate -s`, e.g. "16M"), an image file
    /// beside `dir` on a loop device, over `dir`, with `errors=remount-ro`, its contents
    /// copied in. `None` where this process may not mount or has no loop device: the
    /// caller skips its test.
    pub fn ext4_over(dir: &Path, size: &str) -> Option<Self> {
        let image = dir.with_extension("ext4");
        let (st, _, err) = run(Command::new("truncate").args(["-s", size]).arg(&image));
        assert!(st.success(), "truncate: {err}");
        let (st, _, err) = run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image));
        assert!(st.success(), "mkfs.ext4: {err}");
        let fs = Self { dir: dir.to_owned(), image: Some(image) };
        fs.mount_over_contents("an ext4 image on a loop device", || fs.mount()).then_some(fs)
    }

    /// Sets `dir`'s contents aside, mounts (`mount`) over the emptied `dir` and copies the
    /// contents in (sparse files kept sparse). When the mount fails, puts `dir` back as it
    /// was, says why the test is skipped, and returns false.
    fn mount_over_contents(&self, what: &str, mount: impl FnOnce() -> Result<(), String>) -> bool {
        let saved = self.dir.with_extension("before-mount");
        std::fs::rename(&self.dir, &saved).unwrap();
        std::fs::create_dir(&self.dir).unwrap();
        if let Err(err) = mount() {
            eprintln!("cannot mount {what} ({err}); skipping");
            std::fs::remove_dir(&self.dir).unwrap();
            std::fs::rename(&saved, &self.dir).unwrap();
            return false;
        }
        let (st, _, err) = run(Command::new("cp").args(["-a", "--sparse=always"]).arg(saved.join(".")).arg(&self.dir));
        assert!(st.success(), "copying into {what}: {err}");
        // On the disk before the test goes on: a filesystem that fails drops what is still
        // only in the page cache, and the copy is not the daemon's to lose.
        let (st, _, err) = run(Command::new("sync").arg("-f").arg(&self.dir));
        assert!(st.success(), "sync -f: {err}");
        true
    }

    fn mount(&self) -> Result<(), String> {
        let image = self.image.as_ref().unwrap();
        let (st, _, err) =
            run(Command::new("mount").args(["-t", "ext4", "-o", "loop,errors=remount-ro"]).arg(image).arg(&self.dir));
        if st.success() {
            Ok(())
        } else {
            Err(err)
        }
    }

    /// The ext4 filesystem fails as on a disk error (`/sys/fs/ext4/<dev>/trigger_fs_error`)
    /// and, mounted with `errors=remount-ro`, turns read-only at once: from now on every
    /// write to it fails with `EROFS`; reads go on.
    pub fn fail(&self) {
        let (st, device, err) = run(Command::new("findmnt").args(["-n", "-o", "SOURCE"]).arg(&self.dir));
        assert!(st.success() && self.image.is_some(), "not an ext4 SmallFs: {err}");
        let name = Path::new(device.trim()).file_name().unwrap().to_owned();
        std::fs::write(Path::new("/sys/fs/ext4").join(name).join("trigger_fs_error"), "1").unwrap();
        let probe = self.dir.join(".write-probe");
        let e = std::fs::write(&probe, b"x").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ReadOnlyFilesystem, "{e}");
    }

    /// After [`Self::fail`], with the daemon on it stopped: unmounts the filesystem, checks
    /// and repairs it (`e2fsck -fy`) and mounts it again, writable; what was written before
    /// the failure is there.
    pub fn repair(&self) {
        let image = self.image.as_ref().expect("an ext4 SmallFs");
        let (st, _, err) = run(Command::new("umount").arg(&self.dir));
        assert!(st.success(), "umount (is a daemon still running on it?): {err}");
        // e2fsck exits 1 when it fixed something (the error the failure recorded).
        let (st, out, err) = run(Command::new("e2fsck").args(["-f", "-y"]).arg(image));
        assert!(matches!(st.code(), Some(0 | 1)), "e2fsck: {st}: {out}{err}");
        self.mount().unwrap();
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
        // The read-only bind mount, if any, then the tmpfs or the ext4 filesystem.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let at = self.dir.to_string_lossy().into_owned();
        for _ in mounts.lines().filter(|l| l.split(' ').nth(1) == Some(at.as_str())) {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}
