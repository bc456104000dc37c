//! Source code: one section per declaration (function, class, impl, type, …) with its symbol,
//! found with tree-sitter grammars for JavaScript, TypeScript/TSX, Rust, Python and Go.
//!
//! Comments and attributes directly above a declaration travel with it. Lines between
//! declarations (imports, constants, statements) become "glue" sections. A declaration larger
//! than `chunk_max_chars` that has a body (class, impl, trait, module) is split into its
//! members, whose symbols are qualified (`Type::method`, `Class.method`); anything still too
//! large is cut by the shared line packer. If the grammar cannot be loaded or the parse yields
//! nothing usable, the file is chunked as plain text.

use std::cell::RefCell;

use tree_sitter::{Language, Node, Parser};

use super::{ChunkOutput, Labels, Packer, chunk_plain, file_lines};
use crate::model::{Kind, WarningKind};
use crate::options::ChunkingConfig;

/// A line range with labels, before packing.
struct Segment {
    first: usize,
    last: usize,
    labels: Labels,
    glue: bool,
}

struct Decl<'t> {
    name: String,
    extra: Vec<String>,
    body: Option<Node<'t>>,
}

impl Decl<'_> {
    /// A declaration of several names (`int a, b;`), or none without any.
    fn named(names: Vec<String>) -> Option<Self> {
        let mut it = names.into_iter();
        it.next().map(|first| Decl {
            name: first,
            extra: it.collect(),
            body: None,
        })
    }
}

struct Ctx<'s> {
    kind: Kind,
    text: &'s str,
    line_chars: Vec<usize>,
    max: usize,
}

impl Ctx<'_> {
    fn node_text(&self, node: Node<'_>) -> &str {
        self.text.get(node.byte_range()).unwrap_or("")
    }

    fn sep(&self) -> &'static str {
        if self.kind == Kind::Rust { "::" } else { "." }
    }

    fn qualify(&self, prefix: Option<&str>, name: &str) -> String {
        match prefix {
            Some(p) if !p.is_empty() => format!("{p}{}{name}", self.sep()),
            _ => name.to_string(),
        }
    }

    fn size(&self, first: usize, last: usize) -> usize {
        self.line_chars
            .get(first.saturating_sub(1)..last.min(self.line_chars.len()))
            .map_or(0, |s| s.iter().sum::<usize>() + s.len())
    }

    fn field_text(&self, node: Node<'_>, field: &str) -> Option<String> {
        node.child_by_field_name(field)
            .map(|n| self.node_text(n).to_string())
            .filter(|s| !s.is_empty())
    }

    fn is_comment(&self, node: Node<'_>) -> bool {
        matches!(
            node.kind(),
            "comment" | "line_comment" | "block_comment" | "attribute_item" | "decorator"
        )
    }

    /// Declaration name, extra names and recursable body of `node`, if it is a declaration.
    fn decl<'t>(&self, node: Node<'t>) -> Option<Decl<'t>> {
        let name = |field: &str| self.field_text(node, field);
        let simple = |body: bool| {
            name("name").map(|n| Decl {
                name: n,
                extra: Vec::new(),
                body: if body {
                    node.child_by_field_name("body")
                } else {
                    None
                },
            })
        };
        match (self.kind, node.kind()) {
            (Kind::JavaScript | Kind::TypeScript, k) => match k {
                "function_declaration"
                | "generator_function_declaration"
                | "function_signature"
                | "type_alias_declaration"
                | "enum_declaration"
                | "method_definition"
                | "method_signature"
                | "abstract_method_signature" => simple(false),
                "class_declaration"
                | "abstract_class_declaration"
                | "interface_declaration"
                | "internal_module"
                | "module" => simple(true),
                "export_statement" => {
                    if let Some(inner) = node.child_by_field_name("declaration") {
                        return self.decl(inner);
                    }
                    let value = node.child_by_field_name("value")?;
                    matches!(
                        value.kind(),
                        "function_expression" | "arrow_function" | "class" | "function"
                    )
                    .then(|| Decl {
                        name: "default".to_string(),
                        extra: Vec::new(),
                        body: None,
                    })
                }
                "lexical_declaration" | "variable_declaration" => {
                    let mut names = Vec::new();
                    let mut cursor = node.walk();
                    for declarator in node.named_children(&mut cursor) {
                        let is_fn = declarator.child_by_field_name("value").is_some_and(|v| {
                            matches!(
                                v.kind(),
                                "arrow_function"
                                    | "function_expression"
                                    | "function"
                                    | "generator_function"
                                    | "class"
                            )
                        });
                        if is_fn && let Some(n) = self.field_text(declarator, "name") {
                            names.push(n);
                        }
                    }
                    Decl::named(names)
                }
                _ => None,
            },
            (Kind::Rust, k) => match k {
                "function_item"
                | "function_signature_item"
                | "struct_item"
                | "enum_item"
                | "union_item"
                | "macro_definition" => simple(false),
                "trait_item" | "mod_item" => simple(true),
                "impl_item" => {
                    let ty = name("type")?;
                    let extra = name("trait").into_iter().collect();
                    Some(Decl {
                        name: ty,
                        extra,
                        body: node.child_by_field_name("body"),
                    })
                }
                _ => None,
            },
            (Kind::Python, k) => match k {
                "function_definition" => simple(false),
                "class_definition" => simple(true),
                "decorated_definition" => {
                    let inner = node.child_by_field_name("definition")?;
                    self.decl(inner)
                }
                _ => None,
            },
            (Kind::Go, k) => match k {
                "function_declaration" => simple(false),
                "method_declaration" => {
                    let method = name("name")?;
                    let receiver = node
                        .child_by_field_name("receiver")
                        .and_then(|r| first_descendant(r, "type_identifier"))
                        .map(|n| self.node_text(n).to_string());
                    Some(Decl {
                        name: match receiver {
                            Some(r) => format!("{r}.{method}"),
                            None => method,
                        },
                        extra: Vec::new(),
                        body: None,
                    })
                }
                "type_declaration" => {
                    let mut names = Vec::new();
                    let mut cursor = node.walk();
                    for spec in node.named_children(&mut cursor) {
                        if let Some(n) = self.field_text(spec, "name") {
                            names.push(n);
                        }
                    }
                    Decl::named(names)
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// Qualified names of the declarations directly inside `body`.
    fn members(&self, body: Node<'_>, prefix: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cursor = body.walk();
        for child in body.named_children(&mut cursor) {
            if let Some(d) = self.decl(child) {
                out.push(self.qualify(Some(prefix), &d.name));
            }
        }
        out
    }

    /// Segments covering lines `from..=to`, built from the named children of `parent`.
    fn segments(
        &self,
        parent: Node<'_>,
        from: usize,
        to: usize,
        prefix: Option<&str>,
        out: &mut Vec<Segment>,
    ) {
        let mut decls: Vec<Segment> = Vec::new();
        let mut comment: Option<(usize, usize)> = None;
        let mut cursor = parent.walk();
        let children: Vec<Node<'_>> = parent.named_children(&mut cursor).collect();
        for child in children {
            let first_row = child.start_position().row + 1;
            let last_row = child.end_position().row + 1;
            if self.is_comment(child) {
                comment = match comment {
                    Some((a, b)) if first_row <= b + 1 => Some((a, last_row.max(b))),
                    _ => Some((first_row, last_row)),
                };
                continue;
            }
            let Some(decl) = self.decl(child) else {
                comment = None;
                continue;
            };
            let mut first = first_row;
            if let Some((a, b)) = comment.take()
                && b + 1 >= first_row
            {
                first = a;
            }
            let last = last_row;
            let qualified = self.qualify(prefix, &decl.name);
            if let Some(prev) = decls.last_mut()
                && first <= prev.last
            {
                // Several declarations on one line (minified code): one segment.
                prev.last = prev.last.max(last);
                prev.labels.symbols.push(qualified);
                continue;
            }
            if self.size(first, last) > self.max
                && let Some(body) = decl.body
            {
                let mut inner = Vec::new();
                self.segments(body, first, last, Some(&qualified), &mut inner);
                if inner.iter().any(|s| !s.glue) {
                    for seg in &mut inner {
                        if seg.glue {
                            seg.labels.symbol = Some(qualified.clone());
                        }
                    }
                    decls.extend(inner);
                    continue;
                }
            }
            let mut symbols = decl.extra;
            if let Some(body) = decl.body {
                symbols.extend(self.members(body, &qualified));
            }
            decls.push(Segment {
                first,
                last,
                labels: Labels {
                    symbol: Some(qualified),
                    symbols,
                    ..Labels::default()
                },
                glue: false,
            });
        }
        // Fill the gaps between declarations with glue segments.
        let mut next = from;
        for seg in decls {
            if seg.first > next {
                out.push(glue(next, seg.first - 1, prefix));
            }
            next = next.max(seg.last + 1);
            out.push(seg);
        }
        if next <= to {
            out.push(glue(next, to, prefix));
        }
    }
}

fn glue(first: usize, last: usize, prefix: Option<&str>) -> Segment {
    Segment {
        first,
        last,
        labels: Labels {
            symbol: prefix.map(str::to_string),
            ..Labels::default()
        },
        glue: true,
    }
}

fn first_descendant<'t>(node: Node<'t>, kind: &str) -> Option<Node<'t>> {
    if node.kind() == kind {
        return Some(node);
    }
    let mut cursor = node.walk();
    let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
    children.into_iter().find_map(|c| first_descendant(c, kind))
}

fn language(kind: Kind, path: &str) -> Option<Language> {
    let lower = path.to_ascii_lowercase();
    Some(match kind {
        Kind::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
        Kind::TypeScript if lower.ends_with(".tsx") => tree_sitter_typescript::LANGUAGE_TSX.into(),
        Kind::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        Kind::Rust => tree_sitter_rust::LANGUAGE.into(),
        Kind::Python => tree_sitter_python::LANGUAGE.into(),
        Kind::Go => tree_sitter_go::LANGUAGE.into(),
        _ => return None,
    })
}

thread_local! {
    /// One parser per thread, reused from file to file (a parser keeps its allocations; setting
    /// a language only points it at the grammar's tables).
    static PARSER: RefCell<Parser> = RefCell::new(Parser::new());
}

pub(crate) fn chunk(
    kind: Kind,
    path: &str,
    text: &str,
    cfg: &ChunkingConfig,
    out: &mut ChunkOutput,
) {
    let fallback = |reason: &str, out: &mut ChunkOutput| {
        out.warnings.push((
            WarningKind::ParseFallback,
            format!("{reason}; chunked as text"),
        ));
        chunk_plain(text, cfg, out);
    };
    let Some(lang) = language(kind, path) else {
        chunk_plain(text, cfg, out);
        return;
    };
    let tree = PARSER.with_borrow_mut(|parser| {
        parser
            .set_language(&lang)
            .map_err(|_| "grammar unavailable")?;
        parser.parse(text, None).ok_or_else(|| {
            // A parse that stopped part-way leaves state behind for a resumed parse.
            parser.reset();
            "parser gave up"
        })
    });
    let tree = match tree {
        Ok(tree) => tree,
        Err(reason) => {
            fallback(reason, out);
            return;
        }
    };
    let lines = file_lines(text);
    let ctx = Ctx {
        kind,
        text,
        line_chars: lines.iter().map(|l| l.text.chars().count()).collect(),
        max: cfg.chunk_max_chars,
    };
    let root = tree.root_node();
    let mut segments = Vec::new();
    ctx.segments(root, 1, lines.len(), None, &mut segments);
    if root.has_error() && segments.iter().all(|s| s.glue) {
        fallback("syntax errors and no declarations found", out);
        return;
    }
    // Fold a tiny trailing glue segment (a lone `}` or `};`) into the segment before it.
    let mut merged: Vec<Segment> = Vec::with_capacity(segments.len());
    for seg in segments {
        if seg.glue && ctx.size(seg.first, seg.last) <= 16 + (seg.last - seg.first) * 2 {
            let blank = lines[seg.first - 1..seg.last.min(lines.len())]
                .iter()
                .all(|l| l.text.trim().chars().all(|c| "}]);,".contains(c)));
            if blank
                && let Some(prev) = merged.last_mut()
                && prev.last + 1 >= seg.first
            {
                prev.last = seg.last;
                continue;
            }
        }
        merged.push(seg);
    }
    let mut packer = Packer::new(cfg);
    for seg in &merged {
        let slice = &lines[seg.first - 1..seg.last.min(lines.len())];
        packer.pack(slice, &seg.labels, &|_| false, &mut out.pieces);
    }
    out.warnings
        .extend(packer.long_lines.into_warning(cfg.chunk_max_chars));
}
