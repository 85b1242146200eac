//! The files an index could not read, kept beside it in `skipped.json`, so that what was left
//! out of it and why can be shown long after the run that found them.
//!
//! Every run retries the files it skipped before (they are not in the index, or their indexed
//! version is older), so a finished run knows the truth for everything under its roots; files
//! under other roots keep what the runs over those found. A cancelled run only adds to the list.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::io_error;
use crate::folder::{IndexFile, write_replacing};
use crate::walk::resolve_root;
use crate::{IndexError, Result};

/// A file that was not indexed, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    /// The file. Serialized for display: a name that is not UTF-8 is shown with U+FFFD.
    #[serde(serialize_with = "lossy_path")]
    pub path: PathBuf,
    /// Why, for a person.
    pub reason: String,
}

fn lossy_path<S: serde::Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.to_string_lossy())
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SkipList {
    files: Vec<Skipped>,
}

/// The files of the index in `dir` that could not be indexed, each with its reason, sorted by
/// path; empty when none were, or for an index built before the list was kept.
pub fn skipped_files(dir: &Path) -> Result<Vec<Skipped>> {
    let path = IndexFile::SkipList.path(dir);
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

/// Brings the list in line with a run over `roots` that skipped `skipped`, and was `cancelled`
/// or not.
pub(crate) fn record(
    dir: &Path,
    roots: &[PathBuf],
    skipped: &[Skipped],
    cancelled: bool,
) -> Result<()> {
    // A damaged list is replaced: it is rebuilt from what the runs find.
    let earlier = skipped_files(dir).unwrap_or_default();
    let roots: Vec<PathBuf> = roots.iter().map(|root| resolve_root(root)).collect();
    let mut files: BTreeMap<PathBuf, Skipped> = earlier
        .into_iter()
        .filter(|file| cancelled || !roots.iter().any(|root| file.path.starts_with(root)))
        .map(|file| (file.path.clone(), file))
        .collect();
    for file in skipped {
        files.insert(file.path.clone(), file.clone());
    }
    let list = SkipList {
        files: files.into_values().collect(),
    };
    let json = serde_json::to_string_pretty(&list)
        .map_err(IndexError::encode("the list of skipped files"))?;
    write_replacing(&IndexFile::SkipList.path(dir), json)
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

        let both = [skipped(&b_file, "binary"), skipped(&a_file, "no text")];
        record(&index, &[a.clone(), b.clone()], &both, false).unwrap();
        let listed = skipped_files(&index).unwrap();
        assert_eq!(
            listed,
            [skipped(&a_file, "no text"), skipped(&b_file, "binary")]
        );

        // The scan was read this time; b's file was not looked at.
        record(&index, std::slice::from_ref(&a), &[], false).unwrap();
        assert_eq!(skipped_files(&index).unwrap(), [skipped(&b_file, "binary")]);

        // A cancelled run does not know about the files it did not reach.
        let a_other = a.join("sheet.xls");
        let reached = [skipped(&a_other, "corrupt")];
        record(&index, std::slice::from_ref(&b), &reached, true).unwrap();
        assert_eq!(
            skipped_files(&index).unwrap(),
            [skipped(&a_other, "corrupt"), skipped(&b_file, "binary")]
        );
    }

    #[test]
    fn a_damaged_list_is_an_error_naming_it_and_the_next_run_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::write(IndexFile::SkipList.path(dir.path()), "{ not json").unwrap();
        let error = skipped_files(dir.path()).unwrap_err();
        assert!(error.to_string().contains("skipped.json"), "{error}");
        let file = dir.path().join("x.txt");
        let skipped_now = [skipped(&file, "empty file")];
        record(dir.path(), &[dir.path().to_owned()], &skipped_now, false).unwrap();
        assert_eq!(
            skipped_files(dir.path()).unwrap(),
            [skipped(&file, "empty file")]
        );
    }
}
