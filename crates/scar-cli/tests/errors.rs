//! Bad input gets one clear line and a non-zero exit, never a panic.

use crate::common::{fails_with, rfc_index, run, scar, workspace};

#[test]
fn searching_without_an_index_says_how_to_build_one() {
    let dir = tempfile::tempdir().unwrap();
    fails_with(
        scar(&dir.path().join("none")).args(["search", "anything"]),
        "scar index",
    );
}

#[test]
fn empty_question_and_zero_k_are_refused() {
    let index = rfc_index();
    fails_with(scar(index).args(["search", "   "]), "empty");
    fails_with(
        scar(index).args(["search", "window size", "--k", "0"]),
        "k must be at least 1",
    );
    fails_with(
        scar(index).args(["search", "window size", "--gamma", "1.5"]),
        "gamma",
    );
}

#[test]
fn a_cause_is_printed_once_under_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("manifest.json");
    std::fs::write(&manifest, "{").unwrap();
    let output = scar(dir.path())
        .args(["search", "anything"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let cause = "EOF while parsing an object at line 1 column 1";
    assert_eq!(
        stderr,
        format!(
            "error: {} is damaged: unreadable JSON; repair the index with `scar --index {} \
             index --repair`\n  caused by: {cause}\n",
            manifest.display(),
            dir.path().display()
        )
    );
}

#[test]
fn a_missing_model_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let docs = workspace().join("assets/example");
    fails_with(
        scar(dir.path())
            .args(["--model", "BAAI/bge-small-en-v1.5", "index"])
            .arg(docs),
        "scar models fetch",
    );
}

#[test]
fn a_precision_the_cpu_cannot_run_is_refused_before_the_index_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let docs = workspace().join("assets/example");
    // Capped at the AVX2 class, no CPU runs bf16.
    fails_with(
        scar(&index)
            .env("SCAR_MAX_CPU_ISA", "avx2")
            .args(["--precision", "bf16", "index"])
            .arg(&docs),
        "this CPU has no AVX-512 BF16 instructions; use f32",
    );
    assert!(!index.exists());
    run(scar(&index)
        .args(["--precision", "f32", "index"])
        .arg(&docs));
    fails_with(
        scar(&index).env("SCAR_MAX_CPU_ISA", "avx2").args([
            "--precision",
            "bf16",
            "search",
            "kayak",
        ]),
        "precision bf16 is not available",
    );
}

#[test]
fn chunks_past_the_model_limit_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let docs = workspace().join("assets/example");
    let stderr = |output: std::process::Output| String::from_utf8(output.stderr).unwrap();
    let too_long = stderr(run(scar(&dir.path().join("long"))
        .args(["index", "--chunk-tokens", "300"])
        .arg(&docs)));
    assert!(
        too_long.contains("warning: chunks of up to 300 tokens pass")
            && too_long.contains("limit of 256 (2 of them special tokens)")
            && too_long.contains("--chunk-tokens 254 or less"),
        "{too_long}"
    );
    let fits = stderr(run(scar(&dir.path().join("fits"))
        .args(["index", "--chunk-tokens", "254"])
        .arg(&docs)));
    assert!(!fits.contains("warning"), "{fits}");
}

#[test]
fn indexing_with_another_model_is_refused() {
    let index = rfc_index();
    let copy = tempfile::tempdir().unwrap();
    for entry in walk(index) {
        let target = copy.path().join(entry.strip_prefix(index).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &target).unwrap();
    }
    let manifest_path = copy.path().join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["model"]["id"] = "BAAI/bge-base-en-v1.5".into();
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    // Searching loads the index's own model, which is not installed here.
    fails_with(
        scar(copy.path()).args(["search", "window size"]),
        "bge-base",
    );
    // Indexing with an explicitly named other model is a mismatch, and the index is untouched.
    fails_with(
        scar(copy.path())
            .args(["--model", "all-MiniLM-L6-v2", "index"])
            .arg(workspace().join("assets/example")),
        "was built with model",
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_closed_pipe_ends_quietly() {
    use std::process::Stdio;
    let index = rfc_index();
    // The reader closes its end before `scar` writes a line (it still has to load the model and
    // search), as `scar search … | head -0` would.
    let mut child = scar(index)
        .args(["search", "window size", "--full"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn a_model_flag_that_an_index_cannot_use_is_noted() {
    let index = crate::common::example_index();
    let output = run(scar(index).args(["search", "kayak", "--model", "another-model"]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("so it is searched with it; --model another-model applies to new indexes"),
        "{stderr}"
    );
    let same = scar_test_support::MINILM;
    let output = run(scar(index).args(["search", "kayak", "--model", same]));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("note:"));
}

#[test]
fn an_instruction_set_cap_is_named_where_it_holds_and_refused_where_unknown() {
    let dir = tempfile::tempdir().unwrap();
    fails_with(
        scar(dir.path())
            .env("SCAR_MAX_CPU_ISA", "sse")
            .args(["models"]),
        "SCAR_MAX_CPU_ISA=\"sse\" names no instruction set: use avx2, avx512 or amx",
    );
    let listed = run(scar(dir.path())
        .env("SCAR_MAX_CPU_ISA", "avx2")
        .args(["--device", "cpu", "models", "--json"]));
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let chat = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "chat")
        .unwrap_or_else(|| panic!("no chat model listed: {listed}"));
    let compute = chat["compute"].as_str().unwrap_or_default();
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
    {
        // Whatever wider instructions the CPU has, the cap leaves the AVX2 kernels, and says so.
        assert!(compute.contains("decoded on AVX2"), "{compute}");
        assert!(
            compute.contains("capped at avx2 by SCAR_MAX_CPU_ISA"),
            "{compute}"
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = compute;
}
