//! `wo validate`.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;

use crate::cli::ValidateArgs;

pub fn run(args: ValidateArgs) -> Result<ExitCode> {
    let mut all_valid = true;
    for file in &args.files {
        let shown = file.display().to_string();
        let (issues, warnings) = match std::fs::read(file) {
            Ok(bytes) => wo_format::validate_bytes(&bytes),
            Err(e) => (
                vec![wo_format::Issue {
                    pointer: String::new(),
                    rule: "read",
                    message: format!("cannot read: {e}"),
                }],
                Vec::new(),
            ),
        };
        all_valid &= issues.is_empty();
        if args.json {
            let list = |v: &[wo_format::Issue]| {
                v.iter()
                    .map(|i| json!({"pointer": i.pointer, "rule": i.rule, "message": i.message}))
                    .collect::<Vec<_>>()
            };
            outln!(
                "{}",
                crate::render::json(
                    &json!({"file": shown, "valid": issues.is_empty(), "errors": list(&issues), "warnings": list(&warnings)})
                )?
            );
            continue;
        }
        if issues.is_empty() {
            outln!("{shown}: valid");
        }
        for issue in &issues {
            outln!("{shown}: error: {issue}");
        }
        for warning in &warnings {
            outln!("{shown}: warning: {warning}");
        }
    }
    Ok(if all_valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::EXIT_USAGE)
    })
}
