//! One module per command; each parses nothing itself (clap did), calls the
//! libraries and renders.

mod ask;
mod chat;
mod context;
mod dense;
mod git;
mod index;
mod init;
mod log;
mod mcp;
mod memory;
mod merge;
mod models;
mod persist;
mod providers;
mod serve;
mod session;
mod transfer;
mod truth;
mod validate;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use wo_format::xhtml::{ContentFormat, to_xhtml};
use wo_store::{Limits, OpenOptions, Store};

use crate::cli::{Cli, Command, GlobalOpts, InputFormat};

pub fn run(cli: Cli) -> Result<ExitCode> {
    let g = &cli.global;
    match cli.command {
        Command::Ask(args) => ask::run(g, args),
        Command::Chat(args) => chat::run(g, args),
        Command::Providers(args) => providers::run(args),
        Command::Init(args) => init::run(g, args),
        Command::Validate(args) => validate::run(args),
        Command::Merge(args) => merge::run(g, args),
        Command::Export(args) => transfer::export(g, args),
        Command::Import(args) => transfer::import(g, args),
        Command::Log(args) => log::run(g, args),
        Command::Archive(args) => log::archive(g, args),
        Command::Truth(cmd) => truth::run(g, cmd),
        Command::Context(cmd) => context::run(g, cmd),
        Command::Memory(cmd) => memory::run(g, cmd),
        Command::Prompts(args) => memory::prompts(g, args),
        Command::Index(args) => index::index(args),
        Command::Search(args) => index::search(args),
        Command::Pack(args) => index::pack(args),
        Command::Serve(args) => serve::run(g, args),
        Command::Mcp(args) => mcp::run(g, args),
        Command::AgentsMd(args) => mcp::agents_md(args),
        Command::Models(args) => models::run(args),
        Command::MergeDriver(args) => git::merge_driver(args),
        Command::GitSetup => git::git_setup(g),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, "wo", &mut out);
            // A closed pipe is not an error (render's rule).
            let _ =
                crate::render::write_raw(std::io::stdout().lock(), &String::from_utf8_lossy(&out));
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { out_dir } => man(out_dir.as_deref()),
    }
}

/// `wo man`: the top page on stdout, or every command's page written into
/// `out_dir` (`wo.1`, `wo-ask.1`, `wo-truth-add.1`, …) by clap_mangen.
fn man(out_dir: Option<&Path>) -> Result<ExitCode> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    let Some(dir) = out_dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut out)
            .context("cannot render the manual page")?;
        // A closed pipe (`wo man | head`) is not an error.
        let _ = crate::render::write_raw(std::io::stdout().lock(), &String::from_utf8_lossy(&out));
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create it", dir.display()))?;
    // Every command and subcommand, named as man(1) finds them.
    let mut pending = vec![("wo".to_owned(), cmd)];
    let mut written = 0;
    while let Some((name, cmd)) = pending.pop() {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let sub_name = format!("{name}-{}", sub.get_name());
            pending.push((sub_name, sub.clone()));
        }
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd.clone())
            .title(name.to_uppercase())
            .render(&mut out)
            .with_context(|| format!("cannot render the page of {name}"))?;
        let path = dir.join(format!("{name}.1"));
        wo_durable::write_atomic_with(&path, wo_durable::Mode::Keep { new: 0o666 }, |w| {
            w.write_all(&out)
        })
        .with_context(|| format!("{}: cannot write it", path.display()))?;
        written += 1;
    }
    outln!("wrote {written} manual pages to {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// The most read of a project text file wo edits (`AGENTS.md`, `CLAUDE.md`,
/// `.gitattributes`, `.gitignore`): far above any real one, and a planted
/// file cannot make wo read until memory runs out.
pub const MAX_PROJECT_TEXT_BYTES: u64 = 4 << 20;

/// The state file: `--state`, else `./llm.json`, else the nearest parent's.
pub fn state_path(g: &GlobalOpts) -> Result<PathBuf> {
    if let Some(p) = &g.state {
        return Ok(p.clone());
    }
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    // Another user's llm.json on the way up (a shared temp directory) is
    // refused with a message, never used silently.
    Ok(wo_store::discover_state(&cwd)?.unwrap_or_else(|| cwd.join(wo_store::STATE_FILE_NAME)))
}

/// The directory a state file lives in.
pub fn state_dir(path: &Path) -> PathBuf {
    wo_store::durable::parent_dir(path)
}

pub fn open_options(g: &GlobalOpts) -> OpenOptions {
    OpenOptions {
        allow_symlink: g.allow_symlink,
        create_if_missing: false,
        limits: Limits {
            max_state_bytes: g.max_state_bytes,
            ..Limits::default()
        },
        lock_timeout: None,
        sanitise_content: false,
    }
}

/// Opens the state file that must already exist.
pub fn open_store(g: &GlobalOpts) -> Result<Store> {
    let path = state_path(g)?;
    Ok(Store::open(&path, open_options(g))?)
}

impl From<InputFormat> for ContentFormat {
    fn from(f: InputFormat) -> Self {
        match f {
            InputFormat::Text => ContentFormat::Text,
            InputFormat::Markdown => ContentFormat::Markdown,
            InputFormat::Html => ContentFormat::Html,
        }
    }
}

/// Reads content from `--content`, `--file` or standard input and converts
/// it to sanitised XHTML.
pub fn read_content(
    inline: Option<&str>,
    file: Option<&Path>,
    format: InputFormat,
) -> Result<String> {
    let raw = match (inline, file) {
        (Some(text), _) => text.to_owned(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read content", path.display()))?,
        (None, None) => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("cannot read content from standard input")?;
            s
        }
    };
    if raw.trim().is_empty() {
        bail!("the content is empty\nhint: pass --content TEXT, --file PATH, or pipe it in");
    }
    Ok(to_xhtml(&raw, format.into()))
}

/// Checks a certainty given on the command line.
pub fn check_certainty(flag: &str, value: f64) -> Result<f64> {
    wo_engine::request::check_certainty(value)
        .map_err(|m| anyhow::anyhow!("{flag}: {m}\nhint: 0 = pure guess, 1 = certain"))
}
