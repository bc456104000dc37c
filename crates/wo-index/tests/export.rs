//! Export behaviour: every artifact exists and follows the seed's formats, output is
//! byte-identical for identical input, and the report compares export and source sizes.

mod common;

use std::io::Read;
use std::path::Path;

use common::{PNG, copy_tree, project, snapshot_dir, write};
use wo_index::{Index, IndexOptions, Layout, PackOptions, index_directory, pack};

fn build(root: &Path) -> Index {
    index_directory(root, &IndexOptions::default(), &|_| {}).unwrap();
    Index::open(root).unwrap()
}

fn opts() -> PackOptions {
    PackOptions {
        layout: Layout::Full,
        project_name: Some("demo".into()),
        ..PackOptions::default()
    }
}

fn zip_entries(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..archive.len())
        .map(|i| {
            let mut f = archive.by_index(i).unwrap();
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).unwrap();
            (f.name().unwrap().to_string(), bytes)
        })
        .collect()
}

#[test]
fn pack_writes_every_artifact_in_seed_formats() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    project(src.path());
    let index = build(src.path());
    let report = pack(&index, out.path(), &opts()).unwrap();
    let o = out.path();
    for name in [
        "llm.md",
        "outline.md",
        "catalog.llm.md",
        "manifest.llm.tsv",
        "manifest.json",
        "manifest.min.json",
        "llms.txt",
        "AGENTS.md",
        "export.zip",
        "export.compact.zip",
        "chunks/c0001.md",
        "images/img/logo.png",
    ] {
        assert!(o.join(name).exists(), "{name} missing");
    }
    assert_eq!(std::fs::read(o.join("images/img/logo.png")).unwrap(), PNG);
    let data = index.data();
    let n = data.chunks.len();

    // manifest.llm.tsv: header, then D/P/K/F/C rows with fixed field counts.
    let tsv = std::fs::read_to_string(o.join("manifest.llm.tsv")).unwrap();
    let mut lines = tsv.lines();
    assert_eq!(
        lines.next().unwrap(),
        format!("llmx_manifest_llm_tsv\t4\t{}", data.index_id)
    );
    let mut counts = std::collections::BTreeMap::new();
    let mut dirs = Vec::new();
    let mut paths = Vec::new();
    let mut c_tokens = 0u64;
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let want = match f[0] {
            "D" => 3,
            "P" => 4,
            "K" => 3,
            "F" => 7,
            "C" => 8,
            other => panic!("unknown row {other}"),
        };
        assert_eq!(f.len(), want, "{line}");
        *counts.entry(f[0]).or_insert(0) += 1;
        match f[0] {
            "D" => dirs.push(f[2].to_string()),
            "P" => {
                let d: usize = f[2].parse().unwrap();
                paths.push(format!("{}{}", dirs[d], f[3]));
            }
            "C" => c_tokens += f[6].parse::<u64>().unwrap(),
            _ => {}
        }
    }
    assert_eq!(counts["C"], n);
    assert_eq!(counts["F"], data.files.len());
    let indexed: Vec<String> = data.files.iter().map(|f| f.path.clone()).collect();
    assert_eq!(paths, indexed);
    assert_eq!(c_tokens, report.tokens);
    assert!(report.tokens > 0);

    // manifest.json v2 and manifest.min.json v4: column headers match row widths.
    let v2: serde_json::Value =
        serde_json::from_slice(&std::fs::read(o.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(v2["format_version"], 2);
    let cols = v2["chunk_columns"].as_array().unwrap().len();
    assert_eq!(v2["chunks"].as_array().unwrap().len(), n);
    assert!(
        v2["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r.as_array().unwrap().len() == cols)
    );
    assert_eq!(v2["chunks"][0][1], data.chunks[0].id.as_str());
    let v4: serde_json::Value =
        serde_json::from_slice(&std::fs::read(o.join("manifest.min.json")).unwrap()).unwrap();
    assert_eq!(v4["format_version"], 4);
    let cols4: Vec<&str> = v4["chunk_columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!cols4.contains(&"id") && cols4.contains(&"heading_last"));
    assert_eq!(v4["chunks"][0][0], "c0001");

    // Compact chunk header.
    let c1 = std::fs::read_to_string(o.join("chunks/c0001.md")).unwrap();
    let header: Vec<&str> = c1.lines().next().unwrap().split('\t').collect();
    assert_eq!(header[0], "@llmx");
    assert_eq!(header[1], "c0001");
    assert_eq!(header.len(), 7);
    assert!(c1.contains(&data.chunks[0].content));

    // Zips: full has YAML chunks and index.json; compact has headers only.
    let full = zip_entries(&o.join("export.zip"));
    let names: Vec<&str> = full.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "llm.md",
        "outline.md",
        "index.json",
        "manifest.json",
        "manifest.min.json",
        "manifest.llm.tsv",
        "images/img/logo.png",
    ] {
        assert!(names.contains(&want), "{want} not in export.zip");
    }
    let yaml = &full.iter().find(|(n, _)| n == "chunks/c0001.md").unwrap().1;
    let yaml = String::from_utf8(yaml.clone()).unwrap();
    assert!(yaml.starts_with("---\nref: \"c0001\"\nid: \""));
    assert!(yaml.contains(&format!(
        "content_sha256: \"{}\"",
        data.chunks[0].content_hash
    )));
    let compact = zip_entries(&o.join("export.compact.zip"));
    let cnames: Vec<&str> = compact.iter().map(|(n, _)| n.as_str()).collect();
    assert!(cnames.contains(&"manifest.llm.tsv") && !cnames.contains(&"index.json"));
    assert_eq!(
        compact
            .iter()
            .filter(|(n, _)| n.starts_with("chunks/"))
            .count(),
        n
    );

    // llms.txt follows llmstxt.org: H1, blockquote, H2 sections of link lists.
    let llms = std::fs::read_to_string(o.join("llms.txt")).unwrap();
    let mut l = llms.lines();
    assert_eq!(l.next(), Some("# demo"));
    assert_eq!(l.next(), Some(""));
    assert!(l.next().unwrap().starts_with("> "));
    assert!(llms.contains("\n## Docs\n\n- [README.md](chunks/c0001.md)"));
    assert!(llms.contains("\n## Optional\n"));
    for line in llms.lines().filter(|x| x.starts_with("- ")) {
        assert!(line.starts_with("- ["), "{line}");
    }
    let agents = std::fs::read_to_string(o.join("AGENTS.md")).unwrap();
    assert!(agents.starts_with("# AGENTS.md\n") && agents.contains("untrusted"));

    // Outline lists every chunk once, under a per-file header with tokens.
    let outline = std::fs::read_to_string(o.join("outline.md")).unwrap();
    assert_eq!(outline.lines().filter(|x| x.starts_with("- c")).count(), n);
    assert!(outline.contains("### src/app.js (js, "));
    assert!(outline.contains("`loginUser`"));
    let catalog = std::fs::read_to_string(o.join("catalog.llm.md")).unwrap();
    assert!(catalog.contains("- src/ files=2 tok="));

    // The report measures the export against the source.
    assert_eq!(report.source_files, data.files.len());
    assert_eq!(report.export_files, snapshot_dir(o).len());
    let bytes: u64 = snapshot_dir(o).iter().map(|(_, b)| b.len() as u64).sum();
    assert_eq!(report.export_bytes, bytes);
}

#[test]
fn identical_input_gives_byte_identical_exports() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    project(a.path());
    copy_tree(a.path(), b.path());
    let out_a = tempfile::tempdir().unwrap();
    let out_b = tempfile::tempdir().unwrap();
    let ia = build(a.path());
    let ib = build(b.path());
    pack(&ia, out_a.path(), &opts()).unwrap();
    pack(&ib, out_b.path(), &opts()).unwrap();
    let sa = snapshot_dir(out_a.path());
    assert_eq!(sa, snapshot_dir(out_b.path()));
    // Re-packing over a previous export (token cache now warm) changes nothing either.
    let again = pack(&ia, out_a.path(), &opts()).unwrap();
    assert_eq!(again.tokens_computed, 0);
    assert_eq!(sa, snapshot_dir(out_a.path()));
}

#[test]
fn repack_removes_stale_chunks_and_refuses_foreign_dirs() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    project(src.path());
    let index = build(src.path());
    pack(&index, out.path(), &opts()).unwrap();
    let before = snapshot_dir(out.path()).len();
    // Shrink the project: fewer chunks must mean fewer chunk files.
    std::fs::remove_dir_all(src.path().join("docs")).unwrap();
    let index = build(src.path());
    pack(&index, out.path(), &opts()).unwrap();
    let files = snapshot_dir(out.path());
    let chunk_files = files
        .iter()
        .filter(|(n, _)| n.starts_with("chunks/"))
        .count();
    assert_eq!(chunk_files, index.data().chunks.len());
    assert!(files.len() < before);

    // Compact layout drops the verbose artifacts left by a full export.
    let small = PackOptions {
        layout: Layout::Compact,
        zips: false,
        ..opts()
    };
    let r = pack(&index, out.path(), &small).unwrap();
    assert!(!out.path().join("outline.md").exists());
    assert!(!out.path().join("export.zip").exists());
    assert!(out.path().join("manifest.llm.tsv").exists());
    assert_eq!(r.zip_bytes, 0);

    let foreign = tempfile::tempdir().unwrap();
    write(foreign.path(), "keep.txt", "mine");
    let err = pack(&index, foreign.path(), &opts()).unwrap_err();
    assert!(err.to_string().contains("not a previous export"), "{err}");
    assert!(foreign.path().join("keep.txt").exists());
}

#[test]
fn text_repeats_are_compacted_in_chunk_files() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    write(
        src.path(),
        "log.txt",
        "start\nsame\nsame\nsame\nsame\nsame\nend\n",
    );
    let index = build(src.path());
    pack(&index, out.path(), &opts()).unwrap();
    let body = std::fs::read_to_string(out.path().join("chunks/c0001.md")).unwrap();
    assert!(
        body.ends_with("start\nsame\n[previous line repeated 4 more times]\nend\n"),
        "{body}"
    );
}

#[test]
fn auto_layout_keeps_small_projects_small() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    project(src.path());
    let index = build(src.path());
    let auto = PackOptions {
        project_name: Some("demo".into()),
        ..PackOptions::default()
    };
    let r = pack(&index, out.path(), &auto).unwrap();
    assert_eq!(r.layout, Layout::Archive);
    let names: Vec<String> = snapshot_dir(out.path())
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        vec![
            "AGENTS.md",
            "export.compact.zip",
            "export.zip",
            "llm.md",
            "llms.txt"
        ]
    );
    assert_eq!(r.export_files, 5);
    assert!(
        std::fs::read_to_string(out.path().join("llm.md"))
            .unwrap()
            .contains("inside export.compact.zip")
    );
    let compact = zip_entries(&out.path().join("export.compact.zip"));
    let cnames: Vec<&str> = compact.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "llm.md",
        "llms.txt",
        "AGENTS.md",
        "manifest.llm.tsv",
        "chunks/c0001.md",
    ] {
        assert!(cnames.contains(&want), "{want}");
    }
    // Switching to a full layout later replaces it cleanly, and back again.
    pack(&index, out.path(), &opts()).unwrap();
    assert!(out.path().join("chunks/c0001.md").exists());
    pack(&index, out.path(), &auto).unwrap();
    assert!(!out.path().join("chunks").exists());
    assert_eq!(snapshot_dir(out.path()).len(), 5);
}

#[test]
fn auto_layout_keeps_larger_projects_near_their_source_size() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // Enough Markdown sections for more than AUTO_ARCHIVE_MAX_CHUNKS chunks.
    for f in 0..30 {
        let mut text = String::new();
        for s in 0..25 {
            text.push_str(&format!(
                "## Section {f}.{s}\n\nNotes about kilns, glazes and firing schedules number {s} in file {f}; \
                 the cone, the ramp and the hold are recorded here with a few more words.\n\n"
            ));
        }
        std::fs::write(src.path().join(format!("notes{f}.md")), text).unwrap();
    }
    let index = build(src.path());
    assert!(index.data().chunks.len() >= wo_index::AUTO_ARCHIVE_MAX_CHUNKS);
    let r = pack(&index, out.path(), &PackOptions::default()).unwrap();
    assert_eq!(r.layout, Layout::Compact);
    assert_eq!(r.zip_bytes, 0, "no zips: the loose chunks are the export");
    assert!(!out.path().join("export.zip").exists());
    let ratio = r.export_bytes as f64 / r.source_bytes as f64;
    assert!(ratio < 2.0, "export is {ratio:.2}× the source");
    // Asking for zips explicitly still gets them.
    let out2 = tempfile::tempdir().unwrap();
    let r = pack(
        &index,
        out2.path(),
        &PackOptions {
            layout: Layout::Full,
            ..PackOptions::default()
        },
    )
    .unwrap();
    assert!(r.zip_bytes > 0);
}

#[test]
fn a_linked_output_folder_is_refused_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    write(&root, "notes.md", "# Notes\n\nKangaroos hop.\n");
    let index = build(&root);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join(".wo-pack")).unwrap();
    let err = pack(&index, &root.join(".wo-pack"), &opts()).unwrap_err();
    assert!(
        err.to_string().contains(".wo-pack: is a symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    // A link planted at a file name inside a previous pack is not written
    // through.
    std::fs::remove_file(root.join(".wo-pack")).unwrap();
    let out = root.join(".wo-pack");
    pack(&index, &out, &opts()).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::fs::remove_file(out.join("llms.txt")).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("llms.txt")).unwrap();
    let err = pack(&index, &out, &opts()).unwrap_err();
    assert!(
        err.to_string().contains("llms.txt: is a symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
}
