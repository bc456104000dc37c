//! Reading and writing files inside a project without being led out of it.
//!
//! A project folder may come from anywhere (a clone, an archive), so a name
//! in it is untrusted: a symbolic link at `AGENTS.md` or `.wo-index` would
//! make wo read or write another folder's file, a link to `/dev/zero` would
//! make it read until memory runs out and a FIFO would make it wait for
//! ever. Every project file wo opens goes through here: each component
//! below the project root is checked not to be a link (`lstat`, and
//! `O_NOFOLLOW` on the file itself), only regular files are read (opened
//! with `O_NONBLOCK`, so a FIFO cannot block the open, then checked by
//! `fstat`), reads stop at a size cap, and a path that climbs out of the
//! root (`..`, absolute) is refused. A refusal is an error naming the path
//! and why; nothing is ever followed. The same holds for wo's own files
//! beside the state file (the memory queue and its locks, the recall and
//! embeddings sidecars): locks are opened by [`open_lock_file`], and a file
//! about to be replaced by a rename is first checked by
//! [`check_regular_or_missing`], so that a link or a FIFO put there is reported,
//! never silently swapped for a file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// Why a project path was refused (the `source` of the `io::Error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The path or one of its folders is a symbolic link.
    Symlink,
    /// The path is not a regular file (a FIFO, a device, a socket, a
    /// folder where a file belongs).
    NotRegular,
    /// A folder on the way is not a folder.
    NotADirectory,
    /// The file is larger than the cap.
    TooLarge {
        /// Its size, or at least how much was there when reading stopped.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// The path leaves the project (absolute, or with `..`).
    Outside,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Symlink => f.write_str(
                "is a symbolic link; wo never follows links for project files \
                 (replace it with the file itself)",
            ),
            Refusal::NotRegular => f.write_str("is not a regular file"),
            Refusal::NotADirectory => f.write_str("is not a folder"),
            Refusal::TooLarge { size, limit } => {
                write!(f, "is too large ({size} bytes; the limit is {limit})")
            }
            Refusal::Outside => f.write_str("is outside the project"),
        }
    }
}

/// A refused path: the path and the [`Refusal`].
#[derive(Debug)]
pub struct Refused {
    /// The path refused (the root joined with the part that was refused).
    pub path: PathBuf,
    /// Why.
    pub why: Refusal,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.why)
    }
}

impl std::error::Error for Refused {}

fn refused(path: PathBuf, why: Refusal) -> io::Error {
    let kind = match why {
        Refusal::TooLarge { .. } => io::ErrorKind::InvalidData,
        _ => io::ErrorKind::InvalidInput,
    };
    io::Error::new(kind, Refused { path, why })
}

/// The [`Refused`] inside `e`, when `e` is a refusal made here.
pub fn refusal(e: &io::Error) -> Option<&Refused> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<Refused>())
}

/// An I/O error on `path` with the path in its text (the kind kept, so a
/// caller can still tell `NotFound`).
fn with_path(path: &Path, e: io::Error) -> io::Error {
    if refusal(&e).is_some() {
        return e;
    }
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The normal components of `rel`; an error when it is absolute or climbs
/// out with `..`.
fn components<'a>(root: &Path, rel: &'a Path) -> io::Result<Vec<&'a std::ffi::OsStr>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            _ => return Err(refused(root.join(rel), Refusal::Outside)),
        }
    }
    if out.is_empty() {
        return Err(refused(root.join(rel), Refusal::NotRegular));
    }
    Ok(out)
}

/// Checks that every folder of `rel` below `root` (not the last component)
/// is a real folder, no link. `NotFound` when one is missing.
fn check_folders(root: &Path, names: &[&std::ffi::OsStr]) -> io::Result<PathBuf> {
    let mut path = root.to_path_buf();
    for name in &names[..names.len() - 1] {
        path.push(name);
        let meta = fs::symlink_metadata(&path).map_err(|e| with_path(&path, e))?;
        if meta.file_type().is_symlink() {
            return Err(refused(path, Refusal::Symlink));
        }
        if !meta.is_dir() {
            return Err(refused(path, Refusal::NotADirectory));
        }
    }
    path.push(names[names.len() - 1]);
    Ok(path)
}

/// Opens the regular file `root/rel` for reading, refusing a link at any
/// component below `root`, anything but a regular file and a file over
/// `max_bytes`. `root` itself is trusted (the project folder the person
/// named or wo found). A missing file is `NotFound`.
pub fn open_project_file(root: &Path, rel: &Path, max_bytes: u64) -> io::Result<File> {
    let names = components(root, rel)?;
    let path = check_folders(root, &names)?;
    let file = OpenOptions::new()
        .read(true)
        // No link followed at the file itself; a FIFO opens at once instead
        // of waiting for a writer (and is then refused as not regular).
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(path.clone(), Refusal::Symlink),
            _ => with_path(&path, e),
        })?;
    let meta = file.metadata().map_err(|e| with_path(&path, e))?;
    if !meta.is_file() {
        return Err(refused(path, Refusal::NotRegular));
    }
    if meta.len() > max_bytes {
        return Err(refused(
            path,
            Refusal::TooLarge {
                size: meta.len(),
                limit: max_bytes,
            },
        ));
    }
    Ok(file)
}

/// The bytes of the regular file `root/rel` (see [`open_project_file`]),
/// at most `max_bytes` even if it grows while being read.
pub fn read_project_file(root: &Path, rel: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let file = open_project_file(root, rel, max_bytes)?;
    let size = file.metadata().map_or(0, |m| m.len());
    read_capped(file, &root.join(rel), size, max_bytes)
}

/// [`read_project_file`] as UTF-8 text; `InvalidData` naming the path when
/// it is not.
pub fn read_project_string(root: &Path, rel: &Path, max_bytes: u64) -> io::Result<String> {
    let bytes = read_project_file(root, rel, max_bytes)?;
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: is not UTF-8 text", root.join(rel).display()),
        )
    })
}

/// [`read_project_file`] for a path given whole: its folder is the root
/// (trusted), the file itself is checked.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let (root, name) = split(path)?;
    read_project_file(&root, Path::new(name), max_bytes)
}

/// Opens the existing regular file at `path` (its folder trusted, as in
/// [`read_regular_file`]) for reading and appending: no link followed at
/// the file, nothing but a regular file, never created.
pub fn open_regular_for_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(path.to_path_buf(), Refusal::Symlink),
            _ => with_path(path, e),
        })?;
    if !file.metadata().map_err(|e| with_path(path, e))?.is_file() {
        return Err(refused(path.to_path_buf(), Refusal::NotRegular));
    }
    Ok(file)
}

/// Opens the existing regular file at `path` (its folder trusted, as in
/// [`read_regular_file`]) for reading, with no size cap: for a lock file
/// that is only locked, never read whole. Never created.
pub fn open_regular_file(path: &Path) -> io::Result<File> {
    let (root, name) = split(path)?;
    open_project_file(&root, Path::new(name), u64::MAX)
}

/// Opens the lock file at `path` (its folder trusted, as in
/// [`read_regular_file`]) for reading and writing, creating it (mode 0600)
/// when missing: never through a link (a dangling one would create its
/// target, anywhere), never waiting on a FIFO, nothing but a regular file.
/// The caller locks it.
pub fn open_lock_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(path.to_path_buf(), Refusal::Symlink),
            // A FIFO with no reader, opened for writing without blocking.
            Some(libc::ENXIO) => refused(path.to_path_buf(), Refusal::NotRegular),
            _ => with_path(path, e),
        })?;
    if !file.metadata().map_err(|e| with_path(path, e))?.is_file() {
        return Err(refused(path.to_path_buf(), Refusal::NotRegular));
    }
    Ok(file)
}

/// Refuses the file at `path` when something that is not a regular file is
/// there (a link, a FIFO, a device, a folder), without opening it: for a
/// file about to be replaced by a rename (a cache, a queue), which would
/// otherwise silently put a file in place of what the person put there.
/// A missing file is fine.
pub fn check_regular_or_missing(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(refused(path.to_path_buf(), Refusal::Symlink)),
        Ok(m) if !m.is_file() => Err(refused(path.to_path_buf(), Refusal::NotRegular)),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(with_path(path, e)),
    }
}

/// The bytes of the file at `path`, following links (for a walk the person
/// asked to follow them), but still only a regular file (opened without
/// blocking, so a FIFO is refused at once) and at most `max_bytes`.
pub fn read_regular_file_following_links(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| with_path(path, e))?;
    let meta = file.metadata().map_err(|e| with_path(path, e))?;
    if !meta.is_file() {
        return Err(refused(path.to_path_buf(), Refusal::NotRegular));
    }
    read_capped(file, path, meta.len(), max_bytes)
}

fn read_capped(file: File, path: &Path, size: u64, max_bytes: u64) -> io::Result<Vec<u8>> {
    if size > max_bytes {
        return Err(refused(
            path.to_path_buf(),
            Refusal::TooLarge {
                size,
                limit: max_bytes,
            },
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| with_path(path, e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(refused(
            path.to_path_buf(),
            Refusal::TooLarge {
                size: bytes.len() as u64,
                limit: max_bytes,
            },
        ));
    }
    Ok(bytes)
}

/// [`read_project_string`] for a path given whole (see [`read_regular_file`]).
pub fn read_regular_string(path: &Path, max_bytes: u64) -> io::Result<String> {
    let (root, name) = split(path)?;
    read_project_string(&root, Path::new(name), max_bytes)
}

fn split(path: &Path) -> io::Result<(PathBuf, &std::ffi::OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| refused(path.to_path_buf(), Refusal::NotRegular))?;
    Ok((crate::parent_dir(path), name))
}

/// Makes sure `root/rel` is a real folder inside the project, creating what
/// is missing (mode 0777 less the umask), refusing a link or a non-folder
/// at any component. Returns the folder's path.
pub fn ensure_project_dir(root: &Path, rel: &Path) -> io::Result<PathBuf> {
    let names = components(root, rel)?;
    let mut path = root.to_path_buf();
    for name in names {
        path.push(name);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refused(path, Refusal::Symlink));
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(refused(path, Refusal::NotADirectory)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::create_dir(&path) {
                Ok(()) => {}
                // Made meanwhile by someone else: checked again next time
                // round through `symlink_metadata` by the caller's writes,
                // which never follow a link either.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let m = fs::symlink_metadata(&path).map_err(|e| with_path(&path, e))?;
                    if m.file_type().is_symlink() {
                        return Err(refused(path, Refusal::Symlink));
                    }
                    if !m.is_dir() {
                        return Err(refused(path, Refusal::NotADirectory));
                    }
                }
                Err(e) => return Err(with_path(&path, e)),
            },
            Err(e) => return Err(with_path(&path, e)),
        }
    }
    Ok(path)
}

/// Creates or truncates the regular file `root/rel` for writing, refusing a
/// link at any component (a link at the file itself is never written
/// through) and anything but a regular file there. New files get mode 0666
/// less the umask. Its folders must exist ([`ensure_project_dir`]).
pub fn create_project_file(root: &Path, rel: &Path) -> io::Result<File> {
    let names = components(root, rel)?;
    let path = check_folders(root, &names)?;
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(path.clone(), Refusal::Symlink),
            // A FIFO with no reader, opened for writing without blocking.
            Some(libc::ENXIO) => refused(path.clone(), Refusal::NotRegular),
            _ => with_path(&path, e),
        })?;
    let meta = file.metadata().map_err(|e| with_path(&path, e))?;
    if !meta.is_file() {
        return Err(refused(path, Refusal::NotRegular));
    }
    // Truncated only once known to be a regular file of ours.
    file.set_len(0).map_err(|e| with_path(&path, e))?;
    Ok(file)
}

/// Refuses `root/rel` when it or one of its folders below `root` is a link
/// (or a folder on the way is not a folder); a missing part is fine (the
/// caller will create it). For an output folder checked before anything is
/// written into it.
pub fn check_no_links(root: &Path, rel: &Path) -> io::Result<()> {
    let names = components(root, rel)?;
    let mut path = root.to_path_buf();
    let last = names.len() - 1;
    for (i, name) in names.into_iter().enumerate() {
        path.push(name);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => return Err(refused(path, Refusal::Symlink)),
            Ok(m) if i < last && !m.is_dir() => {
                return Err(refused(path, Refusal::NotADirectory));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(with_path(&path, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::symlink;
    use std::time::{Duration, Instant};

    fn project() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        let outside = dir.path().join("outside");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret"), b"the secret").unwrap();
        (dir, root, outside)
    }

    fn why(e: &io::Error) -> Refusal {
        refusal(e)
            .unwrap_or_else(|| panic!("not a refusal: {e}"))
            .why
            .clone()
    }

    #[test]
    fn reads_a_regular_file_within_the_cap() {
        let (_d, root, _o) = project();
        fs::create_dir(root.join("prompts")).unwrap();
        fs::write(root.join("prompts/interpreter.md"), "hello").unwrap();
        let text = read_project_string(&root, Path::new("prompts/interpreter.md"), 5).unwrap();
        assert_eq!(text, "hello");
        let e = read_project_file(&root, Path::new("prompts/interpreter.md"), 4).unwrap_err();
        assert_eq!(why(&e), Refusal::TooLarge { size: 5, limit: 4 });
        assert!(
            e.to_string().contains("interpreter.md: is too large"),
            "{e}"
        );
        let e = read_project_file(&root, Path::new("missing.md"), 4).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("missing.md"), "{e}");
    }

    #[test]
    fn a_link_at_the_file_or_a_folder_is_refused_never_followed() {
        let (_d, root, outside) = project();
        symlink(outside.join("secret"), root.join("AGENTS.md")).unwrap();
        let e = read_regular_string(&root.join("AGENTS.md"), 1 << 20).unwrap_err();
        assert_eq!(why(&e), Refusal::Symlink);
        assert!(!e.to_string().contains("the secret"));
        assert!(
            e.to_string().contains("AGENTS.md: is a symbolic link"),
            "{e}"
        );
        // A link to a folder on the way.
        symlink(&outside, root.join("prompts")).unwrap();
        let e = read_project_file(&root, Path::new("prompts/secret"), 1 << 20).unwrap_err();
        assert_eq!(why(&e), Refusal::Symlink);
        assert!(e.to_string().contains("prompts: is a symbolic link"), "{e}");
        // Nor written through.
        let e = create_project_file(&root, Path::new("prompts/secret")).unwrap_err();
        assert_eq!(why(&e), Refusal::Symlink);
        let e = create_project_file(&root, Path::new("AGENTS.md")).unwrap_err();
        assert_eq!(why(&e), Refusal::Symlink);
        assert_eq!(fs::read(outside.join("secret")).unwrap(), b"the secret");
        // Nor made a folder through.
        let e = ensure_project_dir(&root, Path::new("prompts/sub")).unwrap_err();
        assert_eq!(why(&e), Refusal::Symlink);
        assert!(!outside.join("sub").exists());
        let e = check_no_links(&root, Path::new("prompts")).unwrap_err();
        assert_eq!(why(&e), Refusal::Symlink);
    }

    #[test]
    fn devices_and_fifos_are_refused_at_once() {
        let (_d, root, _o) = project();
        symlink("/dev/zero", root.join("zero")).unwrap();
        let e = read_project_file(&root, Path::new("zero"), u64::MAX).unwrap_err();
        assert_eq!(why(&e), Refusal::Symlink);
        // /dev itself as the root: the device is no regular file.
        let e = read_regular_file(Path::new("/dev/zero"), u64::MAX).unwrap_err();
        assert_eq!(why(&e), Refusal::NotRegular);
        let fifo = root.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let start = Instant::now();
        let e = read_project_file(&root, Path::new("fifo"), 10).unwrap_err();
        assert_eq!(why(&e), Refusal::NotRegular);
        let e = create_project_file(&root, Path::new("fifo")).unwrap_err();
        assert_eq!(why(&e), Refusal::NotRegular);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn paths_leaving_the_project_are_refused() {
        let (_d, root, _o) = project();
        for rel in ["../outside/secret", "/etc/passwd", "a/../../outside/secret"] {
            let e = read_project_file(&root, Path::new(rel), 1 << 20).unwrap_err();
            assert_eq!(why(&e), Refusal::Outside, "{rel}");
        }
    }

    #[test]
    fn folders_are_made_and_files_written_inside() {
        let (_d, root, _o) = project();
        let dir = ensure_project_dir(&root, Path::new(".wo-pack/chunks")).unwrap();
        assert!(dir.is_dir());
        let mut f = create_project_file(&root, Path::new(".wo-pack/chunks/c1.md")).unwrap();
        f.write_all(b"one two").unwrap();
        let mut f = create_project_file(&root, Path::new(".wo-pack/chunks/c1.md")).unwrap();
        f.write_all(b"3").unwrap();
        assert_eq!(fs::read(dir.join("c1.md")).unwrap(), b"3");
        fs::write(root.join("file"), b"").unwrap();
        let e = ensure_project_dir(&root, Path::new("file/x")).unwrap_err();
        assert_eq!(why(&e), Refusal::NotADirectory);
        check_no_links(&root, Path::new(".wo-pack/missing/deeper")).unwrap();
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_lock_file_is_made_private_and_only_ever_a_regular_file() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, root, outside) = project();
        let lock = root.join(".llm.json.memory-jobs.lock");
        let f = open_lock_file(&lock).unwrap();
        f.try_lock().unwrap();
        let mode = fs::metadata(&lock).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Opened again (an existing lock), and found held.
        let again = open_lock_file(&lock).unwrap();
        assert!(again.try_lock().is_err());
        drop(f);
        assert!(open_regular_file(&lock).unwrap().try_lock().is_ok());

        let start = Instant::now();
        // A dangling link: its target is never created.
        let dangling = root.join("dangling.lock");
        symlink(outside.join("made-by-wo"), &dangling).unwrap();
        let e = open_lock_file(&dangling).unwrap_err();
        assert_eq!(why(&e), Refusal::Symlink);
        assert!(
            e.to_string().contains("dangling.lock: is a symbolic link"),
            "{e}"
        );
        assert!(!outside.join("made-by-wo").exists());
        // A link to a real file: never opened, its bytes unchanged.
        let linked = root.join("linked.lock");
        symlink(outside.join("secret"), &linked).unwrap();
        assert_eq!(why(&open_lock_file(&linked).unwrap_err()), Refusal::Symlink);
        assert_eq!(
            why(&open_regular_file(&linked).unwrap_err()),
            Refusal::Symlink
        );
        // A link to a device, a FIFO (no reader: the open must not wait).
        let zero = root.join("zero.lock");
        symlink("/dev/zero", &zero).unwrap();
        assert_eq!(why(&open_lock_file(&zero).unwrap_err()), Refusal::Symlink);
        let fifo = root.join("fifo.lock");
        mkfifo(&fifo);
        assert_eq!(
            why(&open_lock_file(&fifo).unwrap_err()),
            Refusal::NotRegular
        );
        assert_eq!(
            why(&open_regular_file(&fifo).unwrap_err()),
            Refusal::NotRegular
        );
        // A folder.
        fs::create_dir(root.join("dir.lock")).unwrap();
        assert!(open_lock_file(&root.join("dir.lock")).is_err());
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(fs::read(outside.join("secret")).unwrap(), b"the secret");
        let e = open_regular_file(&root.join("missing.lock")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(!root.join("missing.lock").exists());
    }

    #[test]
    fn only_a_regular_file_or_nothing_may_be_replaced() {
        let (_d, root, outside) = project();
        check_regular_or_missing(&root.join("missing")).unwrap();
        fs::write(root.join("cache"), b"x").unwrap();
        check_regular_or_missing(&root.join("cache")).unwrap();
        symlink(outside.join("secret"), root.join("linked")).unwrap();
        symlink(outside.join("nothing"), root.join("dangling")).unwrap();
        symlink("/dev/zero", root.join("zero")).unwrap();
        for name in ["linked", "dangling", "zero"] {
            let e = check_regular_or_missing(&root.join(name)).unwrap_err();
            assert_eq!(why(&e), Refusal::Symlink, "{name}");
            assert!(e.to_string().contains(name), "{e}");
        }
        mkfifo(&root.join("fifo"));
        fs::create_dir(root.join("dir")).unwrap();
        for name in ["fifo", "dir"] {
            let e = check_regular_or_missing(&root.join(name)).unwrap_err();
            assert_eq!(why(&e), Refusal::NotRegular, "{name}");
        }
    }

    #[test]
    fn following_links_still_reads_only_a_regular_file_within_the_cap() {
        let (_d, root, outside) = project();
        symlink(outside.join("secret"), root.join("linked")).unwrap();
        assert_eq!(
            read_regular_file_following_links(&root.join("linked"), 100).unwrap(),
            b"the secret"
        );
        let e = read_regular_file_following_links(&root.join("linked"), 3).unwrap_err();
        assert_eq!(why(&e), Refusal::TooLarge { size: 10, limit: 3 });
        let start = Instant::now();
        symlink("/dev/zero", root.join("zero")).unwrap();
        let e = read_regular_file_following_links(&root.join("zero"), u64::MAX).unwrap_err();
        assert_eq!(why(&e), Refusal::NotRegular);
        mkfifo(&root.join("fifo"));
        let e = read_regular_file_following_links(&root.join("fifo"), 10).unwrap_err();
        assert_eq!(why(&e), Refusal::NotRegular);
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
