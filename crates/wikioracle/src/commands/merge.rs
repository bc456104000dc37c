//! `wo merge`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use wo_format::merge::MergeReport;
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
                print_merged(verb, &o.path, &o.sanitised, report);
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

/// Prints what merging one file did (or would do): its sanitised fields as
/// warnings, then `verb PATH: counts`.
pub(crate) fn print_merged(verb: &str, path: &Path, sanitised: &[String], report: &MergeReport) {
    for pointer in sanitised {
        eoutln!(
            "warning: {}: {pointer}: not valid XHTML, sanitised",
            path.display()
        );
    }
    outln!(
        "{verb} {}: {}",
        path.display(),
        render::merge_report(report)
    );
}
