//! `wo-index` in the browser: this crate compiled to WebAssembly
//! (`scripts/build-wasm.sh`) is what the ingestion page (`/ingest.html`)
//! runs to index a folder the person picks, search it, list its outline and
//! symbols, hand chunks to a chat turn and render the exports — wo-index's
//! own functions (`index_files`, `Index::search`, `render_pack`, …), so the
//! page and `wo index`/`wo pack` cannot disagree. It is a separate module
//! from `crates/wo-wasm` because tree-sitter makes it several times larger:
//! only the ingestion page loads it.
//!
//! A thin face: an [`Indexer`] holds the files given and the index built;
//! each method parses its arguments, calls one library function and renders
//! the result as JSON text. Errors are thrown as a string naming the
//! argument. There is no clock and no file system in here.
//!
//! On wasm32, tree-sitter's C needs a few C library symbols the target
//! lacks: `libc_shim.rs` (the malloc family) and `libc_shim.c` (build.rs).

use std::path::Path;

use serde::Deserialize;
use wasm_bindgen::prelude::wasm_bindgen;
use wo_index::{
    Index, IndexOptions, Kind, Layout, PackOptions, Query, RenderedPack, TokenCounter, index_files,
    parse_index_file,
};

#[cfg(target_arch = "wasm32")]
mod libc_shim;

/// What a failed call throws: a message naming the argument at fault.
pub type Failure = String;

/// A folder's index in the page: files in, the index and its exports out.
#[wasm_bindgen]
pub struct Indexer {
    /// The folder's name: the index root's name and the exports' title.
    name: String,
    /// Files given since the last build (images are kept after it, for the exports).
    files: Vec<(String, Vec<u8>)>,
    index: Option<Index>,
    rendered: Option<RenderedPack>,
}

/// A search request from the page (`Query` with the CLI's filter names).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct SearchRequest {
    text: String,
    limit: usize,
    path: Option<String>,
    kind: Option<String>,
    heading: Option<String>,
    symbol: Option<String>,
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

#[wasm_bindgen]
impl Indexer {
    /// An empty indexer for the folder `name`.
    #[wasm_bindgen(constructor)]
    pub fn new(name: &str) -> Indexer {
        Indexer {
            name: name.to_string(),
            files: Vec::new(),
            index: None,
            rendered: None,
        }
    }

    /// Adds one file: `path` relative to the folder, `/`-separated (a bad
    /// path becomes a warning of the build, as a bad name does in `wo index`).
    pub fn add(&mut self, path: String, bytes: Vec<u8>) {
        self.files.push((path, bytes));
    }

    /// Forgets the files given (not the index).
    pub fn clear(&mut self) {
        self.files.clear();
    }

    /// Indexes the files given (`wo_index::index_files`), reusing `previous`
    /// (an `index.json` text, e.g. the one stored after the last build) for
    /// files whose content is unchanged. Returns the report as JSON
    /// (`wo_index::BuildReport`); an unusable `previous` is not an error:
    /// the index is rebuilt and `rebuilt_because` says why.
    pub fn build(&mut self, previous: Option<String>) -> String {
        let (previous, unusable) = match previous
            .as_deref()
            .map(|text| parse_index_file(text.as_bytes(), Path::new("previous index.json")))
        {
            Some(Ok(file)) => (Some(file), None),
            Some(Err(e)) => (None, Some(e.to_string())),
            None => (None, None),
        };
        let (file, mut report) =
            index_files(&self.files, previous, &IndexOptions::default(), &|_| {});
        if report.rebuilt_because.is_none() {
            report.rebuilt_because = unusable;
        }
        // Only images are read again (by the exports); the rest is in the index.
        self.files
            .retain(|(path, _)| wo_index::walk::kind_for_path(path) == Kind::Image);
        self.index = Some(Index::from_file(Path::new(&self.name), file));
        self.rendered = None;
        json(&report)
    }

    /// Restores an index stored earlier (`index.json` text) without its files:
    /// search and outline work; exports then lack the images' bytes (warned).
    pub fn load(&mut self, index_json: &str) -> Result<(), Failure> {
        let file = parse_index_file(index_json.as_bytes(), Path::new("index_json"))
            .map_err(|e| e.to_string())?;
        self.index = Some(Index::from_file(Path::new(&self.name), file));
        self.rendered = None;
        Ok(())
    }

    fn index(&self) -> Result<&Index, Failure> {
        self.index
            .as_ref()
            .ok_or_else(|| "no index yet: call build() or load() first".to_string())
    }

    /// The index as `wo index` writes it (`index.json`'s exact text).
    #[wasm_bindgen(js_name = indexJson)]
    pub fn index_json(&self) -> Result<String, Failure> {
        Ok(json(self.index()?.data()))
    }

    /// Searches (`Index::search`): `query` is JSON `{"text", "limit", "path",
    /// "kind", "heading", "symbol"}` (all optional, as `wo search`'s flags);
    /// returns the hits as JSON.
    pub fn search(&self, query: &str) -> Result<String, Failure> {
        let index = self.index()?;
        let req: SearchRequest = serde_json::from_str(query).map_err(|e| format!("query: {e}"))?;
        let kind = match req.kind.as_deref().filter(|k| !k.is_empty()) {
            Some(k) => {
                Some(Kind::parse(k).ok_or_else(|| format!("query/kind: unknown kind {k:?}"))?)
            }
            None => None,
        };
        let q = Query {
            text: req.text,
            limit: req.limit,
            path_prefix: req.path.filter(|p| !p.is_empty()),
            kind,
            heading_prefix: req.heading.filter(|h| !h.is_empty()),
            symbol_prefix: req.symbol.filter(|s| !s.is_empty()),
        };
        Ok(json(&index.search(&q)))
    }

    /// Headings of the file or folder `path` (`Index::list_outline`), as JSON.
    pub fn outline(&self, path: &str) -> Result<String, Failure> {
        Ok(json(&self.index()?.list_outline(path)))
    }

    /// Symbols of the file or folder `path` (`Index::list_symbols`), as JSON.
    pub fn symbols(&self, path: &str) -> Result<String, Failure> {
        Ok(json(&self.index()?.list_symbols(path)))
    }

    /// One chunk by ref, id or short id, as JSON (`null` when there is none).
    pub fn chunk(&self, key: &str) -> Result<String, Failure> {
        Ok(match self.index()?.get_chunk(key) {
            Some(rec) => json(&serde_json::json!({ "ref": rec.chunk_ref, "chunk": rec.chunk })),
            None => "null".to_string(),
        })
    }

    /// The chunks a chat turn about `question` is offered
    /// (`Index::context_chunks`, the rule `wo ask` follows), as JSON
    /// `[{"id", "label", "text"}]`.
    #[wasm_bindgen(js_name = contextChunks)]
    pub fn context_chunks(&self, question: &str) -> Result<String, Failure> {
        Ok(json(&self.index()?.context_chunks(question)))
    }

    /// Renders the exports (`wo_index::render_pack`, what `wo pack --layout
    /// <layout>` writes; `layout` is `auto`, `full`, `compact` or `archive`)
    /// and keeps them for [`Indexer::export_file`]. Returns
    /// `{"report": …, "files": [[name, size], …]}` as JSON.
    #[wasm_bindgen(js_name = renderExports)]
    pub fn render_exports(&mut self, layout: &str) -> Result<String, Failure> {
        let layout = match layout {
            "auto" => Layout::Auto,
            "full" => Layout::Full,
            "compact" => Layout::Compact,
            "archive" => Layout::Archive,
            other => {
                return Err(format!(
                    "layout: {other:?} is not one of auto, full, compact, archive"
                ));
            }
        };
        let index = self.index()?;
        let opts = PackOptions {
            layout,
            project_name: Some(self.name.clone()),
            ..PackOptions::default()
        };
        let files = &self.files;
        let read_image = |c: &wo_index::Chunk| {
            files
                .iter()
                .find(|(p, _)| *p == c.path)
                .map(|(_, b)| b.clone())
                .ok_or_else(|| "not among the files given".to_string())
        };
        let rendered =
            wo_index::render_pack(index, &opts, &mut TokenCounter::in_memory(), &read_image)
                .map_err(|e| e.to_string())?;
        let sizes: Vec<(&str, usize)> = rendered
            .files
            .iter()
            .map(|(n, b)| (n.as_str(), b.len()))
            .collect();
        let out = json(&serde_json::json!({ "report": rendered.report, "files": sizes }));
        self.rendered = Some(rendered);
        Ok(out)
    }

    /// The bytes of one rendered export (`llm.md`, `chunks/c0001.md`,
    /// `export.zip`, …).
    #[wasm_bindgen(js_name = exportFile)]
    pub fn export_file(&self, name: &str) -> Result<Vec<u8>, Failure> {
        let rendered = self
            .rendered
            .as_ref()
            .ok_or_else(|| "no exports yet: call renderExports() first".to_string())?;
        rendered
            .files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| format!("name: no export named {name:?}"))
    }
}
