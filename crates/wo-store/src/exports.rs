//! Exports beside the state file (`llm_YYYY.MM.DD.HHMM.json`): naming new
//! ones, and finding, merging and retiring ones copied back from elsewhere
//! (product §3 "Startup").

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use wo_format::admit::{Admitted, admit_bytes};
use wo_format::merge::{MergeReport, merge_into};
use wo_format::{State, to_canonical_vec};

use crate::durable::{self, parent_dir};
use crate::store::{OpenOptions, Store, StoreError};

/// The export file name for a local time: `llm_YYYY.MM.DD.HHMM.json`.
pub fn export_file_name(local: time::OffsetDateTime) -> String {
    format!(
        "llm_{:04}.{:02}.{:02}.{:02}{:02}.json",
        local.year(),
        u8::from(local.month()),
        local.day(),
        local.hour(),
        local.minute()
    )
}

/// The export file name for now, in local time (UTC when the local offset
/// cannot be determined).
pub fn export_file_name_now() -> String {
    export_file_name(
        time::OffsetDateTime::now_local().unwrap_or_else(|_| time::OffsetDateTime::now_utc()),
    )
}

/// Writes `state` as a new export in `dir` named for the current local time
/// (a `-2`, `-3`… suffix if that minute's name is taken). Returns the path.
pub fn write_export(state: &State, dir: &Path) -> Result<PathBuf, StoreError> {
    let base = export_file_name_now();
    let stem = base.trim_end_matches(".json");
    let bytes = to_canonical_vec(state);
    for n in 1u32.. {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{stem}-{n}.json")
        };
        let path = dir.join(name);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        durable::write_atomic(&path, &[&bytes]).map_err(|source| StoreError::Write {
            path: path.clone(),
            source,
        })?;
        return Ok(path);
    }
    unreachable!("u32 export names exhausted")
}

/// True for names the startup merge picks up: `llm_*.json`.
pub fn is_export_name(name: &str) -> bool {
    name.starts_with("llm_") && name.ends_with(".json") && name.len() > "llm_.json".len()
}

/// Export files beside `state_path`, sorted by name.
pub fn find_exports(state_path: &Path) -> Vec<PathBuf> {
    let dir = parent_dir(state_path);
    let own = state_path.file_name();
    let mut found: Vec<PathBuf> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| {
            let name = e.file_name();
            Some(name.as_os_str()) != own && is_export_name(&name.to_string_lossy())
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The outcome for one file of a merge run.
#[derive(Debug)]
pub struct FileMerge {
    pub path: PathBuf,
    pub result: Result<MergeReport, StoreError>,
    /// Where it was renamed after a successful merge (not in a dry run).
    pub renamed_to: Option<PathBuf>,
    /// JSON pointers (in that file) of content that broke the XHTML rules
    /// and was merged in sanitised form.
    pub sanitised: Vec<String>,
}

/// Reads an export (or any state file) for merging, through the one gate
/// for outside data ([`wo_format::admit`]): parsed with the nesting limit
/// of every reader, held to `wo validate`'s rules, content sanitised. A file
/// that fails is refused with the pointer of each problem.
pub fn read_export(path: &Path, opts: &OpenOptions) -> Result<Admitted, StoreError> {
    let bytes = read_limited(path, opts)?;
    admit_bytes(&bytes).map_err(|issues| StoreError::Invalid {
        path: path.to_path_buf(),
        issues,
    })
}

/// The bytes of a file to merge, refusing what [`Store::open`] refuses: a
/// symbolic link (unless allowed), anything but a regular file, more than
/// the state size limit.
fn read_limited(path: &Path, opts: &OpenOptions) -> Result<Vec<u8>, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::NotFound {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(read_err(e)),
    };
    if meta.file_type().is_symlink() && !opts.allow_symlink {
        return Err(StoreError::Symlink {
            path: path.to_path_buf(),
        });
    }
    let file = File::open(path).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(StoreError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let limit = opts.limits.max_state_bytes;
    let too_large = |size| StoreError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    // At most one byte past the limit, in case it grew meanwhile.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Reads several exports on all cores: parsing dominates a merge.
fn read_all(files: &[PathBuf], opts: &OpenOptions) -> Vec<Result<Admitted, StoreError>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || files.len() < 2 {
        return files.iter().map(|f| read_export(f, opts)).collect();
    }
    let per_thread = files.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(per_thread)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|f| read_export(f, opts))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("export reader thread panicked"))
            .collect()
    })
}

/// Merges `files` into the store. Valid files are merged in one locked
/// write; then each is renamed to `<name>.merged` unless `rename` is false.
/// Invalid files are reported and left alone. With `dry_run` nothing is
/// written or renamed; the reports say what would happen.
pub fn merge_files(
    store: &mut Store,
    files: &[PathBuf],
    dry_run: bool,
    rename: bool,
) -> Result<Vec<FileMerge>, StoreError> {
    let mut loaded = Vec::new();
    let mut outcomes = Vec::new();
    let read_opts = OpenOptions {
        limits: store.limits().clone(),
        ..OpenOptions::default()
    };
    for (path, result) in files.iter().zip(read_all(files, &read_opts)) {
        match result {
            Ok(admitted) => loaded.push((path.clone(), admitted)),
            Err(e) => outcomes.push(FileMerge {
                path: path.clone(),
                result: Err(e),
                renamed_to: None,
                sanitised: Vec::new(),
            }),
        }
    }
    if loaded.is_empty() {
        return Ok(outcomes);
    }
    let mut reports = Vec::new();
    if dry_run {
        store.refresh()?;
        let mut scratch = store.state().clone();
        for (_, incoming) in &loaded {
            reports.push(merge_into(&mut scratch, &incoming.state));
        }
    } else {
        let (r, _) = store.transact(|state| {
            loaded
                .iter()
                .map(|(_, incoming)| merge_into(state, &incoming.state))
                .collect::<Vec<_>>()
        })?;
        reports = r;
    }
    for ((path, admitted), report) in loaded.into_iter().zip(reports) {
        let mut renamed_to = None;
        if !dry_run && rename {
            let mut target = path.clone().into_os_string();
            target.push(".merged");
            let target = PathBuf::from(target);
            // A failed rename only means the file is merged again next time,
            // which changes nothing (merge is idempotent).
            if fs::rename(&path, &target).is_ok() {
                renamed_to = Some(target);
            }
        }
        outcomes.push(FileMerge {
            path,
            result: Ok(report),
            renamed_to,
            sanitised: admitted.sanitised,
        });
    }
    outcomes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(outcomes)
}

/// The startup step of `wo serve` / `wo ask`: merge every export beside the
/// state file and rename it to `*.merged`.
pub fn auto_merge(store: &mut Store, dry_run: bool) -> Result<Vec<FileMerge>, StoreError> {
    let files = find_exports(store.path());
    if files.is_empty() {
        return Ok(Vec::new());
    }
    merge_files(store, &files, dry_run, true)
}
