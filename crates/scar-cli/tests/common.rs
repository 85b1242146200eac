use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub use scar_test_support::{example_index, workspace};

/// `scar` with the test model, an empty config and no stray `SCAR_*` settings.
pub fn scar(index: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_scar"));
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("SCAR_")) {
        command.env_remove(key);
    }
    command
        .env("SCAR_CONFIG", "/nonexistent/scar-config.toml")
        .env("SCAR_MODEL", scar_test_support::MINILM)
        .env("SCAR_MODELS_DIR", workspace().join("models"))
        .env("SCAR_DEVICE", "cpu")
        .env("HF_HUB_OFFLINE", "1")
        .env("NO_COLOR", "1")
        .arg("--index")
        .arg(index);
    command
}

/// Runs a command that must fail with status 1 and one `error:` line holding `words`.
pub fn fails_with(command: &mut std::process::Command, words: &str) {
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{command:?}: {stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("error: ")).count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains(words), "expected {words:?} in {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
}

pub fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// RFC 9293 indexed by `scar index` once per checkout (incremental, so reruns are instant).
pub fn rfc_index() -> &'static Path {
    static INDEX: OnceLock<PathBuf> = OnceLock::new();
    INDEX.get_or_init(|| {
        let dir = scar_test_support::scratch_dir("rfc9293-minilm-index");
        let rfc = scar_test_support::corpora().join("rfc9293.txt");
        run(scar(&dir).arg("index").arg(rfc).arg("--json"));
        dir
    })
}

pub fn search_json(index: &Path, query: &str, extra: &[&str]) -> serde_json::Value {
    let output = run(scar(index).args(["search", query, "--json"]).args(extra));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// [`scar`] with the tiny random BERT: for tests of everything but meaning.
pub fn scar_tiny(index: &Path) -> Command {
    let mut command = scar(index);
    command.env("SCAR_MODEL", "bge-tiny-shape");
    command
}

/// Each document of the index in `dir` with its chunk count, as `inspect --json` lists them,
/// sorted by path.
pub fn documents(dir: &Path) -> Vec<(String, u64)> {
    let output = run(scar_tiny(dir).args(["inspect", "--json"]));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut documents: Vec<(String, u64)> = summary["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let path = d["path"].as_str().unwrap().to_owned();
            (path, d["chunk_count"].as_u64().unwrap())
        })
        .collect();
    documents.sort();
    documents
}
