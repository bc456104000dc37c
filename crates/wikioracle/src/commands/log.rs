//! `wo log`.

use std::process::ExitCode;

use anyhow::{Result, anyhow};
use wo_format::query::{MessageFilter, parse_date_bound};
use wo_format::xhtml::to_plain_text;

use super::open_store;
use crate::cli::{GlobalOpts, LogArgs};
use crate::render;

pub fn run(g: &GlobalOpts, args: LogArgs) -> Result<ExitCode> {
    let bound = |flag: &str, v: &Option<String>| {
        v.as_deref()
            .map(|s| {
                parse_date_bound(s).ok_or_else(|| {
                    anyhow!(
                        "{flag} {s:?} is not a date\nhint: use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ"
                    )
                })
            })
            .transpose()
    };
    let filter = MessageFilter {
        text: args.grep.clone(),
        username: args.user.clone(),
        since: bound("--since", &args.since)?,
        until: bound("--until", &args.until)?,
    };
    let store = open_store(g)?;
    let mut shown = filter.apply(store.state().messages());
    if let Some(n) = args.limit {
        let skip = shown.len().saturating_sub(n);
        shown.drain(..skip);
    }
    let mut out = std::io::stdout().lock();
    use std::io::Write;
    for m in shown {
        let r = if args.json {
            let mut v = serde_json::to_value(m)?;
            v["text"] = to_plain_text(&m.content).into();
            writeln!(out, "{}", render::json(&v)?)
        } else {
            writeln!(out, "{}", render::term(&render::message_block(m)))
        };
        if r.is_err() {
            break; // a closed pipe (`| head`) is not an error
        }
    }
    Ok(ExitCode::SUCCESS)
}
