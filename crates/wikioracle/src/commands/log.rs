//! `wo log`: the transcript, its conversations (`--conversations`, the
//! archived ones with `--archived`) or the token usage providers reported
//! (`--usage`), filtered by text, user and time; `wo archive`, which hides a
//! conversation from those lists or shows it again.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use wo_format::query::{MessageFilter, parse_date_bound};
use wo_format::xhtml::to_plain_text;
use wo_format::{Message, Role};

use super::open_store;
use crate::cli::{GlobalOpts, LogArgs};
use crate::render;

/// A `--since`/`--until` value, or an error naming the flag and the forms.
pub fn date_flag(flag: &str, v: Option<&str>) -> Result<Option<wo_format::Timestamp>> {
    v.map(|s| {
        parse_date_bound(s).ok_or_else(|| {
            anyhow!(
                "{flag} {s:?} is not a time\nhint: use YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ, a time ago (30m, 3h, 2d, 1w), yesterday or today"
            )
        })
    })
    .transpose()
}

pub fn run(g: &GlobalOpts, args: LogArgs) -> Result<ExitCode> {
    let filter = MessageFilter {
        text: args.grep.clone(),
        username: args.user.clone(),
        since: date_flag("--since", args.since.as_deref())?,
        until: date_flag("--until", args.until.as_deref())?,
    };
    let store = open_store(g)?;
    if let Some(id) = &args.context {
        return context(store.state(), id, args.json);
    }
    if args.conversations {
        return conversations(store.state(), &filter, &args);
    }
    let mut shown = filter.apply(store.state().messages());
    if args.usage {
        return usage(&shown, args.json);
    }
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

/// `--context ID`: the record an answer keeps of its prompt, named from
/// the file as it is now.
fn context(state: &wo_format::State, id: &str, json: bool) -> Result<ExitCode> {
    let (answer, used) = wo_engine::explain::recorded_context(state, id).map_err(|e| {
        anyhow!("--context {id}: {e}\nhint: `wo log` lists message ids; `wo ask --show-context` shows a new answer's context as it is sent")
    })?;
    if json {
        let v = serde_json::json!({"answer": answer.id, "context_used": used});
        outln!("{}", render::json(&v)?);
    } else {
        outln!("answer {} ({})", answer.id, answer.title);
        outln!(
            "{}",
            wo_engine::explain::render_context_used(state, &used).trim_end()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--conversations`: one line each, most recently updated first; the
/// filters keep a conversation when any of its messages matches.
fn conversations(
    state: &wo_format::State,
    filter: &MessageFilter,
    args: &LogArgs,
) -> Result<ExitCode> {
    let roots = wo_format::conversation::roots(state);
    let mut matching = std::collections::HashSet::new();
    for (i, m) in state.messages().iter().enumerate() {
        if filter.matches(m) {
            matching.insert(state.messages()[roots[i]].id.as_str());
        }
    }
    let mut list: Vec<_> = wo_format::conversation::list(state)
        .into_iter()
        .filter(|c| matching.contains(c.root.id.as_str()))
        .filter(|c| c.root.archived() == args.archived)
        .collect();
    // Newest first, as the web app's sidebar and chat apps list them; `-n`
    // keeps the newest.
    list.reverse();
    if let Some(n) = args.limit {
        list.truncate(n);
    }
    for c in list {
        let title = wo_interop::export::conversation_title(c.root);
        if args.json {
            outln!(
                "{}",
                render::json(&serde_json::json!({
                    "id": c.root.id, "title": title, "started": c.root.timestamp.as_str(),
                    "updated": c.updated().as_str(), "messages": c.count, "latest": c.latest.id,
                }))?
            );
        } else {
            let updated = c.updated().as_str();
            outln!(
                "{}  {}  {:>4} msg  {}",
                c.root.id,
                updated.get(..16).unwrap_or(updated).replace('T', " "),
                c.count,
                title
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Token totals for one model.
#[derive(Default, serde::Serialize)]
struct Totals {
    answers: u64,
    answers_without_usage: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// `--usage`: the token counts providers reported on answers
/// (`usage.prompt_tokens`, `usage.completion_tokens`), per model.
fn usage(messages: &[&Message], json: bool) -> Result<ExitCode> {
    let mut by_model: BTreeMap<String, Totals> = BTreeMap::new();
    for m in messages {
        if m.effective_role() != Role::Assistant {
            continue;
        }
        let name = match (&m.provider, &m.model) {
            (Some(p), Some(model)) => format!("{p}/{model}"),
            (None, Some(model)) => model.clone(),
            _ => m.username.clone(),
        };
        let t = by_model.entry(name).or_default();
        t.answers += 1;
        match &m.usage {
            Some(u) if u.prompt_tokens.is_some() || u.completion_tokens.is_some() => {
                t.prompt_tokens += u.prompt_tokens.unwrap_or(0);
                t.completion_tokens += u.completion_tokens.unwrap_or(0);
            }
            _ => t.answers_without_usage += 1,
        }
    }
    if json {
        for (model, t) in &by_model {
            let mut v = serde_json::to_value(t)?;
            v["model"] = model.clone().into();
            v["total_tokens"] = (t.prompt_tokens + t.completion_tokens).into();
            outln!("{}", render::json(&v)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if by_model.is_empty() {
        outln!("no answers in range");
        return Ok(ExitCode::SUCCESS);
    }
    let width = by_model
        .keys()
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    outln!(
        "{:<width$}  {:>7}  {:>10}  {:>10}  {:>10}",
        "model",
        "answers",
        "prompt",
        "completion",
        "total"
    );
    let mut all = Totals::default();
    let mut unreported = 0;
    for (model, t) in &by_model {
        outln!(
            "{:<width$}  {:>7}  {:>10}  {:>10}  {:>10}",
            model,
            t.answers,
            t.prompt_tokens,
            t.completion_tokens,
            t.prompt_tokens + t.completion_tokens
        );
        all.answers += t.answers;
        all.prompt_tokens += t.prompt_tokens;
        all.completion_tokens += t.completion_tokens;
        unreported += t.answers_without_usage;
    }
    if by_model.len() > 1 {
        outln!(
            "{:<width$}  {:>7}  {:>10}  {:>10}  {:>10}",
            "all",
            all.answers,
            all.prompt_tokens,
            all.completion_tokens,
            all.prompt_tokens + all.completion_tokens
        );
    }
    if unreported > 0 {
        outln!("({unreported} answer(s) came with no token counts: their providers reported none)");
    }
    Ok(ExitCode::SUCCESS)
}

/// `wo archive [--restore] ID`: hides a conversation from lists (or shows
/// it again); its messages stay in the file.
pub fn archive(g: &GlobalOpts, args: crate::cli::ArchiveArgs) -> Result<ExitCode> {
    let mut store = open_store(g)?;
    let hidden = !args.restore;
    let (root, _) = store
        .try_transact(|s| {
            wo_engine::conversation::archive(
                s,
                &args.conversation,
                hidden,
                wo_format::Timestamp::now(),
            )
        })?
        .map_err(|e| {
            anyhow!(
                "{}: {e}\nhint: `wo log --conversations` lists them (--archived: the archived ones)",
                args.conversation
            )
        })?;
    if hidden {
        outln!("archived {root} (restore with: wo archive --restore {root})");
    } else {
        outln!("restored {root}");
    }
    Ok(ExitCode::SUCCESS)
}
