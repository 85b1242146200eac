//! The HTTP API against real models: the same reports as the command line, errors for every
//! kind of bad request, the token, commits picked up while serving.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use axum::body::Body;
use scar_index::{IndexOptions, index_paths};
use scar_serve::{Library, LibraryOptions, SearchRequest, Source, http};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common::{Server, example, example_index, get, library, post, workspace};

const QUESTION: &str = "What does it cost to take my kayak on the ferry?";

#[test]
fn a_search_is_the_report_the_command_line_prints() {
    let server = Server::start(example(), &http::HttpOptions::default());
    let (status, body) = post(
        &server.url("/v1/search"),
        &json!({"question": QUESTION, "k": 3}).to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let report: Value = serde_json::from_str(&body).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("docs/schema/search-v2.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The same search run here: the same decisions, context, places and comparison with
    // static ±1 (timings aside).
    let request = SearchRequest {
        question: QUESTION.into(),
        k: Some(3),
        ..SearchRequest::default()
    };
    let direct = example().search(&request.checked().unwrap()).unwrap();
    // Through text, as the server's went: f32 values print the same way.
    let direct: Value = serde_json::from_str(&serde_json::to_string(&direct).unwrap()).unwrap();
    for field in ["ledger", "chunks", "places", "static_window_1"] {
        assert_eq!(report[field], direct[field], "{field}");
    }

    let (status, body) = get(&server.url("/v1/indexes"), None);
    assert_eq!(status, 200);
    let indexes: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(indexes["indexes"][0]["name"], "example");
    let (status, body) = get(&server.url("/v1/openapi.json"), None);
    assert_eq!(status, 200);
    assert!(serde_json::from_str::<Value>(&body).unwrap()["paths"]["/v1/ask"].is_object());
}

/// The status and error message of a search with `body`.
fn refused(server: &Server, body: &str) -> (u16, String) {
    let (status, text) = post(&server.url("/v1/search"), body);
    let error: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status}: {text}"));
    assert_eq!(error["error"]["status"], status, "{text}");
    (
        status,
        error["error"]["message"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn bad_requests_are_errors_that_say_what_is_wrong() {
    let server = Server::start(example(), &http::HttpOptions::default());
    let cases = [
        ("{", 400, "not JSON"),
        (r#"{"k": 3}"#, 400, "question"),
        (r#"{"question": 7}"#, 400, "invalid type"),
        (r#"{"question": "q", "k": "five"}"#, 400, "invalid type"),
        (
            r#"{"question": "q", "lamda": 0.2}"#,
            400,
            "unknown field `lamda`",
        ),
        (
            r#"{"question": "q", "k": 1000000}"#,
            400,
            "between 1 and 200",
        ),
        (
            r#"{"question": "q", "policy": "scar", "gamma": 2}"#,
            400,
            "gamma",
        ),
        (
            r#"{"question": "q", "index": "elsewhere"}"#,
            404,
            "the indexes served are example",
        ),
        (r#"{"question": "   "}"#, 400, "empty"),
    ];
    for (body, status, words) in cases {
        let (got, message) = refused(&server, body);
        assert_eq!(got, status, "{body}: {message}");
        assert!(message.contains(words), "{body}: {message}");
    }
    // A 10 MB body is refused by its length, before it is read.
    let mut stream = std::net::TcpStream::connect(server.address).unwrap();
    write!(
        stream,
        "POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{{\"question\": \"",
        10 * 1024 * 1024
    )
    .unwrap();
    let mut reply = [0; 12];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"HTTP/1.1 413");
    // A body sent in chunks, with no length announced, is refused once it passes the limit.
    let mut stream = std::net::TcpStream::connect(server.address).unwrap();
    let chunk = "x".repeat(100 * 1024);
    write!(
        stream,
        "POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n",
        chunk.len()
    )
    .unwrap();
    let mut reply = [0; 12];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"HTTP/1.1 413");
    assert_eq!(get(&server.url("/v1/nothing"), None).0, 404);
    assert_eq!(get(&server.url("/v1/search"), None).0, 405);
    assert_eq!(get(&server.url("/v1/health"), None).0, 200);
}

#[test]
fn with_a_token_only_health_is_open() {
    let options = http::HttpOptions {
        token: Some("s3cret".into()),
        ..http::HttpOptions::default()
    };
    let server = Server::start(example(), &options);
    assert_eq!(get(&server.url("/v1/health"), None).0, 200);
    assert_eq!(get(&server.url("/v1/indexes"), None).0, 401);
    assert_eq!(get(&server.url("/v1/indexes"), Some("wrong")).0, 401);
    assert_eq!(get(&server.url("/v1/indexes"), Some("s3cret")).0, 200);
    let (status, _) = post(
        &server.url("/v1/search"),
        &json!({"question": QUESTION}).to_string(),
    );
    assert_eq!(status, 401);
}

#[test]
fn a_client_that_never_finishes_its_request_is_cut_off() {
    let options = http::HttpOptions {
        body_timeout: Duration::from_millis(500),
        ..http::HttpOptions::default()
    };
    let connections = http::Connections {
        header_timeout: Duration::from_millis(500),
        ..http::Connections::default()
    };
    let server = Server::start_with(example(), &options, connections);
    // A body announced and never sent: 408.
    let mut stream = std::net::TcpStream::connect(server.address).unwrap();
    write!(
        stream,
        "POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{\"question\""
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    // Headers never finished: the connection is closed.
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(server.address).unwrap();
    write!(stream, "GET /v1/health HTTP/1.1\r\nHost:").unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(get(&server.url("/v1/health"), None).0, 200);
}

#[test]
fn connections_past_the_limit_wait_until_one_closes() {
    let connections = http::Connections {
        max: 2,
        header_timeout: Duration::from_mins(1),
    };
    let server = Server::start_with(example(), &http::HttpOptions::default(), connections);
    // Two clients connect and say nothing: they hold both connections.
    let silent: Vec<_> = (0..2)
        .map(|_| std::net::TcpStream::connect(server.address).unwrap())
        .collect();
    // Queued behind them: connections are accepted in the order they were made.
    let mut waiting = std::net::TcpStream::connect(server.address).unwrap();
    write!(
        waiting,
        "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0];
    let unanswered = waiting.read(&mut byte).unwrap_err();
    assert!(
        matches!(
            unanswered.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{unanswered}"
    );
    // The silent clients leave: the waiting one is served.
    drop(silent);
    waiting
        .set_read_timeout(Some(Duration::from_mins(1)))
        .unwrap();
    let mut reply = String::new();
    waiting.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

/// One pseudo-random JSON value, `depth` levels deep at most.
fn random_value(state: &mut u64, depth: u32) -> Value {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    let pick = (*state >> 33) % if depth == 0 { 5 } else { 7 };
    let number = (*state >> 40).cast_signed() - (1 << 22);
    match pick {
        0 => Value::Null,
        1 => Value::Bool(number % 2 == 0),
        2 => json!(number),
        3 => json!(number as f64 / 7.0),
        4 => json!(
            ["kayak", "ferry", "", "evidence", "scar", "top_k", "bm25"]
                [number.unsigned_abs() as usize % 7]
        ),
        5 => Value::Array(
            (0..number.unsigned_abs() % 3)
                .map(|_| random_value(state, depth - 1))
                .collect(),
        ),
        _ => {
            let keys = [
                "question",
                "k",
                "policy",
                "window",
                "depth",
                "lambda",
                "gamma",
                "block",
                "first_stage",
                "budget_tokens",
                "index",
                "extra",
            ];
            let fields = (0..number.unsigned_abs() % 6).map(|i| {
                (
                    keys[(number.unsigned_abs() as usize + i as usize * 5) % keys.len()].to_owned(),
                    random_value(state, depth - 1),
                )
            });
            Value::Object(fields.collect())
        }
    }
}

#[test]
fn thousands_of_random_bodies_get_answers_and_never_take_it_down() {
    let router = http::router(example(), &http::HttpOptions::default());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut state = 0x5EED_u64;
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..3000 {
        let body = if i % 3 == 0 {
            // Arbitrary bytes.
            (0..(i % 97))
                .map(|j| ((state >> (j % 56)) as u8) ^ (j as u8))
                .collect::<Vec<u8>>()
        } else {
            random_value(&mut state, 3).to_string().into_bytes()
        };
        state = state.rotate_left(7) ^ i;
        let request = axum::http::Request::post("/v1/search")
            .header("Content-Type", "application/json")
            .body(Body::from(body.clone()))
            .unwrap();
        let status = runtime
            .block_on(router.clone().oneshot(request))
            .unwrap()
            .status()
            .as_u16();
        assert!(
            [200, 400, 404].contains(&status),
            "{status} for {}",
            String::from_utf8_lossy(&body)
        );
        *statuses.entry(status).or_insert(0) += 1;
    }
    let health = axum::http::Request::get("/v1/health")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        runtime.block_on(router.oneshot(health)).unwrap().status(),
        200
    );
    eprintln!("3000 random bodies: {statuses:?}");
}

/// A data file cut short on disk under a running server is a damage report naming the repair,
/// not a crash (reading a mapped page past a file's end kills the process with SIGBUS).
#[test]
fn a_file_cut_short_while_serving_is_an_error_not_a_crash() {
    // A data file of ours, and a segment file of the text index, which tantivy maps.
    for (folder, named) in [("", "strings."), ("text", ".idx")] {
        let copy = tempfile::tempdir().unwrap();
        let index = copy.path().join("example");
        copy_folder(example_index(), &index);
        let server = Server::start(
            Arc::new(library(std::slice::from_ref(&index))),
            &http::HttpOptions::default(),
        );
        let search = || {
            post(
                &server.url("/v1/search"),
                &json!({"question": "What does a kayak cost on the ferry?", "k": 2}).to_string(),
            )
        };
        assert_eq!(search().0, 200);
        let file = std::fs::read_dir(index.join(folder))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| path.file_name().unwrap().to_string_lossy().contains(named))
            .unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(0)
            .unwrap();
        let (status, body) = search();
        assert_eq!(status, 500, "{named}: {body}");
        assert!(
            body.contains("cut short") && body.contains("--repair"),
            "{named}: {body}"
        );
        // The server is still up.
        assert_eq!(get(&server.url("/v1/health"), None).0, 200);
    }
}

fn copy_folder(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_commit_made_while_serving_is_searched_without_a_restart() {
    let docs = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(docs.path().join(name), text).unwrap();
    write(
        "ferry.txt",
        "The ferry leaves at nine. Kayaks travel for eight euros a crossing.",
    );
    write(
        "tides.txt",
        "Tides turn twice a day, so crossings are planned around them.",
    );
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("notes");
    // Found as the server finds it, so that the index names the model the same way.
    let files = scar_embed::ModelLocator::from_env(scar_test_support::models_dir())
        .locate(scar_test_support::MINILM)
        .unwrap();
    let cpu = scar_embed::EmbedOptions {
        device: scar_embed::DeviceChoice::Cpu,
        ..scar_embed::EmbedOptions::default()
    };
    let embedder = scar_embed::Embedder::load(&files, &cpu).unwrap();
    let run = |embedder: &scar_embed::Embedder| {
        index_paths(
            &index,
            &[docs.path().to_path_buf()],
            embedder,
            &IndexOptions::default(),
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap()
    };
    run(&embedder);
    let server = Server::start(
        Arc::new(library(std::slice::from_ref(&index))),
        &http::HttpOptions::default(),
    );
    let documents = || {
        let (_, body) = get(&server.url("/v1/indexes"), None);
        serde_json::from_str::<Value>(&body).unwrap()["indexes"][0]["documents"].clone()
    };
    assert_eq!(documents(), 2);
    write(
        "lighthouse.txt",
        "The lighthouse keeper rings the fog bell at dusk.",
    );
    run(&embedder);
    assert_eq!(documents(), 3);
    let (status, body) = post(
        &server.url("/v1/search"),
        &json!({"question": "who rings the fog bell?", "k": 1, "policy": "top_k"}).to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let report: Value = serde_json::from_str(&body).unwrap();
    let document = report["chunks"][0]["document"].as_str().unwrap();
    assert!(document.ends_with("lighthouse.txt"), "{document}");
}

#[test]
fn an_answer_streams_its_text_then_the_report() {
    let server = Server::start(example(), &http::HttpOptions::default());
    let response = crate::common::agent()
        .post(&server.url("/v1/ask"))
        .send_string(&json!({"question": QUESTION, "k": 2, "max_tokens": 24}).to_string())
        .unwrap();
    assert_eq!(response.content_type(), "text/event-stream");
    let stream = response.into_string().unwrap();
    let events: Vec<(&str, Value)> = stream
        .split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .unwrap_or_default()
                    .trim()
            };
            (
                field("event:"),
                serde_json::from_str(field("data:")).unwrap(),
            )
        })
        .collect();
    let (last, report) = events.last().unwrap();
    assert_eq!(*last, "answer", "{stream}");
    assert_eq!(report["schema"], "scar.answer/3");
    let streamed: String = events
        .iter()
        .filter(|(event, _)| *event == "text")
        .map(|(_, data)| data["text"].as_str().unwrap())
        .collect();
    assert!(!streamed.is_empty());
    assert_eq!(
        streamed,
        report["answer"]["generation"]["text"].as_str().unwrap()
    );
    assert!(report["static_window_1_prompt_tokens"].as_u64().unwrap() > 0);
}

#[test]
fn a_chat_model_that_cannot_load_is_an_error_before_the_stream_and_searches_go_on() {
    let options = LibraryOptions {
        llm: "/nowhere/missing-model.gguf".into(),
        ..crate::common::library_options()
    };
    let library = Library::open(&[Source::Folder(example_index().to_path_buf())], options).unwrap();
    let server = Server::start(Arc::new(library), &http::HttpOptions::default());
    let (status, body) = post(
        &server.url("/v1/ask"),
        &json!({"question": QUESTION}).to_string(),
    );
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("missing-model.gguf"), "{body}");
    let (status, body) = post(
        &server.url("/v1/search"),
        &json!({"question": QUESTION}).to_string(),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_library_with_a_reranker_takes_its_seeds_in_the_reranker_s_order() {
    let options = LibraryOptions {
        rerank: scar_answer::Reranking::Sentence,
        ..crate::common::library_options()
    };
    let library = Library::open(&[Source::Folder(example_index().to_path_buf())], options).unwrap();
    let server = Server::start(Arc::new(library), &http::HttpOptions::default());
    let (status, body) = post(
        &server.url("/v1/search"),
        &json!({"question": QUESTION, "k": 3}).to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let report: Value = serde_json::from_str(&body).unwrap();
    let verdicts: Vec<f64> = report["ledger"]["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|seed| seed["judged"]["score"].as_f64().unwrap())
        .collect();
    assert_eq!(verdicts.len(), 3);
    assert!(verdicts.windows(2).all(|w| w[0] >= w[1]), "{verdicts:?}");
    // The library without one gives no verdicts.
    let (_, body) = post(
        &Server::start(example(), &http::HttpOptions::default()).url("/v1/search"),
        &json!({"question": QUESTION, "k": 3}).to_string(),
    );
    let plain: Value = serde_json::from_str(&body).unwrap();
    assert!(plain["ledger"]["seeds"][0].get("judged").is_none());
}
