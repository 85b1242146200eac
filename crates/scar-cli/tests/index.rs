//! `scar index` on awkward folders, and the files it leaves: readable by others, searchable
//! read-only.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use crate::common::{run, scar_tiny};

#[test]
fn json_report_shows_names_that_are_not_utf8() {
    let docs = tempfile::tempdir().unwrap();
    let write = |name: &[u8], text: &str| {
        std::fs::write(docs.path().join(OsStr::from_bytes(name)), text).unwrap();
    };
    write(b"bad\xffname.txt", "A file whose name is not UTF-8.");
    write(b"empty\xff.txt", "");
    let dir = tempfile::tempdir().unwrap();
    let output = scar_tiny(dir.path())
        .arg("index")
        .arg(docs.path())
        .arg("--json")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "partial: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["added"], 1, "{report}");
    let skipped = report["skipped"][0]["path"].as_str().unwrap();
    assert!(skipped.ends_with("empty\u{FFFD}.txt"), "{skipped}");
    // The file that was indexed is shown the same way.
    let chunk = run(scar_tiny(dir.path()).args(["inspect", "--chunk", "0", "--json"]));
    let chunk: serde_json::Value = serde_json::from_slice(&chunk.stdout).unwrap();
    let document = chunk["document"].as_str().unwrap();
    assert!(document.ends_with("bad\u{FFFD}name.txt"), "{document}");
    run(scar_tiny(dir.path()).args(["inspect", "--json"]));
}

/// Every file under `dir`, with its length, modification time and mode.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime, u32)> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let metadata = entry.metadata().unwrap();
        if metadata.is_dir() {
            files.extend(snapshot(&entry.path()));
        } else {
            let mode = metadata.permissions().mode() & 0o777;
            files.insert(
                entry.path(),
                (metadata.len(), metadata.modified().unwrap(), mode),
            );
        }
    }
    files
}

/// `command` run by a shell that sets the umask first.
fn with_umask(command: &Command, umask: &str) -> Command {
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg(format!(r#"umask {umask} && exec "$@""#))
        .arg("sh")
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    shell
}

#[test]
fn a_read_only_index_can_be_searched_and_searching_writes_nothing() {
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("a.txt"), "Ferries take kayaks for a fee.").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    // Files follow the umask, as any other program's do: readable by whoever may read the
    // folder, not only by the user who indexed.
    let mut indexing = scar_tiny(&index);
    indexing.arg("index").arg(docs.path());
    let indexed = with_umask(&indexing, "022").status().unwrap();
    assert!(indexed.success());
    let modes: Vec<(PathBuf, u32)> = snapshot(&index)
        .into_iter()
        .map(|(path, (_, _, mode))| (path, mode))
        .filter(|(_, mode)| *mode != 0o644)
        .collect();
    assert!(modes.is_empty(), "not 0644 under umask 022: {modes:?}");

    // Lock files are left by the writer; a search must neither take nor create one.
    for lock in [".tantivy-meta.lock", ".tantivy-writer.lock"] {
        let _ = std::fs::remove_file(index.join("text").join(lock));
    }
    let before = snapshot(&index);
    let read_only = |on: bool| {
        let mode = if on { "a-w" } else { "u+w" };
        assert!(
            Command::new("chmod")
                .args(["-R", mode])
                .arg(&index)
                .status()
                .unwrap()
                .success()
        );
    };
    read_only(true);
    let searched = scar_tiny(&index)
        .args(["search", "kayak fee", "--json"])
        .output();
    let after = snapshot(&index);
    read_only(false);
    let searched = searched.unwrap();
    assert!(
        searched.status.success(),
        "{}",
        String::from_utf8_lossy(&searched.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&searched.stdout).unwrap();
    assert!(!report["chunks"].as_array().unwrap().is_empty(), "{report}");
    let after_without_mode: Vec<_> = after.iter().map(|(p, (l, t, _))| (p, l, t)).collect();
    let before_without_mode: Vec<_> = before.iter().map(|(p, (l, t, _))| (p, l, t)).collect();
    assert_eq!(
        after_without_mode, before_without_mode,
        "a search changed the index folder"
    );
}

/// `command` run with every file it writes limited to `bytes`: writes past it fail with EFBIG
/// as writes to a full disk fail with ENOSPC, with no small file system to mount. SIGXFSZ is
/// ignored, so that the write fails instead of the signal killing the process.
fn with_file_size_limit(command: &Command, bytes: u64) -> Command {
    let mut limited = Command::new("sh");
    limited
        .args(["-c", r#"trap '' XFSZ; exec prlimit --fsize="$0" "$@""#])
        .arg(bytes.to_string())
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => limited.env(key, value),
            None => limited.env_remove(key),
        };
    }
    limited
}

/// The documents `inspect --json` lists, after `inspect --verify` finds nothing wrong.
fn verified_documents(index: &Path) -> Vec<String> {
    run(scar_tiny(index).args(["inspect", "--verify"]));
    let output = run(scar_tiny(index).args(["inspect", "--json"]));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut paths: Vec<String> = summary["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap().to_owned())
        .collect();
    paths.sort();
    paths
}

#[test]
fn a_full_disk_stops_indexing_and_loses_nothing_committed() {
    let docs = tempfile::tempdir().unwrap();
    let write = |name: String, words: usize| {
        let text: Vec<String> = (0..words).map(|w| format!("{name}word{w}")).collect();
        std::fs::write(docs.path().join(name), text.join(" ")).unwrap();
    };
    write("first.txt".to_owned(), 200);
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    run(scar_tiny(&index).arg("index").arg(docs.path()));
    let committed = verified_documents(&index);

    // More text than any one index file may hold under the limit.
    for n in 0..30 {
        write(format!("more{n}.txt"), 600);
    }
    let mut full = scar_tiny(&index);
    full.arg("index").arg(docs.path());
    let output = with_file_size_limit(&full, 96 * 1024).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // What was committed before is all there and sound; a run with room completes the work.
    let after = verified_documents(&index);
    assert!(committed.iter().all(|d| after.contains(d)), "{after:?}");
    run(scar_tiny(&index).arg("index").arg(docs.path()));
    assert_eq!(verified_documents(&index).len(), 31);
}
