//! `scar index --watch`: the index follows files added, edited, renamed and deleted, a burst of
//! changes costs one run, Ctrl-C ends the watch, a kill during a run leaves a sound index, and
//! with `--store` every run is published.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::Value;

use crate::common::{documents, run, scar_tiny};

/// A running `scar index --watch --json`, with its reports as they arrive.
struct Watching {
    child: Child,
    reports: Receiver<Value>,
}

impl Watching {
    fn start(index: &Path, docs: &Path) -> Self {
        Self::start_with(index, docs, &[])
    }

    /// [`Watching::start`] with more global flags (`--store URL`).
    fn start_with(index: &Path, docs: &Path, flags: &[&str]) -> Self {
        let mut child = scar_tiny(index)
            .args(flags)
            .arg("index")
            .arg(docs)
            .args(["--watch", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, reports) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(serde_json::from_str(&line).unwrap()).is_err() {
                    break;
                }
            }
        });
        let watching = Self { child, reports };
        watching.next_report("the first run");
        watching
    }

    fn next_report(&self, after: &str) -> Value {
        self.reports
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no report within 30 s of {after}"))
    }

    fn counts(report: &Value) -> [u64; 3] {
        ["added", "updated", "removed"].map(|key| report[key].as_u64().unwrap())
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        run(std::process::Command::new("kill").args([signal, &pid]));
    }
}

#[test]
fn the_index_follows_edits_renames_deletions_and_bursts() {
    let docs = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("first.txt"), "The first note.").unwrap();
    let mut watching = Watching::start(index.path(), docs.path());

    let note = docs.path().join("note.md");
    std::fs::write(&note, "# Tides\n\nHigh water at six.").unwrap();
    let report = watching.next_report("adding a file");
    assert_eq!(Watching::counts(&report), [1, 0, 0], "{report}");

    // An editor's save: a temporary file renamed over the original.
    let temporary = docs.path().join(".note.md.swp");
    std::fs::write(&temporary, "# Tides\n\nHigh water at seven.").unwrap();
    std::fs::rename(&temporary, &note).unwrap();
    let report = watching.next_report("saving by rename");
    assert_eq!(Watching::counts(&report), [0, 1, 0], "{report}");

    std::fs::rename(&note, docs.path().join("tides.md")).unwrap();
    let report = watching.next_report("a rename");
    assert_eq!(Watching::counts(&report), [1, 0, 1], "{report}");

    std::fs::remove_file(docs.path().join("tides.md")).unwrap();
    let report = watching.next_report("a deletion");
    assert_eq!(Watching::counts(&report), [0, 0, 1], "{report}");

    let burst = docs.path().join("burst");
    std::fs::create_dir(&burst).unwrap();
    for i in 0..1000 {
        std::fs::write(
            burst.join(format!("{i:04}.txt")),
            format!("Note number {i}."),
        )
        .unwrap();
    }
    let report = watching.next_report("a burst of 1,000 files");
    assert_eq!(Watching::counts(&report), [1000, 0, 0], "{report}");
    assert!(
        watching
            .reports
            .recv_timeout(Duration::from_secs(2))
            .is_err(),
        "a second run for one burst"
    );

    watching.signal("-INT");
    let status = watching.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let held = documents(index.path());
    assert_eq!(held.len(), 1001);
    assert!(held[0].0.ends_with("burst/0000.txt"), "{held:?}");
}

#[test]
fn a_kill_during_a_watched_run_leaves_a_sound_index() {
    let docs = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("first.txt"), "The first note.").unwrap();
    let mut watching = Watching::start(index.path(), docs.path());
    for i in 0..400 {
        let text = format!("Paragraph {i} of a long note. ").repeat(40);
        std::fs::write(docs.path().join(format!("{i:03}.txt")), text).unwrap();
    }
    // The burst ends 0.4 s after the last write; the run starts then.
    std::thread::sleep(Duration::from_millis(900));
    watching.signal("-KILL");
    watching.child.wait().unwrap();

    run(scar_tiny(index.path()).args(["inspect", "--json"]));
    let report = run(scar_tiny(index.path())
        .arg("index")
        .arg(docs.path())
        .arg("--json"));
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["skipped"], Value::Array(Vec::new()), "{report}");
    assert_eq!(documents(index.path()).len(), 401);
}

#[test]
fn a_watch_over_a_store_publishes_every_run() {
    let Some(url) = scar_test_support::postgres_database("watch") else {
        return;
    };
    let docs = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("first.txt"), "The first note.").unwrap();
    let mut watching = Watching::start_with(index.path(), docs.path(), &["--store", &url]);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut stored = || -> Vec<String> {
        let rows = client
            .query("SELECT path FROM scar_files ORDER BY path", &[])
            .unwrap();
        rows.iter()
            .map(|row| {
                row.get::<_, String>(0)
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(stored(), ["first.txt"]);

    std::fs::write(docs.path().join("note.md"), "# Tides\n\nHigh water at six.").unwrap();
    let report = watching.next_report("adding a file");
    assert_eq!(report["store"]["published"], 1, "{report}");
    assert_eq!(stored(), ["first.txt", "note.md"]);

    std::fs::remove_file(docs.path().join("first.txt")).unwrap();
    let report = watching.next_report("a deletion");
    assert_eq!(report["store"]["removed"], 1, "{report}");
    assert_eq!(stored(), ["note.md"]);

    watching.signal("-INT");
    let status = watching.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
