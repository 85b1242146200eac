//! The files an index could not read, kept beside it in `skipped.json`, so that what was left
//! out of it and why can be shown long after the run that found them.
//!
//! Every run retries the files it skipped before (they are not in the index, or their indexed
//! version is older), so a finished run knows the truth for everything under its roots; files
//! under other roots keep what the runs over those found. A cancelled run only adds to the list.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::io_error;
use crate::indexer::{IndexReport, Skipped};
use crate::{IndexError, Result};

const FILE_NAME: &str = "skipped.json";

#[derive(serde::Serialize, serde::Deserialize)]
struct SkipList {
    files: Vec<Skipped>,
}

/// The files of the index in `dir` that could not be indexed, each with its reason, sorted by
/// path; empty when none were, or for an index built before the list was kept.
pub fn skipped_files(dir: &Path) -> Result<Vec<Skipped>> {
    let path = dir.join(FILE_NAME);
    let json = match fs_err::read_to_string(&path) {
        Ok(json) => json,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io_error(&path)(error)),
    };
    let list: SkipList = serde_json::from_str(&json).map_err(|error| IndexError::Damaged {
        dir: dir.to_owned(),
        path: path.clone(),
        reason: "the list of skipped files is not valid JSON".to_owned(),
        source: Some(error.into()),
    })?;
    Ok(list.files)
}

/// Brings the list in line with a run over `roots` that ended with `report`.
pub(crate) fn record(dir: &Path, roots: &[PathBuf], report: &IndexReport) -> Result<()> {
    // A damaged list is replaced: it is rebuilt from what the runs find.
    let earlier = skipped_files(dir).unwrap_or_default();
    let roots: Vec<PathBuf> = roots
        .iter()
        .map(|root| root.canonicalize().unwrap_or_else(|_| root.clone()))
        .collect();
    let mut files: BTreeMap<PathBuf, Skipped> = earlier
        .into_iter()
        .filter(|file| report.cancelled || !roots.iter().any(|root| file.path.starts_with(root)))
        .map(|file| (file.path.clone(), file))
        .collect();
    for file in &report.skipped {
        files.insert(file.path.clone(), file.clone());
    }
    let list = SkipList {
        files: files.into_values().collect(),
    };
    let path = dir.join(FILE_NAME);
    let temporary = path.with_extension("json.tmp");
    let json = serde_json::to_string_pretty(&list)
        .map_err(IndexError::encode("the list of skipped files"))?;
    fs_err::write(&temporary, json).map_err(io_error(&temporary))?;
    fs_err::rename(&temporary, &path).map_err(io_error(&path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(path: &Path, reason: &str) -> Skipped {
        Skipped {
            path: path.to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn run_over(skipped: Vec<Skipped>, cancelled: bool) -> IndexReport {
        IndexReport {
            skipped,
            cancelled,
            ..IndexReport::default()
        }
    }

    #[test]
    fn a_run_replaces_what_is_under_its_roots_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("index");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for folder in [&index, &a, &b] {
            fs_err::create_dir(folder).unwrap();
        }
        let (a_file, b_file) = (a.join("scan.pdf"), b.join("old.doc"));
        assert!(skipped_files(&index).unwrap().is_empty());

        let both = run_over(
            vec![skipped(&b_file, "binary"), skipped(&a_file, "no text")],
            false,
        );
        record(&index, &[a.clone(), b.clone()], &both).unwrap();
        let listed = skipped_files(&index).unwrap();
        assert_eq!(
            listed,
            [skipped(&a_file, "no text"), skipped(&b_file, "binary")]
        );

        // The scan was read this time; b's file was not looked at.
        record(&index, std::slice::from_ref(&a), &run_over(vec![], false)).unwrap();
        assert_eq!(skipped_files(&index).unwrap(), [skipped(&b_file, "binary")]);

        // A cancelled run does not know about the files it did not reach.
        let a_other = a.join("sheet.xls");
        let cancelled = run_over(vec![skipped(&a_other, "corrupt")], true);
        record(&index, std::slice::from_ref(&b), &cancelled).unwrap();
        assert_eq!(
            skipped_files(&index).unwrap(),
            [skipped(&a_other, "corrupt"), skipped(&b_file, "binary")]
        );
    }

    #[test]
    fn a_damaged_list_is_an_error_naming_it_and_the_next_run_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::write(dir.path().join(FILE_NAME), "{ not json").unwrap();
        let error = skipped_files(dir.path()).unwrap_err();
        assert!(error.to_string().contains("skipped.json"), "{error}");
        let file = dir.path().join("x.txt");
        let report = run_over(vec![skipped(&file, "empty file")], false);
        record(dir.path(), &[dir.path().to_owned()], &report).unwrap();
        assert_eq!(
            skipped_files(dir.path()).unwrap(),
            [skipped(&file, "empty file")]
        );
    }
}
