//! The sign-in of a local server across restarts (product §6):
//! one random token per project, kept in the user's data directory
//! (never in the project or in `llm.json`), so the link `wo serve` printed
//! yesterday and the cookie it set keep working after a restart.
//!
//! The token lives at `DATA_DIR/serve-tokens/<sha256 of the canonical
//! state-file path>`: a regular file, mode 0600, in a 0700 directory,
//! holding the token and a newline. A file that others could read, that is
//! not a regular file of ours, or that holds no well-formed token is not
//! trusted: a fresh token replaces it and the caller is told why. `wo serve
//! --new-token` rotates it (every old link and cookie stops working).
//!
//! The session cookie's name carries a short id derived from the same path
//! ([`cookie_id`]), not a random one: a restart of the same project keeps
//! the name, so the browser's cookie still matches, while another
//! project's server later on the same port gets another name and cannot
//! overwrite it.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use wo_durable as durable;

/// A project's token, as [`load_or_create`] found or made it.
#[derive(Debug)]
pub struct ProjectToken {
    /// The token (43 base64url characters).
    pub token: String,
    /// The file it is kept in.
    pub file: PathBuf,
    /// What happened: kept, created, rotated on request, or replaced.
    pub origin: TokenOrigin,
}

/// How the token came to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenOrigin {
    /// The token of an earlier start, reused: old links still work.
    Kept,
    /// No token was kept for this project: a new one.
    Created,
    /// `--new-token`: a new one; earlier links and cookies are dead.
    Rotated,
    /// The kept file was not trusted (the reason): a new one replaced it.
    Replaced(String),
}

/// Why no token could be kept.
#[derive(Debug, thiserror::Error)]
#[error("cannot keep the sign-in token in {}: {source}\nhint: set XDG_DATA_HOME to a directory you own, or WO_SERVE_TOKEN to a token of your own", path.display())]
pub struct TokenError {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// The operating system's error.
    pub source: io::Error,
}

/// The directory holding the tokens under WikiOracle's data directory.
pub const TOKENS_DIR: &str = "serve-tokens";

/// `state_file` made absolute with symlinks resolved (its directory, when
/// the file itself does not exist yet), so `./llm.json` and its full path
/// name the same project.
fn canonical(state_file: &Path) -> PathBuf {
    if let Ok(p) = fs::canonicalize(state_file) {
        return p;
    }
    let dir = durable::parent_dir(state_file);
    match (fs::canonicalize(&dir), state_file.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => std::path::absolute(state_file).unwrap_or_else(|_| state_file.to_path_buf()),
    }
}

fn hash_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The file name a project's token is kept under: the SHA-256 of its
/// canonical state-file path, in hex (the path itself is not written down).
pub fn project_key(state_file: &Path) -> String {
    hash_hex(&[canonical(state_file).as_os_str().as_encoded_bytes()])
}

/// The 6-hex-digit id in a project's session cookie name: stable across
/// restarts, different between projects (a separate hash, so the cookie
/// name, which any page on this host can see, tells nothing about the
/// token file's name).
pub fn cookie_id(state_file: &Path) -> String {
    let canon = canonical(state_file);
    hash_hex(&[b"wo-session-cookie\0", canon.as_os_str().as_encoded_bytes()])[..6].to_owned()
}

/// Whether `s` has the shape of [`crate::guard::new_token`]'s tokens.
fn well_formed(s: &str) -> bool {
    s.len() == 43
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The token of the project whose state file is `state_file`, kept under
/// `data_dir/serve-tokens/`: the one kept by an earlier start, or a new
/// one (always a new one with `rotate`). Two servers starting at once
/// agree on one token (the file is created with a hard link, which only one
/// can win).
pub fn load_or_create(
    data_dir: &Path,
    state_file: &Path,
    rotate: bool,
) -> Result<ProjectToken, TokenError> {
    let dir = data_dir.join(TOKENS_DIR);
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TokenError { path, source }
    };
    fs::create_dir_all(&dir).map_err(err(&dir))?;
    // Only the user may list or enter it; an existing directory of ours is
    // narrowed too. Someone else's directory is refused.
    let meta = fs::symlink_metadata(&dir).map_err(err(&dir))?;
    if !meta.is_dir() || meta.uid() != current_uid() {
        return Err(TokenError {
            path: dir,
            source: io::Error::new(
                io::ErrorKind::PermissionDenied,
                "not a directory of yours (a symlink or another user's)",
            ),
        });
    }
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(err(&dir))?;
    }
    let file = dir.join(project_key(state_file));
    if rotate {
        let token = crate::guard::new_token();
        write(&file, &token, false).map_err(err(&file))?;
        return Ok(ProjectToken {
            token,
            file,
            origin: TokenOrigin::Rotated,
        });
    }
    let distrust = match read_trusted(&file) {
        Ok(Some(token)) => {
            return Ok(ProjectToken {
                token,
                file,
                origin: TokenOrigin::Kept,
            });
        }
        Ok(None) => None,
        Err(why) => Some(why),
    };
    let token = crate::guard::new_token();
    match &distrust {
        Some(_) => write(&file, &token, false).map_err(err(&file))?,
        None => {
            if let Err(e) = write(&file, &token, true) {
                // Another server of this project created it first: use its.
                if e.kind() == io::ErrorKind::AlreadyExists
                    && let Ok(Some(theirs)) = read_trusted(&file)
                {
                    return Ok(ProjectToken {
                        token: theirs,
                        file,
                        origin: TokenOrigin::Kept,
                    });
                }
                return Err(TokenError {
                    path: file,
                    source: e,
                });
            }
        }
    }
    Ok(ProjectToken {
        token,
        file,
        origin: match distrust {
            Some(why) => TokenOrigin::Replaced(why),
            None => TokenOrigin::Created,
        },
    })
}

/// The kept token, `Ok(None)` when there is none, or why the file there
/// is not trusted.
fn read_trusted(file: &Path) -> Result<Option<String>, String> {
    let meta = match fs::symlink_metadata(file) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("it could not be read ({e})")),
    };
    if !meta.file_type().is_file() {
        return Err("it was not a regular file".into());
    }
    if meta.uid() != current_uid() {
        return Err("it belonged to another user".into());
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "others could read it (mode {mode:o}), so the old token may be known"
        ));
    }
    let text = fs::read_to_string(file).map_err(|e| format!("it could not be read ({e})"))?;
    let token = text.trim_end_matches('\n');
    if !well_formed(token) {
        return Err("it held no well-formed token".into());
    }
    Ok(Some(token.to_owned()))
}

/// Writes the token file 0600, atomically; `new_only`: fail with
/// `AlreadyExists` rather than replace a file there.
fn write(file: &Path, token: &str, new_only: bool) -> io::Result<()> {
    let staged = durable::stage_with(file, durable::Mode::Exactly(0o600), |w| {
        w.write_all(token.as_bytes())?;
        w.write_all(b"\n")
    })?;
    let done = if new_only {
        staged.commit_new()
    } else {
        staged.commit()
    };
    match done {
        Ok(_) => Ok(()),
        Err(durable::CommitError::NotReplaced(e)) => Err(e),
        Err(durable::CommitError::NotDurable { source, .. }) => Err(source),
        // Only a swapping commit looks at the version it replaces.
        Err(durable::CommitError::ChangedMeanwhile) => Err(io::Error::other(
            "the token file changed while it was being replaced; nothing was written",
        )),
    }
}

fn current_uid() -> u32 {
    // The owner of a file we create is our effective uid; asking the
    // kernel through /proc avoids a libc dependency for one call.
    fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_kept_rotated_and_private() {
        let data = tempfile::tempdir().unwrap();
        let proj = tempfile::tempdir().unwrap();
        let state = proj.path().join("llm.json");
        let first = load_or_create(data.path(), &state, false).unwrap();
        assert_eq!(first.origin, TokenOrigin::Created);
        assert!(well_formed(&first.token));
        let meta = fs::metadata(&first.file).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let dir_mode = fs::metadata(data.path().join(TOKENS_DIR))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        // Not in the project directory.
        assert!(!first.file.starts_with(proj.path()));
        assert_eq!(
            fs::read_dir(proj.path()).unwrap().count(),
            0,
            "nothing written into the project"
        );

        let again = load_or_create(data.path(), &state, false).unwrap();
        assert_eq!(again.origin, TokenOrigin::Kept);
        assert_eq!(again.token, first.token);
        // The same project by another spelling of its path.
        let dotted = proj.path().join(".").join("llm.json");
        assert_eq!(
            load_or_create(data.path(), &dotted, false).unwrap().token,
            first.token
        );
        assert_eq!(cookie_id(&dotted), cookie_id(&state));

        let rotated = load_or_create(data.path(), &state, true).unwrap();
        assert_eq!(rotated.origin, TokenOrigin::Rotated);
        assert_ne!(rotated.token, first.token);
        assert_eq!(
            load_or_create(data.path(), &state, false).unwrap().token,
            rotated.token
        );

        // Another project: another token, another cookie id.
        let other = tempfile::tempdir().unwrap();
        let other_state = other.path().join("llm.json");
        let o = load_or_create(data.path(), &other_state, false).unwrap();
        assert_ne!(o.token, rotated.token);
        assert_ne!(o.file, rotated.file);
        assert_ne!(cookie_id(&other_state), cookie_id(&state));
        assert_eq!(cookie_id(&state).len(), 6);
    }

    #[test]
    fn an_untrusted_file_is_replaced_and_says_why() {
        let data = tempfile::tempdir().unwrap();
        let proj = tempfile::tempdir().unwrap();
        let state = proj.path().join("llm.json");
        let first = load_or_create(data.path(), &state, false).unwrap();

        // Readable by others: the token may have leaked.
        fs::set_permissions(&first.file, fs::Permissions::from_mode(0o644)).unwrap();
        let r = load_or_create(data.path(), &state, false).unwrap();
        assert!(
            matches!(&r.origin, TokenOrigin::Replaced(why) if why.contains("others could read")),
            "{:?}",
            r.origin
        );
        assert_ne!(r.token, first.token);
        let mode = fs::metadata(&r.file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // Garbage in the file.
        fs::write(&r.file, "not a token\n").unwrap();
        let g = load_or_create(data.path(), &state, false).unwrap();
        assert!(matches!(&g.origin, TokenOrigin::Replaced(why) if why.contains("well-formed")));

        // A symlink planted at the name is replaced, never followed.
        let victim = proj.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        fs::remove_file(&g.file).unwrap();
        std::os::unix::fs::symlink(&victim, &g.file).unwrap();
        let s = load_or_create(data.path(), &state, false).unwrap();
        assert!(matches!(&s.origin, TokenOrigin::Replaced(why) if why.contains("regular file")));
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert!(
            !fs::symlink_metadata(&s.file)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn a_data_dir_that_cannot_be_made_is_an_error_naming_it() {
        let data = tempfile::tempdir().unwrap();
        let blocker = data.path().join("file");
        fs::write(&blocker, "x").unwrap();
        let e = load_or_create(&blocker, Path::new("llm.json"), false).unwrap_err();
        assert!(
            e.to_string().contains(&blocker.display().to_string()),
            "{e}"
        );
        assert!(e.to_string().contains("WO_SERVE_TOKEN"), "{e}");
    }
}
