//! `wo export` and `wo import`.

use std::process::ExitCode;

use anyhow::{Result, bail};
use wo_store::exports::{merge_files, write_export};

use super::open_store;
use crate::cli::{ExportArgs, ExportLayout, GlobalOpts, ImportArgs, ImportFormat};
use crate::render;

pub fn export(g: &GlobalOpts, args: ExportArgs) -> Result<ExitCode> {
    let store = open_store(g)?;
    match args.layout {
        ExportLayout::Llm => {
            let dir = match &args.dir {
                Some(d) => d.clone(),
                None => std::env::current_dir()?,
            };
            let path = write_export(store.state(), &dir)?;
            println!("exported {}", path.display());
        }
        ExportLayout::Profiles => {
            bail!("--layout profiles is not available in this build");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn import(g: &GlobalOpts, args: ImportArgs) -> Result<ExitCode> {
    let mut store = open_store(g)?;
    match args.format {
        ImportFormat::Auto | ImportFormat::Llm => {
            let outcomes = merge_files(
                &mut store,
                std::slice::from_ref(&args.source),
                args.dry_run,
                false,
            )?;
            for o in outcomes {
                let report = o.result?;
                let verb = if args.dry_run {
                    "would import"
                } else {
                    "imported"
                };
                println!(
                    "{verb} {}: {}",
                    o.path.display(),
                    render::merge_report(&report)
                );
            }
        }
        ImportFormat::OpenaiCli | ImportFormat::Profiles => {
            bail!("this import format is not available in this build");
        }
    }
    Ok(ExitCode::SUCCESS)
}
