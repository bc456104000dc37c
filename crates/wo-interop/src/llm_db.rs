//! simonw/llm's log database, `logs.db` (`llm logs path` prints where):
//! SQLite with `conversations (id, name, model)` and `responses (id, model,
//! prompt, system, prompt_json, options_json, response, response_json,
//! conversation_id, duration_ms, datetime_utc, input_tokens, output_tokens,
//! token_details, schema_id, resolved_model)` — one row per prompt and its
//! answer — plus `attachments`/`prompt_attachments` and
//! `fragments`/`prompt_fragments`. Older databases lack the later columns
//! and tables; what is there is read.
//!
//! The database is opened immutable and read-only (`file:…?immutable=1`,
//! `SQLITE_OPEN_READ_ONLY`, and `query_only` on top): nothing is ever
//! written to it or beside it, not even a journal or a WAL-mode database's
//! `-wal`/`-shm` (tested: the file and its folder are unchanged; a `-wal`
//! file left by a running llm is not read, and a warning says so). A file
//! from elsewhere is untrusted, so only real tables are read (a view, or a
//! virtual table, named like one of llm's tables is refused: a recursive
//! view never ends), and reading is bounded ([`Bounds`]: rows, the size of
//! one value and of all text read, and time). Each response becomes two messages:
//! the prompt (user: [`ImportOptions::username`]) at `datetime_utc`, and the
//! answer (the `resolved_model`, else `model`, as username and `model`) at
//! `datetime_utc` + `duration_ms`, answering it; within a conversation each
//! prompt answers the previous answer. `input_tokens`/`output_tokens` fill
//! `usage`. Attachments and fragments are noted by path/URL/source. The
//! system prompt, options and the raw JSON columns are kept under
//! `x_import`. Conversation names become titles.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, limits::Limit, types::ValueRef};
use serde_json::{Map, Value};
use wo_format::{Role, Usage};

use crate::conv::{self, Conversation, Node, nanos_from_iso};
use crate::{ImportOptions, Imported, InteropError, Step, Warning};

const HINT: &str = "`llm logs path` prints where llm keeps logs.db; pass that file";
const MILLI: i128 = 1_000_000;

/// True when `path` starts with SQLite's header.
pub fn is_sqlite(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == b"SQLite format 3\0"
}

/// How much of a database the importer reads: a `logs.db` is untrusted
/// input, and SQLite will otherwise compute whatever its schema asks for.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Rows read from one table.
    pub max_rows: u64,
    /// The largest text or blob SQLite may make (`SQLITE_LIMIT_LENGTH`): a
    /// larger value stops the import with an error instead of being built.
    pub max_value_bytes: i32,
    /// Text read from all rows together.
    pub max_total_bytes: u64,
    /// How long reading may take, all queries together.
    pub time: Duration,
}

/// The bounds [`import`] reads with: far above any `logs.db` llm writes
/// (a response is rarely over a megabyte; a state file is at most 256 MiB).
pub const BOUNDS: Bounds = Bounds {
    max_rows: 2_000_000,
    max_value_bytes: 64 << 20,
    max_total_bytes: 1 << 30,
    time: Duration::from_secs(120),
};

fn err(path: &Path, table: &str, e: impl std::fmt::Display) -> InteropError {
    InteropError::Sqlite {
        path: path.to_owned(),
        table: table.to_owned(),
        message: e.to_string(),
        hint: HINT.to_owned(),
    }
}

/// An SQLite error, saying which bound stopped the read when one did.
fn sql_err(path: &Path, table: &str, bounds: &Bounds, e: rusqlite::Error) -> InteropError {
    let message = match e.sqlite_error_code() {
        Some(ErrorCode::OperationInterrupted) => format!(
            "reading took longer than {} s, the limit; stopped (nothing was imported)",
            bounds.time.as_secs_f64()
        ),
        Some(ErrorCode::TooBig) => format!(
            "a value is larger than {} bytes, the limit; stopped (nothing was imported)",
            bounds.max_value_bytes
        ),
        _ => e.to_string(),
    };
    err(path, table, message)
}

/// `path` as an SQLite URI (`file:` + the absolute path, percent-encoded)
/// opened immutable: SQLite then takes no lock and never creates a journal,
/// `-wal` or `-shm` file beside it.
fn immutable_uri(path: &Path) -> std::io::Result<String> {
    let abs = std::path::absolute(path)?;
    let mut uri = String::from("file:");
    for &b in abs.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?mode=ro&immutable=1");
    Ok(uri)
}

/// Opens `path` immutable and read-only (see [`immutable_uri`], then
/// `query_only`), so nothing is written, with the value-size limit and a
/// progress handler that stops any query past the time bound.
fn open(path: &Path, bounds: &Bounds) -> Result<Connection, InteropError> {
    if !path.is_file() {
        return Err(InteropError::NotFound {
            path: path.to_owned(),
            hint: HINT.to_owned(),
        });
    }
    let uri = immutable_uri(path).map_err(|e| err(path, "-", e))?;
    let mut conn = Connection::open_with_flags(
        &uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )
    .map_err(|e| sql_err(path, "-", bounds, e))?;
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| sql_err(path, "-", bounds, e))?;
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, bounds.max_value_bytes)
        .map_err(|e| sql_err(path, "-", bounds, e))?;
    let deadline = Instant::now() + bounds.time;
    conn.progress_handler(1000, Some(move || Instant::now() >= deadline))
        .map_err(|e| sql_err(path, "-", bounds, e))?;
    Ok(conn)
}

/// What `name` is in the database: `Ok(true)` a real table, `Ok(false)`
/// nothing by that name, an error when it is something else (a view, a
/// virtual table), which is never read.
fn is_table(conn: &Connection, path: &Path, name: &str) -> Result<bool, InteropError> {
    let mut stmt = conn
        .prepare("SELECT type, sql FROM sqlite_master WHERE name = ?1 COLLATE NOCASE")
        .map_err(|e| err(path, name, e))?;
    let found: Vec<(String, Option<String>)> = stmt
        .query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(|e| err(path, name, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| err(path, name, e))?;
    match found.as_slice() {
        [] => Ok(false),
        [(kind, sql)]
            if kind == "table"
                && !sql.as_deref().is_some_and(|s| {
                    s.trim_start()
                        .get(..14)
                        .is_some_and(|h| h.eq_ignore_ascii_case("create virtual"))
                }) =>
        {
            Ok(true)
        }
        [(kind, _)] => Err(err(
            path,
            name,
            format!(
                "is a {}, not a table: llm writes tables, and wo reads nothing else from a \
                 database (a view can compute without end)",
                if kind == "table" {
                    "virtual table"
                } else {
                    kind
                }
            ),
        )),
        _ => Err(err(
            path,
            name,
            "is defined more than once: not a database llm wrote",
        )),
    }
}

/// The columns of `table` (empty when there is no such table; an error when
/// it is not a real table).
fn columns(conn: &Connection, path: &Path, table: &str) -> Result<Vec<String>, InteropError> {
    if !is_table(conn, path, table)? {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare(&format!("PRAGMA table_info(\"{table}\")"))
        .map_err(|e| err(path, table, e))?;
    let cols = stmt
        .query_map([], |r| r.get::<_, String>(1))
        .map_err(|e| err(path, table, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(path, table, e))?;
    Ok(cols)
}

/// A cell as JSON (text, numbers; blobs by size only).
fn cell(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::String(format!("[{} bytes of binary data]", b.len())),
    }
}

/// Text read so far, against [`Bounds::max_total_bytes`].
struct Budget<'a> {
    bounds: &'a Bounds,
    used: u64,
}

impl Budget<'_> {
    fn spend(&mut self, path: &Path, table: &str, bytes: u64) -> Result<(), InteropError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.bounds.max_total_bytes {
            return Err(err(
                path,
                table,
                format!(
                    "the database holds more than {} bytes of text, the limit; stopped \
                     (nothing was imported)",
                    self.bounds.max_total_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// The bytes a cell adds to what is held.
fn cell_size(v: &ValueRef<'_>) -> u64 {
    match v {
        ValueRef::Text(t) => t.len() as u64,
        _ => 8,
    }
}

/// The bytes the first `n` cells of a row add to what is held.
fn row_size(r: &rusqlite::Row<'_>, n: usize) -> u64 {
    (0..n)
        .map(|i| r.get_ref(i).map_or(0, |v| cell_size(&v)))
        .sum()
}

/// Reads the table as rows of JSON objects keyed by column name.
fn rows(
    conn: &Connection,
    path: &Path,
    table: &str,
    order: &str,
    budget: &mut Budget<'_>,
) -> Result<Vec<Map<String, Value>>, InteropError> {
    let bounds = *budget.bounds;
    let cols = columns(conn, path, table)?;
    if cols.is_empty() {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM \"{table}\" {order}"))
        .map_err(|e| sql_err(path, table, &bounds, e))?;
    let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let mut out = Vec::new();
    let mut q = stmt
        .query([])
        .map_err(|e| sql_err(path, table, &bounds, e))?;
    while let Some(r) = q.next().map_err(|e| sql_err(path, table, &bounds, e))? {
        if out.len() as u64 >= bounds.max_rows {
            return Err(err(
                path,
                table,
                format!(
                    "more than {} rows, the limit; stopped (nothing was imported)",
                    bounds.max_rows
                ),
            ));
        }
        let mut m = Map::new();
        for (i, n) in names.iter().enumerate() {
            let v = r.get_ref(i).map_err(|e| sql_err(path, table, &bounds, e))?;
            budget.spend(path, table, cell_size(&v))?;
            m.insert(n.clone(), cell(v));
        }
        out.push(m);
    }
    Ok(out)
}

/// Imports `logs.db` (see the module docs) within [`BOUNDS`].
pub fn import(path: &Path, opts: &ImportOptions) -> Result<Imported, InteropError> {
    import_bounded(path, opts, &BOUNDS)
}

/// [`import`] within `bounds`.
pub fn import_bounded(
    path: &Path,
    opts: &ImportOptions,
    bounds: &Bounds,
) -> Result<Imported, InteropError> {
    opts.progress.report(Step::Reading);
    let conn = open(path, bounds)?;
    let mut budget = Budget { bounds, used: 0 };
    let resp_cols = columns(&conn, path, "responses")?;
    for needed in ["id", "prompt", "response", "datetime_utc"] {
        if !resp_cols.iter().any(|c| c == needed) {
            return Err(err(
                path,
                "responses",
                if resp_cols.is_empty() {
                    "no such table: this is not an llm logs database (or one from before llm 0.5)"
                        .to_owned()
                } else {
                    format!("no column {needed}: not a database llm wrote")
                },
            ));
        }
    }
    opts.progress.report(Step::Parsing);
    let conversations_rows = rows(&conn, path, "conversations", "", &mut budget)?;
    let responses = rows(
        &conn,
        path,
        "responses",
        "ORDER BY datetime_utc, id",
        &mut budget,
    )?;
    // Attachments and fragments by response id, in their order.
    let mut notes: HashMap<String, Vec<String>> = HashMap::new();
    if !columns(&conn, path, "prompt_attachments")?.is_empty()
        && !columns(&conn, path, "attachments")?.is_empty()
    {
        let mut stmt = conn
            .prepare(
                "SELECT pa.response_id, a.type, a.path, a.url, length(a.content) \
                 FROM prompt_attachments pa JOIN attachments a ON a.id = pa.attachment_id \
                 ORDER BY pa.response_id, pa.\"order\"",
            )
            .map_err(|e| sql_err(path, "prompt_attachments", bounds, e))?;
        let mut q = stmt
            .query([])
            .map_err(|e| sql_err(path, "prompt_attachments", bounds, e))?;
        while let Some(r) = q
            .next()
            .map_err(|e| sql_err(path, "prompt_attachments", bounds, e))?
        {
            budget.spend(path, "prompt_attachments", row_size(r, 5))?;
            let rid: String = r.get(0).unwrap_or_default();
            let mime: Option<String> = r.get(1).unwrap_or(None);
            let p: Option<String> = r.get(2).unwrap_or(None);
            let url: Option<String> = r.get(3).unwrap_or(None);
            let len: Option<i64> = r.get(4).unwrap_or(None);
            let what = p
                .or(url)
                .or_else(|| len.map(|n| format!("{n} bytes")))
                .unwrap_or_default();
            let mime = mime.map(|m| format!(" ({m})")).unwrap_or_default();
            notes
                .entry(rid)
                .or_default()
                .push(format!("[attachment: {what}{mime}]"));
        }
    }
    if !columns(&conn, path, "prompt_fragments")?.is_empty()
        && !columns(&conn, path, "fragments")?.is_empty()
    {
        let mut stmt = conn
            .prepare(
                "SELECT pf.response_id, f.source, f.hash FROM prompt_fragments pf \
                 JOIN fragments f ON f.id = pf.fragment_id ORDER BY pf.response_id, pf.\"order\"",
            )
            .map_err(|e| sql_err(path, "prompt_fragments", bounds, e))?;
        let mut q = stmt
            .query([])
            .map_err(|e| sql_err(path, "prompt_fragments", bounds, e))?;
        while let Some(r) = q
            .next()
            .map_err(|e| sql_err(path, "prompt_fragments", bounds, e))?
        {
            budget.spend(path, "prompt_fragments", row_size(r, 3))?;
            let rid: String = r.get(0).unwrap_or_default();
            let source: Option<String> = r.get(1).unwrap_or(None);
            let hash: Option<String> = r.get(2).unwrap_or(None);
            notes.entry(rid).or_default().push(format!(
                "[fragment: {}]",
                source.or(hash).unwrap_or_default()
            ));
        }
    }
    drop(conn);

    let mut warnings = Vec::new();
    // Immutable reading ignores a WAL-mode database's log: what llm wrote
    // since the last checkpoint is not in the file read.
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
        warnings.push(Warning::new(
            path,
            format!(
                "{} was not read (wo never writes beside a source): responses logged since \
                 llm's last checkpoint may be missing; run `sqlite3 {} 'PRAGMA \
                 wal_checkpoint'` after llm exits, then import again",
                std::path::Path::new(&wal).display(),
                path.display()
            ),
        ));
    }
    let mut convs: Vec<Conversation> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for mut c in conversations_rows {
        let id = c
            .remove("id")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let title = c.remove("name").and_then(|v| v.as_str().map(str::to_owned));
        crate::source::compact(&mut c);
        by_id.insert(id.clone(), convs.len());
        convs.push(Conversation {
            id: id.clone(),
            title,
            fields: c,
            location: format!("conversations id {id}"),
            ..Default::default()
        });
    }
    // The last answer of each conversation, which the next prompt follows.
    let mut last: HashMap<usize, String> = HashMap::new();
    for mut r in responses {
        let rid = match r.remove("id") {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => continue,
        };
        let conv_id = r
            .remove("conversation_id")
            .and_then(|v| v.as_str().map(str::to_owned));
        let ci = match conv_id {
            Some(c) if by_id.contains_key(&c) => by_id[&c],
            other => {
                // A response outside any conversation row: its own.
                let id = other.unwrap_or_else(|| rid.clone());
                by_id.insert(id.clone(), convs.len());
                convs.push(Conversation {
                    id: id.clone(),
                    location: format!("responses id {rid}"),
                    ..Default::default()
                });
                convs.len() - 1
            }
        };
        let when = r.remove("datetime_utc");
        let time = when
            .as_ref()
            .and_then(Value::as_str)
            .and_then(nanos_from_iso);
        if time.is_none() {
            warnings.push(Warning::new(
                path,
                format!(
                    "responses id {rid}: datetime_utc {} is not a date; the time is derived",
                    when.unwrap_or(Value::Null)
                ),
            ));
        }
        let duration = r
            .get("duration_ms")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .max(0);
        let model = r
            .get("resolved_model")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .or_else(|| r.get("model").and_then(Value::as_str))
            .map(str::to_owned);
        let mut prompt = r
            .remove("prompt")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        for n in notes.remove(&rid).unwrap_or_default() {
            if !prompt.is_empty() {
                prompt.push_str("\n\n");
            }
            prompt.push_str(&n);
        }
        let answer = r
            .remove("response")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let usage = {
            let i = r.remove("input_tokens").and_then(|v| v.as_u64());
            let o = r.remove("output_tokens").and_then(|v| v.as_u64());
            (i.is_some() || o.is_some()).then(|| Usage {
                prompt_tokens: i,
                completion_tokens: o,
                extra: Default::default(),
            })
        };
        // The prompt's own fields; the rest of the row stays with the answer.
        let mut prompt_fields = Map::new();
        for k in ["system", "prompt_json", "options_json", "schema_id"] {
            if let Some(v) = r.remove(k) {
                prompt_fields.insert(k.to_owned(), v);
            }
        }
        crate::source::compact(&mut prompt_fields);
        crate::source::compact(&mut r);

        let q_id = format!("{rid}:prompt");
        let a_id = format!("{rid}:response");
        let mut q = Node::new(q_id.clone(), Role::User, opts.username.clone());
        q.parent = last.get(&ci).cloned();
        q.time = time;
        q.text = prompt;
        q.fields = prompt_fields;
        let name = model.clone().unwrap_or_else(|| opts.assistant_name.clone());
        let mut a = Node::new(a_id.clone(), Role::Assistant, name);
        a.parent = Some(q_id);
        a.model = model;
        a.time = time.map(|t| t + i128::from(duration) * MILLI + 1_000);
        a.text = answer;
        a.usage = usage;
        a.fields = r;
        let conv = &mut convs[ci];
        if conv.time.is_none() {
            conv.time = time;
        }
        conv.nodes.push(q);
        conv.nodes.push(a);
        last.insert(ci, a_id);
    }
    convs.retain(|c| !c.nodes.is_empty());
    Ok(conv::build("llm", path, convs, warnings, opts))
}
