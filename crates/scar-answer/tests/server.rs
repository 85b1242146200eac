//! The OpenAI-compatible client against llama.cpp's server (llama-cpp-python) on loopback,
//! serving the same GGUF file. `scripts/test` installs it and names its Python in
//! `SCAR_LLAMA_SERVER_PYTHON`.

use std::ops::ControlFlow;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use scar_answer::{
    AnswerError, GenerationParams, Generator, RemoteModel, RemoteOptions, StopReason,
};

use crate::common::{model, model_path, prompt};

struct Server {
    child: Child,
    base_url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server on a free port and waits until it answers; None when it is not installed.
fn start() -> Option<Server> {
    let Some(python) = std::env::var_os("SCAR_LLAMA_SERVER_PYTHON") else {
        assert!(
            std::env::var_os("SCAR_REQUIRE_TOOLS").is_none(),
            "SCAR_REQUIRE_TOOLS is set (scripts/test sets it) but SCAR_LLAMA_SERVER_PYTHON is not: run scripts/fetch-llama-server"
        );
        eprintln!("SCAR_LLAMA_SERVER_PYTHON is not set: skipped (scripts/test sets it)");
        return None;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(python)
        .args([
            "-m",
            "llama_cpp.server",
            "--host",
            "127.0.0.1",
            "--n_ctx",
            "2048",
        ])
        .arg("--port")
        .arg(port.to_string())
        .arg("--model")
        .arg(model_path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        base_url: format!("http://127.0.0.1:{port}/v1"),
    };
    let started = Instant::now();
    while ureq::get(&format!("{}/models", server.base_url))
        .call()
        .is_err()
    {
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!("the llama.cpp server exited with {status}");
        }
        assert!(
            started.elapsed() < Duration::from_mins(2),
            "the llama.cpp server did not start"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    Some(server)
}

#[test]
fn streams_an_answer_from_a_llama_cpp_server() {
    let Some(server) = start() else { return };
    let mut remote = RemoteModel::new(RemoteOptions::new(&server.base_url, "smollm2")).unwrap();
    let question = prompt("What is the capital of France?");
    let params = GenerationParams {
        max_tokens: 96,
        ..GenerationParams::default()
    };
    let mut pieces = Vec::new();
    let generation = remote
        .generate(&question, &params, &mut |piece| {
            pieces.push(piece.to_owned());
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(generation.stop, StopReason::EndOfTurn, "{generation:?}");
    assert!(generation.text.contains("Paris"), "{}", generation.text);
    assert!(pieces.len() > 1, "streamed in pieces");
    assert_eq!(pieces.concat(), generation.text);
    // llama.cpp applies the GGUF's own Jinja template and its own tokenizer; its count of the
    // same messages (reported without streaming) must equal ours.
    let usage: serde_json::Value = ureq::post(&format!("{}/chat/completions", server.base_url))
        .send_json(serde_json::json!({
            "messages": [
                {"role": "system", "content": question.system},
                {"role": "user", "content": question.user},
            ],
            "max_tokens": 1,
        }))
        .unwrap()
        .into_json()
        .unwrap();
    let ours = model().count_prompt_tokens(&question).unwrap().unwrap();
    assert_eq!(usage["usage"]["prompt_tokens"].as_u64(), Some(ours as u64));

    let mut wrong_path = RemoteModel::new(RemoteOptions::new(
        format!("{}/no-such-api", server.base_url),
        "smollm2",
    ))
    .unwrap();
    let error = wrong_path
        .generate(&question, &params, &mut |_| ControlFlow::Continue(()))
        .unwrap_err();
    assert!(
        matches!(&error, AnswerError::Server { reason, .. } if reason.contains("HTTP 404")),
        "{error}"
    );
}
