//! `scar index` stops cleanly on SIGTERM as on Ctrl-C (SIGINT): within about a second, with
//! the same message and exit status, leaving a consistent index that the next run continues.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::{run, scar};

/// Starts indexing the shared corpora with the tiny model (some seconds of work), sends
/// `signal` once indexing has begun, and returns how the command ended.
fn index_and_stop_with(signal: &str, index: &Path) -> Output {
    let mut child = scar(index)
        .env(
            "SCAR_MODEL",
            scar_test_support::models_dir().join("bge-tiny-shape"),
        )
        .arg("index")
        .arg(scar_test_support::corpora())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("indexing into") {
        let mut line = String::new();
        assert_ne!(
            stderr.read_line(&mut line).unwrap(),
            0,
            "ended early: {seen}"
        );
        seen.push_str(&line);
    }
    // Some batches in, so that there is work both done and left.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let sent = Command::new("kill")
        .args(["-s", signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    stderr.read_to_string(&mut seen).unwrap();
    let mut output = child.wait_with_output().unwrap();
    output.stderr = seen.into_bytes();
    output
}

#[test]
fn sigterm_stops_indexing_as_ctrl_c_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut endings = Vec::new();
    for signal in ["INT", "TERM"] {
        let index = dir.path().join(signal);
        let output = index_and_stop_with(signal, &index);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        assert!(
            stderr.contains("stopping after the current batch")
                && stdout.contains("cancelled, the rest is left for the next run"),
            "SIG{signal}: {:?}\n{stdout}\n{stderr}",
            output.status
        );
        let verify = run(scar(&index).args(["inspect", "--verify"]));
        assert!(String::from_utf8_lossy(&verify.stdout).starts_with("consistent: "));
        endings.push(output.status.code());
    }
    assert_eq!(endings[0], endings[1], "SIGINT and SIGTERM end alike");
    assert_eq!(endings[0], Some(3), "a partial run");
}
