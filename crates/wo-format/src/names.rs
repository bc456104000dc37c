//! The names WikiOracle gives the files it keeps beside a project: the
//! state file, its lock and backups, and exports.

/// The state file's conventional name.
pub const STATE_FILE_NAME: &str = "llm.json";

/// True for a file name WikiOracle itself writes beside a state file: the
/// state file (`llm.json`), its lock (`llm.json.lock`), a backup of an
/// invalid one (`llm.json.bak-<UTC>`), and an export as `wo export` names
/// it (`llm_YYYY.MM.DD.HHMM.json`, `-N` before `.json` when that minute's
/// name was taken, `.merged` after once merged). Other `llm_*.json` names
/// are not claimed: a project's own files may look like that.
///
/// The directory index skips these: the conversation they hold is recalled
/// from the transcript, and indexed as a file it came back as raw JSON
/// beside it, taking the budget twice.
pub fn is_own_file(name: &str) -> bool {
    name == STATE_FILE_NAME
        || name == "llm.json.lock"
        || name.starts_with("llm.json.bak-")
        || is_dated_export(name.strip_suffix(".merged").unwrap_or(name))
}

/// `llm_YYYY.MM.DD.HHMM.json` or `llm_YYYY.MM.DD.HHMM-N.json`.
fn is_dated_export(name: &str) -> bool {
    let Some(stem) = name
        .strip_prefix("llm_")
        .and_then(|n| n.strip_suffix(".json"))
    else {
        return false;
    };
    let (date, taken) = match stem.split_once('-') {
        Some((date, n)) => (date, Some(n)),
        None => (stem, None),
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = date.split('.').collect();
    matches!(parts.as_slice(), [y, m, d, hm] if digits(y, 4) && digits(m, 2) && digits(d, 2) && digits(hm, 4))
        && taken.is_none_or(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_files_are_the_state_its_lock_backups_and_dated_exports() {
        for name in [
            "llm.json",
            "llm.json.lock",
            "llm.json.bak-20261128T151200Z",
            "llm_2026.11.28.1513.json",
            "llm_2026.11.28.1513-2.json",
            "llm_2026.11.28.1513.json.merged",
        ] {
            assert!(is_own_file(name), "{name}");
        }
        for name in [
            "llm_config.json",
            "llm_2026.11.28.json",
            "llm_2026.11.28.1513-.json",
            "llm_2026.11.28.151x.json",
            "llm.jsonl",
            "my-llm.json",
            "llm.json.md",
            "package.json",
        ] {
            assert!(!is_own_file(name), "{name}");
        }
    }
}
