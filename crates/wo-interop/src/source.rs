//! Reading an importer's input: a file, one entry of a `.zip` archive, JSON
//! with the position of a syntax error, and shape errors that name the JSON
//! pointer of what is wrong.
//!
//! An entry of an archive is named `archive.zip:entry/path` in messages, so
//! the user can find it (`unzip -l`) without guessing which file was meant.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::{ImportOptions, Imported, InteropError, Step};

/// The largest archive entry read (a ChatGPT `conversations.json` of many
/// years is a few hundred MB; a zip bomb's entry is refused by its declared
/// size, and reading stops there whatever the header claims).
pub(crate) const MAX_ENTRY_BYTES: u64 = 4 << 30;

/// How many times its compressed size an entry may inflate to (above
/// [`MIN_INFLATE_CAP`]). Exported JSON compresses 5–20×; a zip bomb
/// (1 MB inflating to 1 GiB) is refused after this much, not read whole.
pub(crate) const MAX_INFLATE_RATIO: u64 = 100;

/// What any entry may inflate to whatever its compressed size.
pub(crate) const MIN_INFLATE_CAP: u64 = 64 << 20;

/// The most an entry of `compressed` bytes is read to.
pub(crate) fn inflate_cap(compressed: u64) -> u64 {
    compressed
        .saturating_mul(MAX_INFLATE_RATIO)
        .clamp(MIN_INFLATE_CAP, MAX_ENTRY_BYTES)
}

/// Reads a whole file; a missing or unreadable one names the path.
pub(crate) fn read_file(path: &Path, hint: &str) -> Result<Vec<u8>, InteropError> {
    std::fs::read(path).map_err(|e| InteropError::io(path, e, hint))
}

/// True when `path` starts with the zip local-file signature.
pub(crate) fn is_zip(path: &Path) -> bool {
    let mut head = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head == *b"PK\x03\x04"
}

/// The display name of an archive entry: `archive.zip:entry`.
pub(crate) fn entry_path(zip: &Path, entry: &str) -> PathBuf {
    PathBuf::from(format!("{}:{entry}", zip.display()))
}

/// Reads the entry of `zip` whose file name is `name` (at the top, else the
/// shallowest one in a folder). Returns its display path and bytes.
pub(crate) fn read_zip_entry(
    zip: &Path,
    name: &str,
    hint: &str,
) -> Result<(PathBuf, Vec<u8>), InteropError> {
    let file = std::fs::File::open(zip).map_err(|e| InteropError::io(zip, e, hint))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| InteropError::Archive {
        path: zip.to_owned(),
        message: format!("not a readable zip archive: {e}"),
        hint: hint.to_owned(),
    })?;
    // A name the zip crate cannot decode is not the one asked for.
    let wanted = archive
        .file_names()
        .filter_map(Result::ok)
        .filter(|n| n == name || n.ends_with(&format!("/{name}")))
        .min_by_key(|n| (n.matches('/').count(), n.to_string()))
        .map(|n| n.into_owned())
        .ok_or_else(|| InteropError::Archive {
            path: zip.to_owned(),
            message: format!("the archive holds no {name}"),
            hint: hint.to_owned(),
        })?;
    let shown = entry_path(zip, &wanted);
    let mut entry = archive
        .by_name(&wanted)
        .map_err(|e| InteropError::Archive {
            path: shown.clone(),
            message: format!("cannot open the entry: {e}"),
            hint: hint.to_owned(),
        })?;
    // The declared sizes may lie: the cap is enforced on what inflates
    // (the zip crate reads at most the declared compressed size).
    let compressed = entry.compressed_size();
    let cap = inflate_cap(compressed);
    let over = |size: String| InteropError::Archive {
        path: shown.clone(),
        message: format!(
            "the entry inflates to {size} bytes, over the {cap}-byte limit for an entry of {} \
             compressed bytes (at most {MAX_INFLATE_RATIO}× that, {MIN_INFLATE_CAP} bytes at \
             least, {MAX_ENTRY_BYTES} at most); nothing was imported",
            compressed
        ),
        hint: "extract it and import the file instead".to_owned(),
    };
    if entry.size() > cap {
        return Err(over(entry.size().to_string()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
    (&mut entry)
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| InteropError::Archive {
            path: shown.clone(),
            message: format!("cannot decompress the entry: {e}"),
            hint: "the archive is damaged; download it again".to_owned(),
        })?;
    if bytes.len() as u64 > cap {
        return Err(over(format!("more than {cap}")));
    }
    Ok((shown, bytes))
}

/// Parses JSON; a syntax error names the line and column.
pub(crate) fn parse_json(bytes: &[u8], shown: &Path, hint: &str) -> Result<Value, InteropError> {
    serde_json::from_slice(bytes).map_err(|e| InteropError::json(shown, &e, hint))
}

/// Reads and parses a JSON input, reporting the reading and parsing
/// steps: the file at `path`, or, when `zip_entry` names one and `path` is
/// a `.zip`, that entry of it. Returns the path messages name the input by
/// (`archive.zip:entry` for an entry) and the value.
pub(crate) fn read_json(
    path: &Path,
    zip_entry: Option<&str>,
    hint: &str,
    opts: &ImportOptions,
) -> Result<(PathBuf, Value), InteropError> {
    opts.progress.report(Step::Reading);
    let (shown, bytes) = match zip_entry {
        Some(entry) if is_zip(path) => read_zip_entry(path, entry, hint)?,
        _ => (path.to_owned(), read_file(path, hint)?),
    };
    opts.progress.report(Step::Parsing);
    let value = parse_json(&bytes, &shown, hint)?;
    Ok((shown, value))
}

/// An importer's whole run on a JSON input: [`read_json`], then its
/// `import_value` on the parsed value.
pub(crate) fn import_json(
    path: &Path,
    zip_entry: Option<&str>,
    hint: &str,
    opts: &ImportOptions,
    import_value: fn(Value, &Path, &ImportOptions) -> Result<Imported, InteropError>,
) -> Result<Imported, InteropError> {
    let (shown, value) = read_json(path, zip_entry, hint, opts)?;
    import_value(value, &shown, opts)
}

/// The conversations of an export: an array's items, or `value` alone when
/// it is one object `is_one` accepts; anything else is a shape error at the
/// root saying it expected an array of `what` (`conversations`, `chats`).
pub(crate) fn items(
    value: Value,
    is_one: impl Fn(&Map<String, Value>) -> bool,
    what: &str,
    shown: &Path,
    hint: &str,
) -> Result<Vec<Value>, InteropError> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Object(o) if is_one(&o) => Ok(vec![Value::Object(o)]),
        other => Err(shape(
            shown,
            "",
            format!("expected an array of {what}, found {}", kind(&other)),
            hint,
        )),
    }
}

/// `value` as an object, or a shape error at `at` saying what `what` (`a
/// conversation`, `a message`) should have been.
pub(crate) fn object(
    value: Value,
    what: &str,
    shown: &Path,
    at: &str,
    hint: &str,
) -> Result<Map<String, Value>, InteropError> {
    match value {
        Value::Object(o) => Ok(o),
        other => Err(shape(
            shown,
            at,
            format!("{what} should be an object, found {}", kind(&other)),
            hint,
        )),
    }
}

/// "an object", "a string", … for messages.
pub(crate) use wo_format::validate::json_kind as kind;

/// Removes the member `key` that `obj` (at `at`) must have. Absent: a
/// shape error at `at` saying `missing`; not what `want` accepts: one at
/// `at/key` saying it should be `what` (e.g. "an array").
#[allow(clippy::too_many_arguments)]
pub(crate) fn take_required<T>(
    obj: &mut Map<String, Value>,
    key: &str,
    want: fn(Value) -> Result<T, Value>,
    what: &str,
    missing: &str,
    shown: &Path,
    at: &str,
    hint: &str,
) -> Result<T, InteropError> {
    match obj.remove(key).map(want) {
        Some(Ok(v)) => Ok(v),
        Some(Err(other)) => Err(shape(
            shown,
            format!("{at}/{key}"),
            format!("`{key}` should be {what}, found {}", kind(&other)),
            hint,
        )),
        None => Err(shape(shown, at, missing, hint)),
    }
}

/// `v` as an array, or `v` back.
pub(crate) fn array(v: Value) -> Result<Vec<Value>, Value> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(other),
    }
}

/// `v` as an object, or `v` back.
pub(crate) fn map(v: Value) -> Result<Map<String, Value>, Value> {
    match v {
        Value::Object(o) => Ok(o),
        other => Err(other),
    }
}

/// The first item of an export that holds an array of items or one item
/// — what format detection looks at.
pub(crate) fn first_item(v: &Value) -> Option<&Map<String, Value>> {
    match v {
        Value::Array(items) => items.first()?.as_object(),
        Value::Object(o) => Some(o),
        _ => None,
    }
}

/// A shape error at `pointer`.
pub(crate) fn shape(
    path: &Path,
    pointer: impl Into<String>,
    message: impl Into<String>,
    hint: &str,
) -> InteropError {
    InteropError::Shape {
        path: path.to_owned(),
        pointer: pointer.into(),
        message: message.into(),
        hint: hint.to_owned(),
    }
}

/// The string at `key` of `obj`: absent and null are `None`; another type is
/// a shape error at `at/key`.
pub(crate) fn opt_str<'a>(
    obj: &'a serde_json::Map<String, Value>,
    key: &str,
    path: &Path,
    at: &str,
    hint: &str,
) -> Result<Option<&'a str>, InteropError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(shape(
            path,
            format!("{at}/{}", crate::ptr(key)),
            format!("`{key}` should be a string, found {}", kind(other)),
            hint,
        )),
    }
}

/// The number at `key` of `obj` (absent and null: `None`).
pub(crate) fn opt_f64(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    path: &Path,
    at: &str,
    hint: &str,
) -> Result<Option<f64>, InteropError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(shape(
            path,
            format!("{at}/{}", crate::ptr(key)),
            format!("`{key}` should be a number, found {}", kind(other)),
            hint,
        )),
    }
}

/// Drops members whose value carries nothing (null, `[]`, `{}`): what is
/// kept under `x_import` stays small without losing information.
pub(crate) fn compact(map: &mut serde_json::Map<String, Value>) {
    map.retain(|_, v| match v {
        Value::Null => false,
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn zip_entries_are_found_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let zip_path = dir.path().join("export.zip");
        let mut w = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
        let o: zip::write::SimpleFileOptions = Default::default();
        w.start_file("deep/conversations.json", o).unwrap();
        w.write_all(b"[1]").unwrap();
        w.start_file("conversations.json", o).unwrap();
        w.write_all(b"[2]").unwrap();
        w.finish().unwrap();
        assert!(is_zip(&zip_path));
        let (shown, bytes) = read_zip_entry(&zip_path, "conversations.json", "h").unwrap();
        assert_eq!(bytes, b"[2]");
        assert!(
            shown
                .to_string_lossy()
                .ends_with("export.zip:conversations.json")
        );
        let err = read_zip_entry(&zip_path, "users.json", "h").unwrap_err();
        assert!(err.to_string().contains("holds no users.json"), "{err}");

        let not_zip = dir.path().join("x.zip");
        std::fs::write(&not_zip, b"PK\x03\x04 garbage").unwrap();
        let err = read_zip_entry(&not_zip, "conversations.json", "h").unwrap_err();
        assert!(err.to_string().contains("not a readable zip"), "{err}");
    }

    #[test]
    fn compact_drops_empty_values_only() {
        let mut m = serde_json::json!({"a": null, "b": [], "c": {}, "d": false, "e": 0, "f": ""})
            .as_object()
            .unwrap()
            .clone();
        compact(&mut m);
        assert_eq!(
            Value::Object(m),
            serde_json::json!({"d": false, "e": 0, "f": ""})
        );
    }
}
