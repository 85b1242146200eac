//! A Model Context Protocol server over stdio: newline-delimited JSON-RPC 2.0 messages in, one
//! response per request out.
//!
//! Tools: `search` (the context chosen for a question, each chunk with its source, and a
//! summary of SCAR's decisions; the full `scar.search/2` report as structured content) and
//! `ask` (the answer with its sources; the `scar.answer/3` report). Resources: each index, as
//! `scar://index/NAME` (its model, documents and chunks as JSON).

use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::ops::ControlFlow;

use scar_core::ErrorChain;
use scar_policy::Outcome;
use scar_retrieve::SearchReport;
use serde_json::{Value, json};

use crate::{AskRequest, Library, Result, SearchRequest, ServeError};

/// The protocol versions this server speaks, newest first.
const PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

/// Serves `library` on `input` and `output` (stdin and stdout) until `input` ends.
pub fn serve(library: &Library, input: impl BufRead, mut output: impl Write) -> Result<()> {
    for line in input.split(b'\n') {
        let line = line.map_err(ServeError::Stream)?;
        let response = match std::str::from_utf8(&line) {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => respond(library, line),
            Err(e) => Some(error(&Value::Null, PARSE_ERROR, &format!("not UTF-8: {e}"))),
        };
        if let Some(response) = response {
            writeln!(output, "{response}").map_err(ServeError::Stream)?;
            output.flush().map_err(ServeError::Stream)?;
        }
    }
    Ok(())
}

/// The response to one message; `None` for a notification, or a client's response.
fn respond(library: &Library, line: &str) -> Option<Value> {
    let message: Value = match serde_json::from_str(line) {
        Ok(message) => message,
        Err(e) => return Some(error(&Value::Null, PARSE_ERROR, &format!("not JSON: {e}"))),
    };
    let Value::Object(message) = message else {
        // MCP sends one message per line; JSON-RPC batches are not part of it.
        let what = if message.is_array() {
            "batches are not supported: send one request per line"
        } else {
            "a request is a JSON object"
        };
        return Some(error(&Value::Null, INVALID_REQUEST, what));
    };
    let id = message.get("id").cloned();
    let Some(method) = message.get("method") else {
        if message.contains_key("result") || message.contains_key("error") {
            // A response to nothing we asked.
            return None;
        }
        let id = id.unwrap_or(Value::Null);
        return Some(error(&id, INVALID_REQUEST, "a request needs a method"));
    };
    let Some(method) = method.as_str() else {
        let id = id.unwrap_or(Value::Null);
        return Some(error(&id, INVALID_REQUEST, "a method is a string"));
    };
    // Notifications (no id) are acknowledged by doing nothing.
    let id = id?;
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    Some(match handle(library, method, &params) {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, text)) => error(&id, code, &text),
    })
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn handle(library: &Library, method: &str, params: &Value) -> Result<Value, (i64, String)> {
    match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str);
            let version = asked
                .filter(|v| PROTOCOL_VERSIONS.contains(v))
                .unwrap_or(PROTOCOL_VERSIONS[0]);
            Ok(json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": "scar", "version": env!("CARGO_PKG_VERSION")},
                "instructions": "Search the user's local documents with `search` (context chunks \
                    with their sources, chosen by SCAR) or answer from them with `ask`.",
            }))
        }
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tools(library) })),
        "tools/call" => {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let arguments = params
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| json!({}));
            match name {
                "search" => Ok(tool_result(search(library, arguments))),
                "ask" => Ok(tool_result(ask(library, arguments))),
                other => Err((INVALID_PARAMS, format!("no tool is called `{other}`"))),
            }
        }
        "resources/list" => Ok(json!({
            "resources": summaries(library)?.iter().map(|s| json!({
                "uri": format!("scar://index/{}", s.name),
                "name": s.name,
                "description": format!(
                    "{} documents, {} chunks, embedded with {}", s.documents, s.chunks, s.model
                ),
                "mimeType": "application/json",
            })).collect::<Vec<_>>(),
        })),
        "resources/read" => {
            let uri = params
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let name = uri.strip_prefix("scar://index/").unwrap_or_default();
            let summary = summaries(library)?
                .into_iter()
                .find(|s| s.name == name)
                .ok_or_else(|| (INVALID_PARAMS, format!("no resource {uri}")))?;
            let text = serde_json::to_string_pretty(&summary).unwrap_or_default();
            Ok(json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}))
        }
        other => Err((METHOD_NOT_FOUND, format!("no method `{other}`"))),
    }
}

/// What each index holds, or the error of the store that could not say.
fn summaries(library: &Library) -> Result<Vec<crate::IndexSummary>, (i64, String)> {
    library
        .summaries()
        .map_err(|e| (INTERNAL_ERROR, scar_core::ErrorChain(&e).to_string()))
}

/// The tools, with JSON Schemas of their arguments.
fn tools(library: &Library) -> Value {
    let search = json!({
        "type": "object",
        "required": ["question"],
        "properties": {
            "question": {"type": "string", "description": "What to find in the documents"},
            "index": {"enum": library.names(), "description": "Which index (the first by default)"},
            "k": {"type": "integer", "minimum": 1, "maximum": crate::MAX_K, "description": "Seeds (default 5)"},
            "policy": {"enum": ["evidence", "scar", "static_window", "top_k", "parent", "section"],
                       "description": "How neighbours join their seeds (default: the evidence walk)"},
            "first_stage": {"enum": ["hybrid", "dense", "bm25"]},
            "budget_tokens": {"type": "integer", "minimum": 0, "description": "Most tokens of context"},
        },
    });
    let mut ask = search.clone();
    ask["properties"]["max_tokens"] = json!({"type": "integer", "minimum": 1,
        "maximum": crate::MAX_ANSWER_TOKENS, "description": "Most tokens in the answer (default 256)"});
    json!([
        {
            "name": "search",
            "title": "Search the documents",
            "description": "Finds the passages of the user's indexed documents that answer a \
                question, with their neighbours where SCAR judged the evidence to continue. \
                Returns each passage with its document and place, and what was decided.",
            "inputSchema": search,
        },
        {
            "name": "ask",
            "title": "Answer from the documents",
            "description": "Answers a question with the local chat model from the passages \
                `search` would find, citing them as [n].",
            "inputSchema": ask,
        },
    ])
}

/// A tool's outcome as MCP wants it: text for the model, the report as structured content;
/// a failure is a result marked as an error, so that the model can read what went wrong.
fn tool_result(outcome: Result<(String, Value)>) -> Value {
    match outcome {
        Ok((text, report)) => json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": report,
            "isError": false,
        }),
        Err(e) => json!({
            "content": [{"type": "text", "text": ErrorChain(&e).to_string()}],
            "isError": true,
        }),
    }
}

fn search(library: &Library, arguments: Value) -> Result<(String, Value)> {
    let search = SearchRequest::from_json(arguments)?.checked()?;
    let report = library.search(&search)?;
    let text = context_text(&report);
    Ok((text, serde_json::to_value(&report).unwrap_or_default()))
}

fn ask(library: &Library, arguments: Value) -> Result<(String, Value)> {
    let (search, params) = AskRequest::from_json(arguments)?.checked()?;
    let searched = library.search_for_answer(&search)?;
    let report = library.answer(searched, &params, &mut |_| ControlFlow::Continue(()))?;
    let mut text = report.answer.generation.text.trim().to_owned();
    text.push_str("\n\nSources:");
    for source in &report.answer.prompt.sources {
        let _ = write!(
            text,
            "\n[{}] {} {}",
            source.number, source.document, source.place
        );
    }
    Ok((text, serde_json::to_value(&report).unwrap_or_default()))
}

/// The context for a model to read: a line of what SCAR decided, then each chunk numbered in
/// document order with its source.
fn context_text(report: &SearchReport) -> String {
    let ledger = &report.ledger;
    let mut text = format!(
        "{} chunks ({} tokens) for \"{}\", chosen by {}: {} seeds, {} neighbours accepted, {} \
         rejected.",
        report.chunks.len(),
        ledger.context_tokens,
        report.query,
        ledger.policy,
        ledger.seeds.len(),
        ledger.count(Outcome::Accepted),
        ledger.count(Outcome::Rejected),
    );
    for (number, chunk) in (1..).zip(&report.chunks) {
        let role = if chunk.seed { "seed" } else { "neighbour" };
        let _ = write!(
            text,
            "\n\n[{number}] {} {} ({role})",
            chunk.document,
            chunk.place()
        );
        if !chunk.heading_path.is_empty() {
            let _ = write!(text, "\n{}", chunk.heading_path);
        }
        let _ = write!(text, "\n{}", chunk.text.trim());
    }
    text
}
