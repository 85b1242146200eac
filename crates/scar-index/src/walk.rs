//! Finding the files to index under the files and folders a person names.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use walkdir::WalkDir;

/// What [`discover`] found: the files to load, and what it passed over and why.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Discovered {
    /// Regular files as canonical absolute paths, sorted, each once.
    pub files: Vec<PathBuf>,
    /// For a file reached through a link that leads out of its root, the path it was found at
    /// (under the root as [`resolve_root`] names it): it belongs there, and leaves with it.
    pub reached_from: HashMap<PathBuf, PathBuf>,
    /// Paths that could not be used, in the order met, each with a reason for a person.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Collects the regular files among `roots` and under the folders among them, recursively.
///
/// Symlinks are followed; loops, broken links and unreadable entries are reported in
/// [`Discovered::skipped`] rather than stopping the walk. Hidden files and folders (names
/// starting with `.`) inside a folder are left out, but a hidden root is taken as asked.
/// Indexes are not documents: the folder `index` (the one being written) and any other SCAR
/// index met on the way are left out, or each run would index the last one's files.
#[must_use]
pub(crate) fn discover(roots: &[PathBuf], index: &Path) -> Discovered {
    let index = fs::canonicalize(index).unwrap_or_else(|_| index.to_owned());
    let mut found = Discovered::default();
    for root in roots {
        let resolved = resolve_root(root);
        let entries = WalkDir::new(root)
            .follow_links(true)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|entry| {
                let hidden = entry.depth() > 0 && is_hidden(entry.file_name());
                let index_folder = entry.file_type().is_dir() && is_an_index(entry.path(), &index);
                !hidden && !index_folder
            });
        for entry in entries {
            match entry {
                Ok(entry) if entry.file_type().is_file() => {
                    let found_at = entry
                        .path()
                        .strip_prefix(root)
                        .map_or_else(|_| resolved.clone(), |below| resolved.join(below));
                    found.add_file(entry.path(), &resolved, found_at);
                }
                Ok(entry) if entry.file_type().is_dir() => {}
                // Reading a FIFO would block forever, and devices are not documents.
                Ok(entry) => found.skip(entry.path(), "not a regular file".to_owned()),
                Err(error) => found.skip(error.path().unwrap_or(root), walk_error_reason(&error)),
            }
        }
    }
    found.files.sort();
    found.files.dedup();
    found
}

/// A root as the index names the files under it: its canonical path, or for a root that no
/// longer exists, its nearest existing ancestor's canonical path with the rest added back, so
/// that the documents of a deleted or renamed folder are still found under it.
#[must_use]
pub fn resolve_root(root: &Path) -> PathBuf {
    if let Ok(canonical) = root.canonicalize() {
        return canonical;
    }
    let absolute = std::path::absolute(root).unwrap_or_else(|_| root.to_owned());
    let mut missing = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            return missing
                .iter()
                .rev()
                .fold(canonical, |path, name| path.join(name));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

impl Discovered {
    fn add_file(&mut self, path: &Path, root: &Path, found_at: PathBuf) {
        match fs::canonicalize(path) {
            Ok(canonical) => {
                if !canonical.starts_with(root) {
                    self.reached_from
                        .entry(canonical.clone())
                        .or_insert(found_at);
                }
                self.files.push(canonical);
            }
            Err(error) => self.skip(path, format!("cannot read: {error}")),
        }
    }

    fn skip(&mut self, path: &Path, reason: String) {
        self.skipped.push((path.to_owned(), reason));
    }
}

/// True for the folder `index` (canonical) and for any folder that holds a SCAR index.
fn is_an_index(dir: &Path, index: &Path) -> bool {
    crate::folder::is_index(dir) || fs::canonicalize(dir).is_ok_and(|d| d == index)
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().starts_with(b".")
}

fn walk_error_reason(error: &walkdir::Error) -> String {
    if let Some(ancestor) = error.loop_ancestor() {
        return format!("symlink loop (leads back to {})", ancestor.display());
    }
    match error.io_error() {
        Some(io_error) if io_error.kind() == io::ErrorKind::NotFound => {
            if error.path().is_some_and(Path::is_symlink) {
                "broken symlink".to_owned()
            } else {
                "no such file or folder".to_owned()
            }
        }
        Some(io_error) => format!("cannot read: {io_error}"),
        None => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use tempfile::TempDir;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "text").unwrap();
    }

    /// An index folder that no walk meets.
    fn no_index() -> PathBuf {
        PathBuf::from("/nonexistent/index")
    }

    fn reasons(found: &Discovered) -> Vec<(&Path, &str)> {
        found
            .skipped
            .iter()
            .map(|(path, reason)| (path.as_path(), reason.as_str()))
            .collect()
    }

    #[test]
    fn walks_folders_sorted_skipping_hidden_names() {
        let dir = TempDir::new().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for name in ["b.txt", "a/z.md", "a/c.txt", ".git/config", "a/.hidden.txt"] {
            touch(&root.join(name));
        }
        let found = discover(std::slice::from_ref(&root), &no_index());
        assert_eq!(
            found.files,
            [
                root.join("a/c.txt"),
                root.join("a/z.md"),
                root.join("b.txt")
            ]
        );
        assert!(found.skipped.is_empty());
    }

    #[test]
    fn index_folders_are_left_out() {
        let dir = TempDir::new().unwrap();
        let root = dir.path().canonicalize().unwrap();
        touch(&root.join("doc.txt"));
        // The index being written, not yet an index, named through a detour.
        touch(&root.join("own/vectors.0.bin"));
        // Another index: its manifest and text folder.
        touch(&root.join("other/manifest.json"));
        touch(&root.join("other/text/meta.json"));
        // A folder with a manifest of some other kind is documents like any other.
        touch(&root.join("web/manifest.json"));
        let found = discover(std::slice::from_ref(&root), &root.join("web/../own"));
        assert_eq!(
            found.files,
            [root.join("doc.txt"), root.join("web/manifest.json")]
        );
        assert!(found.skipped.is_empty());
    }

    #[test]
    fn roots_may_be_files_and_overlap_without_duplicates() {
        let dir = TempDir::new().unwrap();
        let root = dir.path().canonicalize().unwrap();
        touch(&root.join("sub/.notes.txt"));
        touch(&root.join("sub/one.txt"));
        // A hidden file named as a root is taken, and a relative path comes back canonical.
        let roots = [
            root.join("sub/.notes.txt"),
            root.clone(),
            root.join("sub/../sub/one.txt"),
        ];
        let found = discover(&roots, &no_index());
        assert_eq!(
            found.files,
            [root.join("sub/.notes.txt"), root.join("sub/one.txt")]
        );
    }

    #[test]
    fn symlink_loop_is_reported_and_the_walk_goes_on() {
        let dir = TempDir::new().unwrap();
        let root = dir.path().canonicalize().unwrap();
        touch(&root.join("docs/a.txt"));
        touch(&root.join("docs/z.txt"));
        symlink(&root, root.join("docs/m_loop")).unwrap();
        let found = discover(std::slice::from_ref(&root), &no_index());
        assert_eq!(
            found.files,
            [root.join("docs/a.txt"), root.join("docs/z.txt")]
        );
        let [(path, reason)] = reasons(&found)[..] else {
            panic!("{found:?}")
        };
        assert_eq!(path, root.join("docs/m_loop"));
        assert!(reason.starts_with("symlink loop"), "{reason}");
    }

    #[test]
    fn symlinked_files_resolve_to_their_target() {
        let dir = TempDir::new().unwrap();
        let root = dir.path().canonicalize().unwrap();
        touch(&root.join("real.txt"));
        symlink(root.join("real.txt"), root.join("alias.txt")).unwrap();
        assert_eq!(
            discover(std::slice::from_ref(&root), &no_index()).files,
            [root.join("real.txt")]
        );
    }

    #[test]
    fn broken_symlinks_and_missing_roots_are_skipped() {
        let dir = TempDir::new().unwrap();
        let root = dir.path().canonicalize().unwrap();
        touch(&root.join("kept.txt"));
        symlink(root.join("gone.txt"), root.join("dangling.txt")).unwrap();
        let missing = root.join("missing");
        let found = discover(&[root.clone(), missing.clone()], &no_index());
        assert_eq!(found.files, [root.join("kept.txt")]);
        assert_eq!(
            reasons(&found),
            [
                (root.join("dangling.txt").as_path(), "broken symlink"),
                (missing.as_path(), "no such file or folder"),
            ]
        );
    }

    #[test]
    fn unreadable_root_is_skipped_with_the_cause() {
        // Root reads chmod-000 folders, so use a path that no one can read: one that goes
        // through a file as if it were a folder.
        let dir = TempDir::new().unwrap();
        let file = dir.path().join("file.txt");
        touch(&file);
        let through_file = file.join("inside");
        let found = discover(std::slice::from_ref(&through_file), &no_index());
        assert!(found.files.is_empty());
        let [(path, reason)] = reasons(&found)[..] else {
            panic!("{found:?}")
        };
        assert_eq!(path, through_file);
        assert!(reason.starts_with("cannot read: "), "{reason}");
    }
}
