//! `kmod --checkpatch`: the kernel's own style check, from the tree's scripts/checkpatch.pl,
//! on each patch. Errors fail the command; warnings are printed only.
use std::{path::Path, path::PathBuf, process::Command};

use anyhow::{Context as _, Result};

/// Check each patch with `source`'s checkpatch.pl and print checkpatch's verdict (all its output when it found something);
/// the number of errors over all patches.
pub fn run(source: &Path, patches: &[PathBuf]) -> Result<usize> {
    if patches.is_empty() {
        println!("checkpatch: no patches to check");
    }
    let mut errors = 0;
    for patch in patches {
        let (text, total) = check(source, patch)?;
        let name = patch.file_name().unwrap_or_default().to_string_lossy();
        let (patch_errors, warnings) = counts(&total)
            .with_context(|| format!("checkpatch printed no totals for {name}:\n{text}"))?;
        if patch_errors + warnings > 0 {
            for line in text.lines() {
                println!("  {line}");
            }
        }
        println!("checkpatch {name}: {total}");
        errors += patch_errors;
    }
    Ok(errors)
}

/// checkpatch's whole output and its `total:` line. Its exit code is 1 for warnings too, so
/// the totals tell errors from warnings instead.
fn check(source: &Path, patch: &Path) -> Result<(String, String)> {
    let out = Command::new("perl")
        .arg(source.join("scripts/checkpatch.pl"))
        // No git tree to ask (--no-tree); no colour codes in the output.
        .args(["--no-tree", "--color=never"])
        .arg(patch)
        .output()
        .context("starting perl scripts/checkpatch.pl")?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let total = text
        .lines()
        .find(|l| l.starts_with("total: "))
        .unwrap_or_default()
        .to_string();
    Ok((text, total))
}

/// `total: 1 errors, 2 warnings, 3 checks, 40 lines checked` -> (1, 2).
fn counts(total: &str) -> Option<(usize, usize)> {
    let rest = total.strip_prefix("total: ")?;
    let mut errors = None;
    let mut warnings = None;
    for part in rest.split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        match what {
            "errors" => errors = n.parse().ok(),
            "warnings" => warnings = n.parse().ok(),
            _ => {}
        }
    }
    Some((errors?, warnings?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_errors_and_warnings_from_the_totals() {
        assert_eq!(
            counts("total: 1 errors, 2 warnings, 40 lines checked"),
            Some((1, 2))
        );
        assert_eq!(
            counts("total: 0 errors, 0 warnings, 3 checks, 12 lines checked"),
            Some((0, 0))
        );
        assert_eq!(counts("something else"), None);
    }
}
