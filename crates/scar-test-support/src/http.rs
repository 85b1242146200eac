//! A tiny HTTP server on loopback that answers with canned responses and records what it was
//! asked: enough to test a client against a misbehaving chat server without one installed.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A server on `127.0.0.1` that answers the n-th connection with the n-th response and then
/// closes it; once the responses run out it stops accepting.
pub struct CannedServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<String>>>,
}

impl CannedServer {
    /// Starts serving `responses` (each a whole HTTP response: see [`response`]).
    #[must_use]
    pub fn start(responses: Vec<String>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port is free");
        let address = listener
            .local_addr()
            .expect("a bound listener has an address");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut requests = Vec::new();
            for response in responses {
                let Ok((mut stream, _)) = listener.accept() else {
                    break;
                };
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                requests.push(read_request(&mut stream));
                // The client may have gone away already; that is its business.
                let _ = stream.write_all(response.as_bytes());
            }
            requests
        });
        Self {
            address,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Stops the server and returns the requests it received, each as its head and body.
    #[must_use]
    pub fn requests(mut self) -> Vec<String> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Vec<String> {
        let Some(thread) = self.thread.take() else {
            return Vec::new();
        };
        self.stop.store(true, Ordering::SeqCst);
        // Wakes a thread blocked in `accept`; it sees the flag and returns.
        let _ = TcpStream::connect(self.address);
        thread.join().expect("the server thread does not panic")
    }
}

impl Drop for CannedServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Reads one request: its head up to the blank line, then `Content-Length` bytes of body.
fn read_request(stream: &mut TcpStream) -> String {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    head + &String::from_utf8_lossy(&body)
}

/// An HTTP/1.1 response with `status` (e.g. `200 OK`), `headers` and `body`.
#[must_use]
pub fn response(status: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut text = format!("HTTP/1.1 {status}\r\n");
    for (name, value) in headers {
        let _ = write!(text, "{name}: {value}\r\n");
    }
    let _ = write!(
        text,
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    text
}

/// A `200 OK` stream of server-sent events as OpenAI-compatible chat servers send it: one
/// event per piece of text, the finish reason, the usage, then `[DONE]`.
#[must_use]
pub fn event_stream(pieces: &[&str]) -> String {
    let event = |value: String| format!("data: {value}\n\n");
    let mut body: String = pieces
        .iter()
        .map(|piece| {
            let escaped = escape_json(piece);
            event(format!(
                r#"{{"choices":[{{"index":0,"delta":{{"content":"{escaped}"}},"finish_reason":null}}]}}"#
            ))
        })
        .collect();
    body.push_str(&event(
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.to_owned(),
    ));
    body.push_str(&event(format!(
        r#"{{"choices":[],"usage":{{"prompt_tokens":100,"completion_tokens":{}}}}}"#,
        pieces.len()
    )));
    body.push_str(&event("[DONE]".to_owned()));
    response("200 OK", &[("Content-Type", "text/event-stream")], &body)
}

/// `text` as the inside of a JSON string.
fn escape_json(text: &str) -> String {
    let mut escaped = String::new();
    for c in text.chars() {
        match c {
            '"' => escaped.push_str("\\\""),
            '\\' => escaped.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(escaped, "\\u{:04x}", u32::from(c));
            }
            c => escaped.push(c),
        }
    }
    escaped
}
