//! Drafting the `context` synopsis of a directory from the index catalog
//! (`catalog.llm.md`, product §8): the folders and files that hold most of the
//! project, so every query knows what the directory is about.

use wo_format::xhtml::escape_text_into;

/// At most this many folders and files are named.
const MAX_DIRS: usize = 6;
const MAX_FILES: usize = 8;

/// XHTML synopsis drafted from catalog text: the totals line, the largest
/// folders (below the root) and the largest files. Returns `None` when the
/// catalog names nothing.
pub fn synopsis_from_catalog(catalog: &str) -> Option<String> {
    let mut totals = None;
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut section = "";
    for line in catalog.lines() {
        let line = line.trim_end();
        if line.starts_with("files:") {
            totals = Some(line.to_owned());
        } else if line.ends_with(':') && !line.starts_with('-') {
            section = if line.starts_with("top_dirs") {
                "dirs"
            } else if line.starts_with("top_files") {
                "files"
            } else {
                ""
            };
        } else if let Some(item) = line.strip_prefix("- ") {
            let name = item.split_whitespace().next().unwrap_or("");
            let tokens = field(item, "tok=");
            match section {
                "dirs" if name != "./" && dirs.len() < MAX_DIRS => {
                    let count = field(item, "files=").unwrap_or("?");
                    dirs.push(format!(
                        "{name} ({count} files, {} tokens)",
                        tokens.unwrap_or("?")
                    ));
                }
                "files" if files.len() < MAX_FILES => {
                    let kind = field(item, "kind=").unwrap_or("file");
                    files.push(format!("{name} ({kind}, {} tokens)", tokens.unwrap_or("?")));
                }
                _ => {}
            }
        }
    }
    if dirs.is_empty() && files.is_empty() {
        return None;
    }
    let mut out = String::from("<div><h2>Directory</h2>");
    if let Some(t) = totals {
        out.push_str("<p>");
        escape_text_into(&t, &mut out);
        out.push_str("</p>");
    }
    for (title, items) in [("Main folders", &dirs), ("Largest files", &files)] {
        if items.is_empty() {
            continue;
        }
        out.push_str("<p>");
        out.push_str(title);
        out.push_str(":</p><ul>");
        for item in items {
            out.push_str("<li>");
            escape_text_into(item, &mut out);
            out.push_str("</li>");
        }
        out.push_str("</ul>");
    }
    out.push_str("</div>");
    Some(out)
}

fn field<'a>(item: &'a str, key: &str) -> Option<&'a str> {
    item.split_whitespace().find_map(|w| w.strip_prefix(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_from_catalog() {
        let catalog = "# catalog.llm.md\n\nindex_id: x\nfiles: 8 chunks: 91 tokens: 14088 (o200k_base)\n\n\
top_dirs (recursive):\n- ./ files=8 tok=14088\n- src/ files=5 tok=8247\n\n\
top_files:\n- src/store.rs kind=rust chunks=35 tok=4521 label=Limits refs=c0013\n- a<b>.md kind=markdown chunks=1 tok=3\n";
        let x = synopsis_from_catalog(catalog).unwrap();
        assert_eq!(
            x,
            "<div><h2>Directory</h2><p>files: 8 chunks: 91 tokens: 14088 (o200k_base)</p>\
<p>Main folders:</p><ul><li>src/ (5 files, 8247 tokens)</li></ul>\
<p>Largest files:</p><ul><li>src/store.rs (rust, 4521 tokens)</li><li>a&lt;b&gt;.md (markdown, 3 tokens)</li></ul></div>"
        );
        wo_format::xhtml::check_fragment(&x).unwrap();
        assert_eq!(synopsis_from_catalog("# catalog.llm.md\n"), None);
    }
}
