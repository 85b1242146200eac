//! `scar ask`: the context answered by the local `SmolLM2` model, with citations and prompt sizes.

use scar_test_support::http::{CannedServer, event_stream, response};

use crate::common::{example_index, fails_with, run, scar};

const QUESTION: &str = "What does it cost to take my kayak on the ferry?";

#[test]
fn answers_from_the_scar_context_with_a_smaller_prompt_than_static() {
    let output = run(scar(example_index()).args(["ask", QUESTION, "--k", "1", "--json"]));
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value["schema"], "scar.answer/3");
    let answer = &value["answer"];
    assert_eq!(answer["generation"]["stop"], "end_of_turn", "{answer}");
    assert!(
        !answer["generation"]["text"]
            .as_str()
            .unwrap()
            .trim()
            .is_empty()
    );
    // Every context chunk is a numbered source, in the report's (document) order.
    let sources = answer["prompt"]["sources"].as_array().unwrap();
    let chunks = value["search"]["chunks"].as_array().unwrap();
    assert_eq!(sources.len(), chunks.len());
    for (source, chunk) in sources.iter().zip(chunks) {
        assert_eq!(source["chunk"], chunk["id"]);
    }
    let user = answer["prompt"]["user"].as_str().unwrap();
    assert!(user.contains("[1] ") && user.ends_with(&format!("Question: {QUESTION}")));
    // SCAR rejected a neighbour static ±1 takes, so its prompt is shorter.
    let ours = answer["generation"]["prompt_tokens"].as_u64().unwrap();
    let statics = value["static_window_1_prompt_tokens"].as_u64().unwrap();
    assert!(
        ours < statics,
        "SCAR prompt {ours} tokens, static ±1 {statics}"
    );
    for cited in answer["citations"]["cited"].as_array().unwrap() {
        assert!(sources.contains(cited), "{cited} is not a source");
    }
}

#[test]
fn streams_the_answer_then_lists_sources_and_sizes() {
    let output =
        run(scar(example_index()).args(["ask", QUESTION, "--k", "1", "--max-tokens", "48"]));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("question: "), "{stdout}");
    assert!(stdout.contains("\nsources\n[1] "), "{stdout}");
    assert!(stdout.contains("(static ±1: "), "{stdout}");
    assert!(stdout.contains("tokens/s"), "{stdout}");
}

#[test]
fn bad_chat_models_and_servers_are_one_clear_error() {
    let index = example_index();
    fails_with(
        scar(index).args(["ask", QUESTION, "--llm", "no-such-model"]),
        "chat model `no-such-model` not found",
    );
    fails_with(
        scar(index).args(["ask", QUESTION, "--llm-url", "http://10.1.2.3:8080/v1"]),
        "loopback",
    );
    fails_with(
        scar(index).args(["ask", QUESTION, "--llm-url", "http://127.0.0.1:9/v1"]),
        "chat server http://127.0.0.1:9/v1/chat/completions",
    );
    // Checked before anything is searched: here there is not even an index to search.
    let nowhere = tempfile::tempdir().unwrap();
    fails_with(
        scar(nowhere.path()).args(["ask", QUESTION, "--llm-url", "ftp://127.0.0.1/v1"]),
        "only http and https",
    );
}

#[test]
fn a_server_that_redirects_elsewhere_is_refused() {
    let elsewhere = CannedServer::start(vec![event_stream(&["leaked"])]);
    let location = elsewhere.url("/v1/chat/completions");
    let server = CannedServer::start(vec![response("302 Found", &[("Location", &location)], "")]);
    fails_with(
        scar(example_index())
            .args(["ask", QUESTION, "--k", "1", "--llm-url"])
            .arg(server.url("/v1")),
        &format!("HTTP 302 redirects to {location}"),
    );
    assert!(elsewhere.requests().is_empty(), "the redirect was followed");
}

/// A server that streams one endless event is cut off at the line limit, and the error quotes
/// the start of what it sent, not all of it.
#[test]
fn an_event_too_long_is_an_error_that_quotes_little() {
    let ask_streaming = |body: String| {
        let stream = response("200 OK", &[("Content-Type", "text/event-stream")], &body);
        let server = CannedServer::start(vec![stream]);
        let output = scar(example_index())
            .args(["ask", QUESTION, "--k", "1", "--llm-url"])
            .arg(server.url("/v1"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(stderr.len() < 4096, "{} bytes of stderr", stderr.len());
        stderr
    };
    let stderr = ask_streaming(format!("data: {}\n\n", "x".repeat(3 << 20)));
    assert!(stderr.contains("longer than 1024 KiB"), "{stderr}");
    let stderr = ask_streaming(format!("data: {{{}\n\n", "y".repeat(100_000)));
    assert!(
        stderr.contains("unreadable event") && stderr.contains("bytes)"),
        "{stderr}"
    );
}

/// A home whose Ollama store holds the test chat model as `smollm2:135m`, its blob a link to
/// the file in models/, as Ollama lays out what it pulls.
fn home_with_ollama_model() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join(".ollama/models");
    let gguf = crate::common::workspace()
        .join("models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    let digest = "sha256:4f1c5b9e".to_owned() + &"0".repeat(56);
    std::fs::create_dir_all(store.join("blobs")).unwrap();
    std::os::unix::fs::symlink(&gguf, store.join("blobs").join(digest.replace(':', "-"))).unwrap();
    let manifests = store.join("manifests/registry.ollama.ai/library/smollm2");
    std::fs::create_dir_all(&manifests).unwrap();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": 1},
            {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:01", "size": 1},
        ],
    });
    std::fs::write(manifests.join("135m"), manifest.to_string()).unwrap();
    home
}

#[test]
fn a_model_ollama_downloaded_is_listed_and_answers_in_place() {
    let home = home_with_ollama_model();
    let listed = run(scar(example_index())
        .env("HOME", home.path())
        .env_remove("OLLAMA_MODELS")
        .args(["models", "--json"]));
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let ollama = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "ollama:smollm2:135m")
        .unwrap_or_else(|| panic!("not listed: {listed}"));
    assert_eq!(ollama["kind"], "chat");
    assert_eq!(ollama["runs"], true);
    assert!(
        ollama["status"]
            .as_str()
            .unwrap()
            .contains("architecture llama"),
        "{ollama}"
    );

    for name in ["ollama:smollm2:135m", "smollm2:135m"] {
        let output = run(scar(example_index())
            .env("HOME", home.path())
            .env_remove("OLLAMA_MODELS")
            .args([
                "ask",
                QUESTION,
                "--k",
                "1",
                "--max-tokens",
                "8",
                "--json",
                "--llm",
                name,
            ]));
        let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let model = value["answer"]["model"].as_str().unwrap();
        // The blob itself answered: nothing was copied or downloaded.
        assert!(model.contains("sha256-4f1c5b9e"), "{name}: {model}");
    }
    fails_with(
        scar(example_index())
            .env("HOME", home.path())
            .env_remove("OLLAMA_MODELS")
            .args(["ask", QUESTION, "--llm", "ollama:mistral:7b"]),
        "Ollama's store",
    );
}

#[test]
fn each_sentence_is_traced_to_its_source_or_flagged() {
    // One sentence the handbook says, one it does not; the first cites a number that is not
    // where it is found when the context holds more than one chunk.
    let fee_text =
        "An unbooked kayak is only carried if there is room, and then its fee is doubled [9].";
    let answer = format!("{fee_text} Dolphins swim beside the ferry every Tuesday morning.");
    let server = CannedServer::start(vec![event_stream(&[&answer])]);
    let output = run(scar(example_index())
        .args(["ask", QUESTION, "--json", "--llm-url"])
        .arg(server.url("/v1")));
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let sources = value["answer"]["prompt"]["sources"].as_array().unwrap();
    let chunks = value["search"]["chunks"].as_array().unwrap();
    let text_of = |number: u64| {
        let id = &sources[number as usize - 1]["chunk"];
        chunks.iter().find(|c| &c["id"] == id).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let attribution = value["answer"]["attribution"].as_array().unwrap();
    assert_eq!(attribution.len(), 2, "{attribution:?}");
    let (fee, dolphins) = (&attribution[0], &attribution[1]);
    assert_eq!(fee["found"], true, "{fee}");
    let source = text_of(fee["source"].as_u64().unwrap());
    assert!(source.contains("kayak fee is doubled"), "{source}");
    assert_eq!(fee["cited"], serde_json::json!([9]));
    assert_eq!(
        fee["chars"],
        serde_json::json!([0, fee_text.chars().count()])
    );
    assert_eq!(dolphins["found"], false, "{dolphins}");
    assert!(dolphins["shared_words"].as_f64().unwrap() < 0.5);

    let server = CannedServer::start(vec![event_stream(&[&answer])]);
    let output = run(scar(example_index())
        .args(["ask", QUESTION, "--llm-url"])
        .arg(server.url("/v1")));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("\nsentences (sources found by comparing"),
        "{stdout}"
    );
    assert!(stdout.contains("    found in ["), "{stdout}");
    assert!(
        stdout.contains("    not found in the sources (closest ["),
        "{stdout}"
    );
    assert!(
        stdout.contains("the model cites [9], but the sentence reads as ["),
        "{stdout}"
    );
}

#[test]
fn gemma_3_answers_with_each_sentence_traced() {
    let gemma = crate::common::workspace().join("models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf");
    let output = run(scar(example_index())
        .args([
            "ask",
            QUESTION,
            "--k",
            "1",
            "--max-tokens",
            "32",
            "--json",
            "--llm",
        ])
        .arg(&gemma));
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let answer = &value["answer"];
    assert_eq!(answer["model"], "gemma-3-270m-q4_k_m", "{answer}");
    let text = answer["generation"]["text"].as_str().unwrap();
    assert!(!text.trim().is_empty(), "{answer}");
    let attribution = answer["attribution"].as_array().unwrap();
    assert!(!attribution.is_empty(), "{text:?} has no sentence traced");
    for sentence in attribution {
        assert!(sentence["found"].is_boolean(), "{sentence}");
        let number = sentence["source"].as_u64().unwrap();
        assert!(
            (1..=answer["prompt"]["sources"].as_array().unwrap().len() as u64).contains(&number)
        );
    }
}
