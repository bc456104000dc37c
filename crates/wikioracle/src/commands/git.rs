//! `wo merge-driver` and `wo git-setup`: llm.json shared through git. Git
//! runs the driver on a merge conflict of llm.json with three temporary
//! files; the driver merges ours (%A) with theirs (%B) by the one merge
//! every face uses (`wo_format::merge`: unions by id, the later edit of an
//! entry wins, tombstones keep deletions) and writes the result over %A.
//! The base (%O) is not needed by a union merge; it is only checked to be
//! readable when git gives one.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context as _, Result, anyhow, bail};

use crate::cli::{GlobalOpts, MergeDriverArgs};

/// The merge driver's name in git's config and `.gitattributes`.
const DRIVER: &str = "wikioracle";

/// Reads and admits one side of the merge; the error names the side and
/// the JSON pointer of the first problem.
fn side(label: &str, path: &Path) -> Result<wo_format::State> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("{label} ({}): cannot read it", path.display()))?;
    wo_format::admit::admit_bytes(&bytes)
        .map(|a| a.state)
        .map_err(|issues| {
            let first = issues
                .first()
                .map(ToString::to_string)
                .unwrap_or_else(|| "not a valid llm.json".into());
            anyhow!(
                "{label} ({}) is not a valid llm.json: {first}\nnothing was written; git leaves llm.json conflicted for you to resolve",
                path.display()
            )
        })
}

pub fn merge_driver(args: MergeDriverArgs) -> Result<ExitCode> {
    // Both sides are read and checked before anything is written: a side
    // that is not a valid llm.json leaves %A as git gave it.
    let mut ours = side("ours (%A)", &args.ours)?;
    let theirs = side("theirs (%B)", &args.theirs)?;
    // An empty base is git's "no common ancestor" (both sides added the file).
    let base_given = std::fs::metadata(&args.base).is_ok_and(|m| m.len() > 0);
    if base_given {
        side("base (%O)", &args.base)?;
    }
    let report = wo_format::merge::merge_into(&mut ours, &theirs);
    let bytes = wo_format::to_canonical_vec(&ours);
    wo_durable::write_atomic(&args.ours, &[&bytes])
        .with_context(|| format!("{}: cannot write the merge", args.ours.display()))?;
    eoutln!("wo merge-driver: {}", crate::render::merge_report(&report));
    Ok(ExitCode::SUCCESS)
}

/// Runs git with `args` in `dir`; its trimmed standard output, or an error
/// with its standard error.
fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .context("cannot run git\nhint: is git installed and on PATH?")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `s` quoted for the shell git runs the driver with.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Adds `line` to the file at `path` (created if missing) unless a line
/// with the same words is there; says which.
fn ensure_line(path: &Path, line: &str) -> Result<()> {
    // Never through a link (see `wo_durable::project`): the file is
    // rewritten, so a link's target would be copied into the repository.
    let existing =
        match wo_durable::project::read_regular_string(path, super::MAX_PROJECT_TEXT_BYTES) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(anyhow!("cannot read it: {e}\nnothing was written"));
            }
        };
    if existing
        .lines()
        .any(|l| l.split_whitespace().eq(line.split_whitespace()))
    {
        outln!("{}: already has `{line}`", path.display());
        return Ok(());
    }
    let mut text = existing;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    wo_durable::write_atomic_with(path, wo_durable::Mode::Keep { new: 0o666 }, |w| {
        w.write_all(text.as_bytes())
    })
    .with_context(|| format!("{}: cannot write it", path.display()))?;
    outln!("{}: added `{line}`", path.display());
    Ok(())
}

pub fn git_setup(g: &GlobalOpts) -> Result<ExitCode> {
    let state = super::state_path(g)?;
    let dir = super::state_dir(&state);
    let top = PathBuf::from(git(&dir, &["rev-parse", "--show-toplevel"]).map_err(|e| {
        anyhow!(
            "{}: not inside a git repository ({e})\nhint: `git init` first",
            dir.display()
        )
    })?);
    // The pattern: the state file's name, so it matches wherever it lies.
    let name = state
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(wo_store::STATE_FILE_NAME);
    ensure_line(
        &top.join(".gitattributes"),
        &format!("{name} merge={DRIVER}"),
    )?;
    // The recall sidecar beside the state file is a cache of this machine
    // (`wo_engine::recall_file`), rebuilt whenever it is missing: never
    // committed, nor its temp files.
    // So are the embeddings sidecar (`wo_engine::embed_file`) and the lock
    // of the process filling it, the state file's own lock (the writers'
    // lock and the record of the version this machine last wrote), and the
    // memory interpreter's queue and its locks (this machine's work).
    let queue = wo_engine::memory_jobs::Queue::of(&state);
    let [jobs, jobs_lock, run_lock, answering_lock] = queue.files();
    for sidecar in [
        wo_engine::recall_file::sidecar_path(&state),
        wo_engine::embed_file::sidecar_path(&state),
        wo_engine::embed_file::lock_path(&state),
        wo_store::lock_path_for(&state),
        jobs.to_path_buf(),
        jobs_lock.to_path_buf(),
        run_lock.to_path_buf(),
        answering_lock.to_path_buf(),
    ] {
        if let Some(sidecar) = sidecar.file_name().and_then(|n| n.to_str()) {
            ensure_line(&top.join(".gitignore"), sidecar)?;
        }
    }
    ensure_line(
        &top.join(".gitignore"),
        wo_engine::recall_file::TEMP_PATTERN,
    )?;
    // The driver runs this very binary, so it works whether or not `wo` is
    // on git's PATH.
    let exe = std::env::current_exe().context("cannot find the wo binary's path")?;
    let driver = format!(
        "{} merge-driver %O %A %B",
        shell_quote(&exe.to_string_lossy())
    );
    for (key, value) in [
        (
            format!("merge.{DRIVER}.name"),
            "WikiOracle llm.json merge (wo merge-driver)".to_owned(),
        ),
        (format!("merge.{DRIVER}.driver"), driver),
    ] {
        let now = git(&top, &["config", "--local", "--get", &key]).unwrap_or_default();
        if now == value {
            outln!("git config {key}: already set");
        } else {
            git(&top, &["config", "--local", &key, &value])?;
            outln!("git config {key} = {value}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
