//! Generation through an OpenAI-compatible chat-completions server (llama.cpp's server, Ollama,
//! vLLM), streamed as server-sent events.

use std::io::{BufRead, BufReader, Read};
use std::net::IpAddr;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;
use url::Url;

use crate::{AnswerError, Generation, GenerationParams, Generator, Prompt, Result, StopReason};

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Base URL up to the API version, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// The model name the server expects.
    pub model: String,
    /// Sent as a bearer token when set.
    pub api_key: Option<String>,
    /// Time allowed to connect.
    pub connect_timeout: Duration,
    /// Longest silence allowed between two streamed pieces (the first may wait for the prompt).
    pub read_timeout: Duration,
    /// Questions and documents leave this machine only when this is set: by default only
    /// loopback addresses are accepted.
    pub allow_remote_host: bool,
}

impl RemoteOptions {
    /// Options for a server at `base_url` serving `model`, loopback only, with timeouts that
    /// suit a local server on a laptop (5 s to connect, 120 s of silence).
    #[must_use]
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_mins(2),
            allow_remote_host: false,
        }
    }
}

/// A chat model behind an OpenAI-compatible server.
#[derive(Debug)]
pub struct RemoteModel {
    endpoint: Url,
    options: RemoteOptions,
    agent: ureq::Agent,
}

impl RemoteModel {
    /// Checks the URL (http or https; a loopback host unless allowed otherwise).
    pub fn new(options: RemoteOptions) -> Result<Self> {
        let bad = |reason: &str, source| AnswerError::BadServerUrl {
            url: options.base_url.clone(),
            reason: reason.to_owned(),
            source,
        };
        let base = Url::parse(options.base_url.trim_end_matches('/'))
            .map_err(|e| bad("not a URL", Some(e)))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("only http and https are supported", None));
        }
        let host = base.host_str().ok_or_else(|| bad("no host", None))?;
        if !options.allow_remote_host && !is_loopback(host) {
            return Err(bad(
                "not a loopback address; allow other hosts explicitly to send documents there",
                None,
            ));
        }
        let endpoint = Url::parse(&format!(
            "{}/chat/completions",
            base.as_str().trim_end_matches('/')
        ))
        .map_err(|e| bad("no chat endpoint under it", Some(e)))?;
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(options.connect_timeout)
            .timeout_read(options.read_timeout)
            // A redirect could lead the documents to a host the loopback rule refuses.
            .redirects(0)
            .build();
        Ok(Self {
            endpoint,
            options,
            agent,
        })
    }

    /// The response when it is a stream of answer events; otherwise the error saying what came
    /// back: where a redirect (never followed) leads, or the type and start of any other body.
    fn event_stream(&self, response: ureq::Response) -> Result<ureq::Response> {
        let status = response.status();
        if (300..400).contains(&status) {
            let location = response.header("Location").unwrap_or("nowhere");
            return Err(self.server_error(
                format!(
                    "HTTP {status} redirects to {location}; redirects are not followed, give the \
                 server's own address"
                ),
                None,
            ));
        }
        let content_type = response.content_type().to_owned();
        if content_type.eq_ignore_ascii_case("text/event-stream") {
            return Ok(response);
        }
        let body = response.into_string().unwrap_or_default();
        let start: String = body
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(200)
            .collect();
        Err(self.server_error(
            format!("expected server-sent events (text/event-stream), got {content_type}: {start}"),
            None,
        ))
    }

    /// Reads the stream's next line into `line`, within [`MAX_EVENT_LINE`]; false at its end.
    fn read_event_line(
        &self,
        reader: &mut impl BufRead,
        line: &mut Vec<u8>,
    ) -> Result<bool, AnswerError> {
        line.clear();
        // One byte past the limit tells a line that is too long from one that fills it.
        let read = reader
            .take(MAX_EVENT_LINE + 1)
            .read_until(b'\n', line)
            .map_err(|e| self.server_error("the answer stream broke off", Some(Box::new(e))))?;
        if line.len() as u64 > MAX_EVENT_LINE {
            return Err(self.server_error(
                format!(
                    "an event of the answer stream is longer than {} KiB",
                    MAX_EVENT_LINE / 1024
                ),
                None,
            ));
        }
        Ok(read > 0)
    }

    fn server_error(
        &self,
        reason: impl Into<String>,
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> AnswerError {
        AnswerError::Server {
            url: self.endpoint.to_string(),
            reason: reason.into(),
            source,
        }
    }
}

/// The longest line of an answer stream read: an event carries a few words of the answer.
const MAX_EVENT_LINE: u64 = 1024 * 1024;

/// Cuts `piece`, arriving after `pieces` pieces and `written` bytes of answer, to what an answer
/// of `max_tokens` tokens has room for; true when the answer is then full. A server that sends
/// more than was asked for is cut off where a local model stops: each piece holds at least one
/// token, of at most [`MAX_TOKEN_BYTES`].
fn cut_to_max_tokens(piece: &mut String, pieces: usize, written: usize, max_tokens: usize) -> bool {
    if pieces >= max_tokens {
        piece.clear();
        return true;
    }
    let room = max_tokens
        .saturating_mul(MAX_TOKEN_BYTES)
        .saturating_sub(written);
    if piece.len() <= room {
        return false;
    }
    let mut end = room;
    while !piece.is_char_boundary(end) {
        end -= 1;
    }
    piece.truncate(end);
    true
}

/// The most bytes one token of any vocabulary decodes to, with room to spare: the bound on an
/// answer of `max_tokens` tokens.
const MAX_TOKEN_BYTES: usize = 256;

/// What a server sent, quoted in an error: its start, not megabytes of it.
fn quote(text: &str) -> String {
    const SHOWN: usize = 200;
    match text.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{:?}… ({} bytes)", &text[..end], text.len()),
        None => format!("{text:?}"),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[derive(Deserialize)]
struct StreamChunk {
    #[serde(default)]
    choices: Vec<StreamChoice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct StreamChoice {
    #[serde(default)]
    delta: Delta,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<usize>,
    completion_tokens: Option<usize>,
}

impl Generator for RemoteModel {
    fn name(&self) -> String {
        format!("{} at {}", self.options.model, self.options.base_url)
    }

    fn count_prompt_tokens(&self, _prompt: &Prompt) -> Result<Option<usize>> {
        // The server's tokenizer is unknown here; the server reports the count after answering.
        Ok(None)
    }

    fn generate(
        &mut self,
        prompt: &Prompt,
        params: &GenerationParams,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation> {
        let started = Instant::now();
        let body = json!({
            "model": self.options.model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
        });
        let mut request = self.agent.post(self.endpoint.as_str());
        if let Some(key) = &self.options.api_key {
            request = request.set("Authorization", &format!("Bearer {key}"));
        }
        let response = request.send_json(body).map_err(|error| match error {
            ureq::Error::Status(code, response) => {
                let detail = response.into_string().unwrap_or_default();
                self.server_error(format!("HTTP {code}: {}", quote(detail.trim())), None)
            }
            ureq::Error::Transport(transport) => {
                self.server_error("the request failed", Some(Box::new(transport)))
            }
        })?;
        let response = self.event_stream(response)?;
        let mut text = String::new();
        let mut stop = StopReason::MaxTokens;
        let mut prompt_tokens = None;
        let mut generated_tokens = None;
        let mut pieces = 0;
        let mut first_token_at = None;
        let mut events = 0;
        let mut reader = BufReader::new(response.into_reader());
        let mut line = Vec::new();
        while self.read_event_line(&mut reader, &mut line)? {
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                break;
            }
            events += 1;
            let chunk: StreamChunk = serde_json::from_str(data).map_err(|e| {
                let quoted = quote(data);
                self.server_error(format!("unreadable event {quoted}"), Some(Box::new(e)))
            })?;
            if let Some(usage) = chunk.usage {
                prompt_tokens = usage.prompt_tokens;
                generated_tokens = usage.completion_tokens;
            }
            let Some(choice) = chunk.choices.into_iter().next() else {
                continue;
            };
            if let Some(mut piece) = choice.delta.content.filter(|p| !p.is_empty()) {
                first_token_at.get_or_insert_with(|| started.elapsed());
                let over = cut_to_max_tokens(&mut piece, pieces, text.len(), params.max_tokens);
                pieces += 1;
                text.push_str(&piece);
                if !piece.is_empty() && on_text(&piece).is_break() {
                    stop = StopReason::Cancelled;
                    break;
                }
                if over {
                    stop = StopReason::MaxTokens;
                    break;
                }
            }
            match choice.finish_reason.as_deref() {
                Some("length") => stop = StopReason::MaxTokens,
                Some(_) => stop = StopReason::EndOfTurn,
                None => {}
            }
        }
        if events == 0 {
            return Err(self.server_error(
                "the answer was an event stream (text/event-stream) with no data event",
                None,
            ));
        }
        let total = started.elapsed();
        Ok(Generation {
            text,
            prompt_tokens,
            generated_tokens: generated_tokens.unwrap_or(pieces),
            stop,
            first_token_seconds: first_token_at.unwrap_or(total).as_secs_f64(),
            total_seconds: total.as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use scar_test_support::http::{CannedServer, event_stream, response};

    use super::*;

    #[test]
    fn accepts_loopback_hosts_only_unless_allowed() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1/",
            "http://[::1]:8000/v1",
        ] {
            assert!(
                RemoteModel::new(RemoteOptions::new(url, "m")).is_ok(),
                "{url}"
            );
        }
        let error =
            RemoteModel::new(RemoteOptions::new("http://10.0.0.5:8080/v1", "m")).unwrap_err();
        assert!(error.to_string().contains("loopback"), "{error}");
        let allowed = RemoteOptions {
            allow_remote_host: true,
            ..RemoteOptions::new("https://example.org/v1", "m")
        };
        assert!(RemoteModel::new(allowed).is_ok());
        assert!(RemoteModel::new(RemoteOptions::new("ftp://127.0.0.1/v1", "m")).is_err());
        assert!(RemoteModel::new(RemoteOptions::new("not a url", "m")).is_err());
    }

    #[test]
    fn builds_the_chat_completions_endpoint() {
        let model = RemoteModel::new(RemoteOptions::new("http://127.0.0.1:8080/v1/", "m")).unwrap();
        assert_eq!(
            model.endpoint.as_str(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
    }

    #[test]
    fn a_closed_port_is_a_clear_error() {
        // Port 9 (discard) is closed on any machine that runs tests.
        let mut model = RemoteModel::new(RemoteOptions::new("http://127.0.0.1:9/v1", "m")).unwrap();
        let prompt = Prompt {
            system: "s".to_owned(),
            user: "u".to_owned(),
            sources: Vec::new(),
        };
        let error = model
            .generate(&prompt, &GenerationParams::default(), &mut |_| {
                ControlFlow::Continue(())
            })
            .unwrap_err();
        assert!(error.to_string().contains("127.0.0.1:9"), "{error}");
    }

    fn prompt() -> Prompt {
        Prompt {
            system: "s".to_owned(),
            user: "u".to_owned(),
            sources: Vec::new(),
        }
    }

    /// What generating against the first response of `server` gives, and the text streamed.
    fn generate_at(server: &CannedServer) -> (Result<Generation>, String) {
        let mut model = RemoteModel::new(RemoteOptions::new(server.url("/v1"), "m")).unwrap();
        let mut streamed = String::new();
        let result = model.generate(&prompt(), &GenerationParams::default(), &mut |piece| {
            streamed.push_str(piece);
            ControlFlow::Continue(())
        });
        (result, streamed)
    }

    #[test]
    fn a_server_sending_more_than_max_tokens_is_cut_off_there() {
        let params = GenerationParams {
            max_tokens: 3,
            ..GenerationParams::default()
        };
        let answer = |pieces: &[&str]| {
            let server = CannedServer::start(vec![event_stream(pieces)]);
            let mut model = RemoteModel::new(RemoteOptions::new(server.url("/v1"), "m")).unwrap();
            let mut streamed = String::new();
            let generation = model
                .generate(&prompt(), &params, &mut |piece| {
                    streamed.push_str(piece);
                    ControlFlow::Continue(())
                })
                .unwrap();
            assert_eq!(generation.text, streamed);
            generation
        };
        let many = answer(&["one", " two", " three", " four", " five"]);
        assert_eq!(many.text, "one two three");
        assert_eq!(many.stop, StopReason::MaxTokens);
        // Three tokens are never 2,000 bytes.
        let long = "é".repeat(1000);
        let huge = answer(&[&long]);
        assert_eq!(huge.text.len(), 3 * MAX_TOKEN_BYTES);
        assert_eq!(huge.stop, StopReason::MaxTokens);
    }

    #[test]
    fn streams_the_pieces_of_an_event_stream() {
        let server = CannedServer::start(vec![event_stream(&["Hello", ", world"])]);
        let (result, streamed) = generate_at(&server);
        let generation = result.unwrap();
        assert_eq!(generation.text, "Hello, world");
        assert_eq!(streamed, "Hello, world");
        assert_eq!(generation.stop, StopReason::EndOfTurn);
        assert_eq!(generation.prompt_tokens, Some(100));
        let requests = server.requests();
        assert!(requests[0].starts_with("POST /v1/chat/completions "));
        assert!(requests[0].contains(r#""stream":true"#), "{}", requests[0]);
    }

    #[test]
    fn redirects_are_refused_and_name_where_they_lead() {
        for status in [
            "301 Moved Permanently",
            "302 Found",
            "307 Temporary Redirect",
            "308 Permanent Redirect",
        ] {
            // Another server that must never see the documents.
            let elsewhere = CannedServer::start(vec![event_stream(&["leaked"])]);
            let location = elsewhere.url("/v1/chat/completions");
            let server =
                CannedServer::start(vec![response(status, &[("Location", &location)], "")]);
            let (result, streamed) = generate_at(&server);
            let error = result.unwrap_err().to_string();
            let code = &status[..3];
            assert!(
                error.contains(&format!("HTTP {code}")) && error.contains(&location),
                "{status}: {error}"
            );
            assert!(streamed.is_empty());
            assert!(elsewhere.requests().is_empty(), "{status} was followed");
        }
    }

    #[test]
    fn an_answer_that_is_not_an_event_stream_says_what_came_back() {
        let json = response(
            "200 OK",
            &[("Content-Type", "application/json")],
            r#"{"choices":[{"message":{"content":"hi"}}]}"#,
        );
        let html = response(
            "200 OK",
            &[("Content-Type", "text/html; charset=utf-8")],
            "<!DOCTYPE html>\n<html><title>Router login</title></html>",
        );
        let silent = response(
            "200 OK",
            &[("Content-Type", "text/event-stream")],
            ": keep-alive\n\n",
        );
        for (answer, words) in [
            (json, ["application/json", r#"{"choices""#]),
            (html, ["text/html", "Router login"]),
            (silent, ["no data event", "text/event-stream"]),
        ] {
            let server = CannedServer::start(vec![answer]);
            let error = generate_at(&server).0.unwrap_err().to_string();
            for word in words {
                assert!(error.contains(word), "{word:?} not in {error}");
            }
        }
    }
}
