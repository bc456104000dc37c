//! The index's own files (`.wo-index/…`, the pack's output folder) opened
//! through `wo_durable::project`: no link followed out of the project, only
//! regular files, reads capped. The browser build has no file system: there
//! these fail as `std::fs` does (Unsupported).

use std::fs::File;
use std::path::{Path, PathBuf};

/// The most wo reads of one of its cache files (`index.json`, `stat.json`,
/// the token cache, the search sidecar): far above any index of a project
/// wo can index, low enough that a planted file cannot exhaust memory.
pub(crate) const MAX_CACHE_FILE_BYTES: u64 = 4 << 30;

/// `dir` as a root and a name below it: `dir`'s parent is trusted, `dir`
/// itself and `name` are checked.
#[cfg(not(target_arch = "wasm32"))]
fn split(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(last)) => (
            if parent.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                parent.to_path_buf()
            },
            Path::new(last).join(name),
        ),
        _ => (dir.to_path_buf(), PathBuf::from(name)),
    }
}

/// Opens `dir/name` for reading, refusing a link at `dir` or `name` and
/// anything but a regular file of at most `max_bytes`.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn open_in(dir: &Path, name: &str, max_bytes: u64) -> std::io::Result<File> {
    let (root, rel) = split(dir, name);
    wo_durable::project::open_project_file(&root, &rel, max_bytes)
}

/// The bytes of `dir/name` (see [`open_in`]).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn read_in(dir: &Path, name: &str, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let (root, rel) = split(dir, name);
    wo_durable::project::read_project_file(&root, &rel, max_bytes)
}

/// Makes `dir` (and its sub-folder `sub`, when not empty) a real folder,
/// refusing a link at either.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn ensure_dir(dir: &Path, sub: &str) -> std::io::Result<PathBuf> {
    let (root, rel) = split(dir, sub);
    if rel.as_os_str().is_empty() {
        // `dir` is a root (`.`, `/`): trusted, as a project root is.
        return Ok(root);
    }
    wo_durable::project::ensure_project_dir(&root, &rel)
}

/// Creates or truncates `dir/name` for writing, never through a link.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn create_in(dir: &Path, name: &str) -> std::io::Result<File> {
    let (root, rel) = split(dir, name);
    wo_durable::project::create_project_file(&root, &rel)
}

/// Refuses `dir` when it is a link (a missing `dir` is fine).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn check_dir(dir: &Path) -> std::io::Result<()> {
    let (root, rel) = split(dir, "");
    if rel.as_os_str().is_empty() {
        return Ok(());
    }
    wo_durable::project::check_no_links(&root, &rel)
}

#[cfg(target_arch = "wasm32")]
fn unsupported() -> std::io::Error {
    std::io::ErrorKind::Unsupported.into()
}
#[cfg(target_arch = "wasm32")]
pub(crate) fn open_in(_: &Path, _: &str, _: u64) -> std::io::Result<File> {
    Err(unsupported())
}
#[cfg(target_arch = "wasm32")]
pub(crate) fn read_in(_: &Path, _: &str, _: u64) -> std::io::Result<Vec<u8>> {
    Err(unsupported())
}
#[cfg(target_arch = "wasm32")]
pub(crate) fn ensure_dir(_: &Path, _: &str) -> std::io::Result<PathBuf> {
    Err(unsupported())
}
#[cfg(target_arch = "wasm32")]
pub(crate) fn create_in(_: &Path, _: &str) -> std::io::Result<File> {
    Err(unsupported())
}
#[cfg(target_arch = "wasm32")]
pub(crate) fn check_dir(_: &Path) -> std::io::Result<()> {
    Err(unsupported())
}

/// The folder holding `path` (`.` for a bare name).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The bytes of the project file `root/rel` (a chunk's source), refusing a
/// link on the way and anything but a regular file of at most `max_bytes`.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn read_project(root: &Path, rel: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    wo_durable::project::read_project_file(root, rel, max_bytes)
}

#[cfg(target_arch = "wasm32")]
pub(crate) fn read_project(_: &Path, _: &Path, _: u64) -> std::io::Result<Vec<u8>> {
    Err(unsupported())
}

/// The bytes of a file the walk found at `root/rel` (`abs`): by the time it
/// is read it may have been swapped for a link, a FIFO or a device, so it is
/// read through `wo_durable::project` like any project file — no link
/// followed on the way (unless the person asked to follow them: then still
/// only a regular file), never waiting on a FIFO, at most `max_bytes`.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn read_walked(
    root: &Path,
    rel: &str,
    abs: &Path,
    follow_links: bool,
    max_bytes: u64,
) -> std::io::Result<Vec<u8>> {
    if follow_links {
        wo_durable::project::read_regular_file_following_links(abs, max_bytes)
    } else {
        wo_durable::project::read_project_file(root, Path::new(rel), max_bytes)
    }
}

#[cfg(target_arch = "wasm32")]
pub(crate) fn read_walked(
    _: &Path,
    _: &str,
    _: &Path,
    _: bool,
    _: u64,
) -> std::io::Result<Vec<u8>> {
    Err(unsupported())
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::time::{Duration, Instant};

    /// A file the walk found, swapped for a FIFO or a link before it is
    /// read: refused at once, nothing read through it.
    #[test]
    fn a_walked_file_swapped_for_a_fifo_or_a_link_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        std::fs::create_dir_all(root.join("docs")).unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "outside").unwrap();
        std::fs::write(root.join("docs/a.md"), "# A").unwrap();
        let fifo = root.join("docs/fifo.md");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        symlink("/dev/zero", root.join("docs/zero.md")).unwrap();
        symlink(&secret, root.join("docs/linked.md")).unwrap();
        let read =
            |rel: &str, follow: bool| read_walked(&root, rel, &root.join(rel), follow, 1 << 20);

        let start = Instant::now();
        assert_eq!(read("docs/a.md", false).unwrap(), b"# A");
        for follow in [false, true] {
            assert!(read("docs/fifo.md", follow).is_err());
            assert!(read("docs/zero.md", follow).is_err());
        }
        let e = read("docs/linked.md", false).unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        // The person asked to follow links: a regular file behind one is read.
        assert_eq!(read("docs/linked.md", true).unwrap(), b"outside");
        // Grown past the cap since the walk: refused, not read whole.
        std::fs::write(root.join("docs/big.md"), vec![b'x'; 2 << 20]).unwrap();
        assert!(read("docs/big.md", false).is_err());
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
