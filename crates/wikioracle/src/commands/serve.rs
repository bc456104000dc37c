//! `wo serve`: builds the server's options from the flags and the user's
//! config, binds, prints the launch URL, and serves until Ctrl-C.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use wo_server::ServeOptions;
use wo_server::app::{Hosted, Limits};

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
            header_timeout: Duration::from_secs(args.header_timeout),
            body_timeout: Duration::from_secs(args.body_timeout),
            max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
            max_connections_per_ip: args.max_connections_per_ip.unwrap_or(if args.stateless {
                64
            } else {
                0
            }),
            ..Limits::default()
        },
        hosted: Hosted {
            allow_providers: args.allow_providers,
            allow_models: args.allow_models,
            max_tokens: args.max_tokens,
        },
        config,
        username: args.username.unwrap_or_else(wo_interop::default_username),
        index_root: if args.stateless { None } else { index_root },
        token: std::env::var("WO_SERVE_TOKEN")
            .ok()
            .filter(|t| t.len() >= 16),
        token_dir: wo_providers::config::data_dir(&wo_providers::config::Env::process()),
        new_token: args.new_token,
        store: open_options(g),
        mcp_allow_write: args.mcp_allow_write,
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
        if let Some(kept) = &bound.kept_token {
            use wo_server::signin::TokenOrigin;
            match &kept.origin {
                TokenOrigin::Kept => eoutln!("the sign-in link is the same as last time (wo serve --new-token replaces it)"),
                TokenOrigin::Created => eoutln!("the sign-in link stays the same across restarts (wo serve --new-token replaces it)"),
                TokenOrigin::Rotated => eoutln!("a new sign-in link: earlier links and signed-in browsers no longer work"),
                TokenOrigin::Replaced(why) => eoutln!(
                    "warning: a new sign-in link: the kept token at {} was not trusted ({why})",
                    kept.file.display()
                ),
            }
        } else if state_file.is_some() && std::env::var_os("WO_SERVE_TOKEN").is_none() {
            eoutln!("note: no data directory (set HOME or XDG_DATA_HOME): the sign-in link changes at each start");
        }
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

/// Writes `text` to `path` as a file only the user can read (it holds the
/// token), whatever mode a file there had: atomically and durably through
/// `wo_durable`, whose temp file is created exclusively and never through a
/// symlink, and whose rename replaces a symlink at `path` instead of
/// following it.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    wo_durable::write_atomic_with(path, wo_durable::Mode::Exactly(0o600), |w| {
        w.write_all(text.as_bytes())?;
        w.write_all(b"\n")
    })
    .map(drop)
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

#[cfg(test)]
#[allow(clippy::disallowed_macros)] // tests print their attack counts
mod tests {
    use super::write_private;
    use std::os::unix::fs::{PermissionsExt, symlink};

    /// Every way a planted file could catch the token.
    #[test]
    fn the_url_file_is_created_privately_and_never_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let mut held = 0;
        let total = 4;

        // A symlink at the old predictable temporary name.
        let out = dir.path().join("url.txt");
        symlink(&victim, dir.path().join("url.tmp")).unwrap();
        write_private(&out, "http://127.0.0.1:1/?token=secret").unwrap();
        if std::fs::read_to_string(&victim).unwrap() == "precious" {
            held += 1;
        }
        // The file itself: 0600, holding the URL.
        let meta = std::fs::symlink_metadata(&out).unwrap();
        if meta.file_type().is_file() && meta.permissions().mode() & 0o777 == 0o600 {
            held += 1;
        }
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "http://127.0.0.1:1/?token=secret\n"
        );
        // A symlink at the target: replaced, not followed.
        let linked = dir.path().join("linked.txt");
        symlink(&victim, &linked).unwrap();
        write_private(&linked, "http://x/?token=secret").unwrap();
        if std::fs::read_to_string(&victim).unwrap() == "precious"
            && !std::fs::symlink_metadata(&linked)
                .unwrap()
                .file_type()
                .is_symlink()
        {
            held += 1;
        }
        // An existing world-readable file at the target ends up 0600.
        let loose = dir.path().join("loose.txt");
        std::fs::write(&loose, "old").unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&loose, "http://x/?token=secret").unwrap();
        if std::fs::metadata(&loose).unwrap().permissions().mode() & 0o777 == 0o600 {
            held += 1;
        }
        println!("item 12: {held}/{total} held");
        assert_eq!(held, total);
        // Nothing else was left behind in the directory.
        assert_eq!(
            wo_testkit::sorted_names(dir.path()),
            ["linked.txt", "loose.txt", "url.tmp", "url.txt", "victim"]
        );
    }
}
