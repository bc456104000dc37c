//! `wo merge`.

use std::process::ExitCode;

use anyhow::Result;
use wo_store::exports::{find_exports, merge_files};

use super::open_store;
use crate::cli::{GlobalOpts, MergeArgs};
use crate::render;

pub fn run(g: &GlobalOpts, args: MergeArgs) -> Result<ExitCode> {
    let mut store = open_store(g)?;
    let auto = args.files.is_empty();
    let files = if auto {
        find_exports(store.path())
    } else {
        args.files.clone()
    };
    if files.is_empty() {
        outln!(
            "nothing to merge: no llm_*.json beside {}",
            store.path().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let outcomes = merge_files(&mut store, &files, args.dry_run, auto && !args.keep)?;
    let mut failed = false;
    let verb = if args.dry_run {
        "would merge"
    } else {
        "merged"
    };
    for o in &outcomes {
        match &o.result {
            Ok(report) => {
                for pointer in &o.sanitised {
                    eoutln!(
                        "warning: {}: {pointer}: not valid XHTML, sanitised",
                        o.path.display()
                    );
                }
                outln!(
                    "{verb} {}: {}",
                    o.path.display(),
                    render::merge_report(report)
                );
                if let Some(to) = &o.renamed_to {
                    outln!("  renamed to {}", to.display());
                }
            }
            Err(e) => {
                failed = true;
                eoutln!("skipped {}: {e}", o.path.display());
            }
        }
    }
    Ok(if failed {
        ExitCode::from(crate::EXIT_USAGE)
    } else {
        ExitCode::SUCCESS
    })
}
