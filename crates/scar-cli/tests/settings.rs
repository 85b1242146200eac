//! Flags beat environment variables, which beat the config file, which beats the defaults.

use crate::common::{fails_with, run, scar};

fn config(command: &mut std::process::Command) -> serde_json::Value {
    serde_json::from_slice(&run(command.args(["config", "--json"])).stdout).unwrap()
}

#[test]
fn each_setting_reports_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, "k = 9\ngamma = 0.7\nfirst_stage = \"bm25\"\n").unwrap();
    let mut command = scar(dir.path());
    command.env("SCAR_CONFIG", &file).env("SCAR_GAMMA", "0.75");
    let settings = config(&mut command)["settings"].clone();
    assert_eq!(
        settings["k"],
        serde_json::json!({"value": "9", "source": "config_file"})
    );
    assert_eq!(
        settings["gamma"],
        serde_json::json!({"value": "0.75", "source": "environment"})
    );
    assert_eq!(settings["first_stage"]["value"], "bm25");
    assert_eq!(
        settings["policy"],
        serde_json::json!({"value": "evidence", "source": "default"})
    );
    assert_eq!(settings["window"]["value"], "default (2)");
    assert_eq!(settings["depth"]["value"], "10");
    assert_eq!(
        settings["lambda"],
        serde_json::json!({"value": "0.1", "source": "default"})
    );
    assert_eq!(settings["index"]["source"], "flag");
}

#[test]
fn old_policy_spellings_still_work_and_unknown_ones_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let settings = config(scar(dir.path()).env("SCAR_POLICY", "static"))["settings"].clone();
    assert_eq!(settings["policy"]["value"], "static_window");
    assert_eq!(settings["window"]["value"], "default (1)");
    let output = scar(dir.path())
        .env("SCAR_POLICY", "window")
        .args(["config"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown policy `window`"));
}

#[test]
fn a_bad_value_names_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let output = scar(dir.path())
        .env("SCAR_K", "many")
        .args(["config"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("SCAR_K"));
}

#[test]
fn an_unknown_key_in_the_config_file_is_refused_with_the_nearest_setting() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, "k = 4\nlamda = 0.5\n").unwrap();
    let output = scar(dir.path())
        .env("SCAR_CONFIG", &file)
        .args(["config"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`lamda` in") && stderr.contains("did you mean `lambda`?"),
        "{stderr}"
    );
    std::fs::write(&file, "k = 4\nlambda = 0.5\n").unwrap();
    run(scar(dir.path()).env("SCAR_CONFIG", &file).args(["config"]));
}

#[test]
fn the_embedding_precision_is_a_setting_like_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, "precision = \"f32\"\n").unwrap();
    let with_file = || {
        let mut command = scar(dir.path());
        command.env("SCAR_CONFIG", &file);
        command
    };
    assert_eq!(
        config(&mut with_file())["settings"]["precision"],
        serde_json::json!({"value": "f32", "source": "config_file"})
    );
    assert_eq!(
        config(with_file().env("SCAR_PRECISION", "bfloat16"))["settings"]["precision"],
        serde_json::json!({"value": "bf16", "source": "environment"})
    );
    assert_eq!(
        config(
            with_file()
                .env("SCAR_PRECISION", "bfloat16")
                .args(["--precision", "auto"])
        )["settings"]["precision"],
        serde_json::json!({"value": "auto", "source": "flag"})
    );
    fails_with(
        scar(dir.path())
            .env("SCAR_PRECISION", "int4")
            .args(["config"]),
        "SCAR_PRECISION = \"int4\": unknown precision `int4`",
    );
}
