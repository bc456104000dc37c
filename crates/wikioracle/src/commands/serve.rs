//! `wo serve`: builds the server's options from the flags and the user's
//! config, binds, prints the launch URL, and serves until Ctrl-C.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use wo_server::ServeOptions;
use wo_server::app::Limits;

use super::{open_options, state_path};
use crate::cli::{GlobalOpts, ServeArgs};

pub fn run(g: &GlobalOpts, args: ServeArgs) -> Result<ExitCode> {
    let config = wo_providers::Config::load()?;
    for w in &config.warnings {
        eoutln!("warning: {w}");
    }
    let state_file = if args.stateless {
        None
    } else {
        Some(state_path(g)?)
    };
    let index_root = match (&state_file, &args.index) {
        (_, Some(dir)) => Some(dir.clone()),
        (Some(file), None) => wo_engine::files::index_root_for(file, None),
        (None, None) => None,
    };
    let opts = ServeOptions {
        state_file: state_file.clone(),
        addr: SocketAddr::new(args.bind, args.port),
        allowed_hosts: args.allow_hosts,
        rate_per_minute: args
            .rate_limit
            .unwrap_or(if args.stateless { 120 } else { 600 }),
        limits: Limits {
            body_bytes: args.max_body_bytes,
            upload_bytes: args.max_upload_bytes,
            ..Limits::default()
        },
        config,
        username: args.username.unwrap_or_else(wo_interop::default_username),
        index_root: if args.stateless { None } else { index_root },
        token: std::env::var("WO_SERVE_TOKEN")
            .ok()
            .filter(|t| t.len() >= 16),
        store: open_options(g),
    };
    let rt = super::session::runtime()?;
    rt.block_on(async move {
        let bound = wo_server::bind(opts).await?;
        for merged in &bound.merged {
            match &merged.result {
                Ok(report) => eoutln!(
                    "merged {}: {}",
                    merged.path.display(),
                    crate::render::merge_report(report)
                ),
                Err(e) => eoutln!("warning: not merged {}: {e}", merged.path.display()),
            }
        }
        outln!("WikiOracle at {}", bound.launch_url);
        match &state_file {
            Some(f) => eoutln!(
                "serving {} (local mode; the link above signs you in — keep it private). Ctrl-C stops.",
                f.display()
            ),
            None => eoutln!("stateless mode: nothing is stored here. Ctrl-C stops."),
        }
        if let Some(path) = &args.print_url_file {
            write_private(path, &bound.launch_url)
                .with_context(|| format!("--print-url-file {}", path.display()))?;
        }
        if args.open {
            open_browser(&bound.launch_url);
        }
        bound
            .serve(async {
                let _ = tokio::signal::ctrl_c().await;
                eoutln!("stopping");
            })
            .await
            .context("the server failed")?;
        Ok::<_, anyhow::Error>(ExitCode::SUCCESS)
    })
}

/// Writes `text` to a new file only the user can read (it holds the token).
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Best effort: the desktop's opener; the URL is printed either way.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(opener)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        eoutln!("note: could not start {opener} ({e}); open the URL above yourself");
    }
}
