//! `scar index` on awkward folders.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

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
