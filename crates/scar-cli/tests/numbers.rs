//! Every numeric flag and setting, at any value (huge, zero, negative, NaN, infinite, random):
//! the command answers or prints one `error:` line, and never panics or aborts.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use scar_test_support::http::{CannedServer, event_stream};

use crate::common::{example_index, fails_with, run, scar};

/// The command a setting is exercised through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Through {
    Search,
    Ask,
    Index,
    Inspect,
    Eval,
}

/// Where a value is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    Flag,
    Environment,
    ConfigFile,
}

/// A numeric flag, the setting it overrides if any, and the command that reads it.
#[derive(Debug, Clone, Copy)]
struct Numeric {
    flag: &'static str,
    key: Option<&'static str>,
    through: Through,
}

const fn numeric(flag: &'static str, key: Option<&'static str>, through: Through) -> Numeric {
    Numeric { flag, key, through }
}

/// Every numeric flag of every command (`SettingFlags`, `SearchFlags`, `AnswerFlags`,
/// `IndexArgs`, `InspectArgs`, `EvalArgs`) and every numeric setting.
const NUMERIC: &[Numeric] = &[
    numeric("k", Some("k"), Through::Search),
    numeric("window", Some("window"), Through::Search),
    numeric("depth", Some("depth"), Through::Search),
    numeric("lambda", Some("lambda"), Through::Search),
    numeric("gamma", Some("gamma"), Through::Search),
    numeric("parent-block", Some("parent_block"), Through::Search),
    numeric("budget-tokens", Some("budget_tokens"), Through::Search),
    numeric("max-tokens", Some("max_tokens"), Through::Ask),
    numeric("temperature", Some("temperature"), Through::Ask),
    numeric("seed", Some("seed"), Through::Ask),
    numeric("chunk-tokens", None, Through::Index),
    numeric("chunk-chars", None, Through::Index),
    numeric("overlap", None, Through::Index),
    numeric("max-file-mib", None, Through::Index),
    numeric("max-file-seconds", None, Through::Index),
    numeric("max-file-memory-mib", None, Through::Index),
    numeric("hnsw-expansion", None, Through::Index),
    numeric("chunk", None, Through::Inspect),
    numeric("k", None, Through::Eval),
];

/// Values at the edges of every numeric type the flags use.
const EDGES: &[&str] = &[
    "0",
    "1",
    "-1",
    "-0",
    "0.5",
    "2.5",
    "65536",
    "65537",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "1e39",
    "-1e39",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(EDGES).prop_map(str::to_owned),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => (0u32..3000).prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_map(|x| x.to_string()),
        1 => (-4.0f64..4.0).prop_map(|x| format!("{x:.3}")),
    ]
}

/// The layers `setting` can be given in: a flag, and for settings an environment variable and
/// a config file entry.
fn layers(setting: Numeric) -> Vec<Layer> {
    if setting.key.is_some() {
        vec![Layer::Flag, Layer::Environment, Layer::ConfigFile]
    } else {
        vec![Layer::Flag]
    }
}

/// The tiny random BERT, for commands that index (fast, and the content does not matter).
fn tiny_model() -> PathBuf {
    scar_test_support::models_dir().join("bge-tiny-shape")
}

/// A folder with one short document, and a benchmark over it.
fn small_corpus() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scar_test_support::scratch_dir("numbers-corpus");
        std::fs::create_dir_all(dir.join("corpus")).unwrap();
        std::fs::write(
            dir.join("corpus/ferry.txt"),
            "The kayak fee is eight euros, paid when you book.\n\nBicycles travel free.\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("benchmark.json"),
            r#"{"tests": [{"query": "What does a kayak cost?",
                "snippets": [{"file_path": "ferry.txt", "span": [0, 50]}]}]}"#,
        )
        .unwrap();
        dir
    })
}

/// Runs `setting` = `value`, given in `layer`, through its command.
fn run_case(setting: Numeric, layer: Layer, value: &str) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    let index = match setting.through {
        Through::Index | Through::Eval => scratch.path().join("index"),
        _ => example_index().to_owned(),
    };
    let mut command = scar(&index);
    let mut _server = None;
    match setting.through {
        Through::Search => {
            command.args(["search", "What does a kayak cost?"]);
        }
        Through::Ask => {
            let server = CannedServer::start(vec![event_stream(&["Eight euros [1]."])]);
            command
                .args(["ask", "What does a kayak cost?", "--llm-url"])
                .arg(server.url("/v1"));
            _server = Some(server);
        }
        Through::Index => {
            command
                .env("SCAR_MODEL", tiny_model())
                .arg("index")
                .arg(small_corpus().join("corpus"));
        }
        Through::Inspect => {
            command.arg("inspect");
        }
        Through::Eval => {
            command
                .env("SCAR_MODEL", tiny_model())
                .args(["eval", "--corpus"])
                .arg(small_corpus().join("corpus"))
                .arg("--benchmark")
                .arg(small_corpus().join("benchmark.json"))
                .arg("--out")
                .arg(scratch.path().join("out"));
        }
    }
    give(&mut command, setting, layer, value, scratch.path());
    command.output().unwrap()
}

fn give(command: &mut Command, setting: Numeric, layer: Layer, value: &str, scratch: &Path) {
    let key = setting.key.unwrap_or(setting.flag);
    match layer {
        Layer::Flag => {
            command.arg(format!("--{}", setting.flag)).arg(value);
        }
        Layer::Environment => {
            command.env(format!("SCAR_{}", key.to_ascii_uppercase()), value);
        }
        Layer::ConfigFile => {
            // Numbers as TOML numbers (where TOML can hold them), anything else as a string.
            let literal = if value.parse::<f64>().is_ok() {
                value.to_owned()
            } else {
                format!("{value:?}")
            };
            let file = scratch.join("config.toml");
            std::fs::write(&file, format!("{key} = {literal}\n")).unwrap();
            command.env("SCAR_CONFIG", file);
        }
    }
}

/// Exit 0, 3 (indexed with files skipped) or an error: 1, or 2 for a flag clap refuses; an
/// error is one `error:` line. Never a panic (101), an abort or a signal.
fn check(setting: Numeric, layer: Layer, value: &str, output: &Output) -> Result<(), String> {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let what = format!(
        "{setting:?} = {value:?} ({layer:?}): {:?}\n{stderr}",
        output.status
    );
    if stderr.contains("panicked") {
        return Err(what);
    }
    let errors = stderr.lines().filter(|l| l.starts_with("error: ")).count();
    match output.status.code() {
        Some(0) => Ok(()),
        Some(3) if setting.through == Through::Index => Ok(()),
        Some(1) if errors == 1 => Ok(()),
        Some(2) if layer == Layer::Flag && errors == 1 => Ok(()),
        _ => Err(what),
    }
}

/// A few random values for each setting in turn, each in one of its layers, through the command
/// that reads it (searches and indexing runs are real, so the cases are few).
#[test]
fn numeric_settings_give_an_answer_or_one_error() {
    for &setting in NUMERIC {
        let mut runner = TestRunner::new(ProptestConfig {
            cases: 5,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let case = (prop::sample::select(layers(setting)), value());
        let result = runner.run(&case, |(layer, value)| {
            let output = run_case(setting, layer, &value);
            check(setting, layer, &value, &output).map_err(TestCaseError::fail)
        });
        if let Err(failure) = result {
            panic!("{failure}");
        }
    }
}

/// Every setting at every edge value, in every layer it can be given in, through the settings
/// alone (`scar config` resolves and checks them all without doing any work).
#[test]
fn edge_values_in_every_layer_resolve_or_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for setting in NUMERIC.iter().filter(|s| s.key.is_some()) {
        for layer in [Layer::Environment, Layer::ConfigFile] {
            for value in EDGES {
                let mut command = scar(dir.path());
                give(&mut command, *setting, layer, value, dir.path());
                let output = command.arg("config").output().unwrap();
                check(*setting, layer, value, &output).unwrap();
            }
        }
    }
}

#[test]
fn huge_seed_counts_search_the_whole_index() {
    let index = example_index();
    for k in ["4294967295", "9223372036854775807", "18446744073709551615"] {
        for stage in ["dense", "bm25", "hybrid"] {
            let output = run(scar(index).args([
                "search",
                "kayak",
                "--json",
                "--first-stage",
                stage,
                "-k",
                k,
            ]));
            let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
            assert!(!report["ledger"]["seeds"].as_array().unwrap().is_empty());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "k = 9223372036854775807\n").unwrap();
    run(scar(index)
        .env("SCAR_CONFIG", &config)
        .args(["search", "kayak"]));
}

#[test]
fn the_largest_file_size_limit_is_no_limit() {
    let dir = tempfile::tempdir().unwrap();
    run(scar(dir.path())
        .env("SCAR_MODEL", tiny_model())
        .args(["index", "--max-file-mib", "18446744073709551615"])
        .arg(small_corpus().join("corpus")));
}

#[test]
fn a_temperature_out_of_range_is_refused_with_the_range() {
    let index = example_index();
    for value in ["-1", "2.5", "NaN", "inf"] {
        fails_with(
            scar(index).args(["ask", "kayak", "--temperature", value]),
            "temperature must be between 0 and 2",
        );
        fails_with(
            scar(index)
                .env("SCAR_TEMPERATURE", value)
                .args(["ask", "kayak"]),
            "SCAR_TEMPERATURE",
        );
    }
    fails_with(
        scar(index).args(["ask", "kayak", "--max-tokens", "0"]),
        "max_tokens must be at least 1",
    );
}

#[test]
fn a_local_model_refuses_more_tokens_than_it_can_hold() {
    fails_with(
        scar(example_index()).args([
            "ask",
            "kayak",
            "--k",
            "1",
            "--max-tokens",
            "18446744073709551615",
        ]),
        "more may be generated, but the model takes",
    );
}
