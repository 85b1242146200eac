//! A document cannot drive the terminal: escape sequences and other control characters in its
//! text, its file name or an answer about it print as visible escapes, while JSON keeps them
//! exactly.

use std::path::Path;
use std::process::Output;

use scar_test_support::http::{CannedServer, event_stream, response};

use crate::common::{run, scar};

/// Text that sets the window title, clears the screen, plants a hyperlink, hides a word, rings
/// the bell, uses a C1 control sequence introducer and returns the carriage.
const HOSTILE: &str = "\u{1b}]0;pwned\u{7}Ferry fees\u{1b}[2J: a kayak costs \
    \u{1b}]8;;http://evil.example\u{1b}\\eight euros\u{1b}]8;;\u{1b}\\, \u{1b}[8mhidden\u{1b}[0m, \
    bell\u{7}, csi\u{9b}31m, del\u{7f}, and over\rwritten.";

/// What a terminal would act on: C0 controls but line feed and tab, DEL, and the C1 controls.
fn acts_on_terminal(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

fn assert_inert(what: &str, output: &Output) {
    for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        let raw: Vec<char> = text.chars().filter(|&c| acts_on_terminal(c)).collect();
        assert!(raw.is_empty(), "{what} {stream} holds {raw:?}: {text}");
    }
}

/// A folder holding one hostile document under a hostile name, indexed.
fn hostile_index(dir: &Path) -> std::path::PathBuf {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("fees\u{1b}]0;title\u{7}.txt"),
        format!("{HOSTILE}\n\nThe kayak fee is paid when you book.\n"),
    )
    .unwrap();
    // A mail (indexed after the hostile file, whose chunk stays the first) whose attachment's
    // name, shown as the place of its chunks, is hostile too.
    std::fs::write(
        docs.join("mail.eml"),
        "Subject: Booking\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nSee the attached timetable.\r\n\
         --b\r\nContent-Type: text/plain; name=\"rules\u{1b}[2J.txt\"\r\n\
         Content-Disposition: attachment; filename=\"rules\u{1b}[2J.txt\"\r\n\r\n\
         Sunset cruises leave the harbour at eight.\r\n--b--\r\n",
    )
    .unwrap();
    // Skipped (empty), so that its name is printed on stderr.
    std::fs::write(docs.join("empty\u{1b}[31m.txt"), "").unwrap();
    let index = dir.join("index");
    let output = scar(&index).arg("index").arg(&docs).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "one file is skipped");
    assert_inert("index", &output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(r"empty\x1b[31m.txt"), "{stderr}");
    index
}

#[test]
fn documents_and_answers_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let index = hostile_index(dir.path());

    for extra in [&[][..], &["--full"]] {
        let output = run(scar(&index)
            .args(["search", "what does a kayak cost?", "--k", "1"])
            .args(extra));
        assert_inert("search", &output);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(r"\x1b]0;pwned\x07Ferry fees\x1b[2J")
                && stdout.contains(r"fees\x1b]0;title\x07.txt"),
            "{stdout}"
        );
    }
    // Every chunk's place, the attachment's among them, as search's context lines show it.
    let output = run(scar(&index).args(["search", "when do sunset cruises leave?", "--k", "10"]));
    assert_inert("search", &output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(r"› rules\x1b[2J.txt ¶"), "{stdout}");
    let chunk = run(scar(&index).args(["inspect", "--chunk", "0"]));
    assert_inert("inspect --chunk", &chunk);
    let stdout = String::from_utf8_lossy(&chunk.stdout);
    assert!(
        stdout.contains(r"csi\u{9b}31m, del\x7f, and over\x0dwritten."),
        "{stdout}"
    );
    assert_inert("inspect", &run(scar(&index).arg("inspect")));

    // JSON keeps the text exactly.
    let json = run(scar(&index).args(["search", "kayak", "--k", "1", "--json"]));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        report["chunks"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with(HOSTILE)
    );

    let server = CannedServer::start(vec![event_stream(&[
        "It costs \u{1b}]8;;http://evil.example\u{1b}",
        "\\eight euros [1].\u{1b}[2J",
    ])]);
    let answer = run(scar(&index)
        .args(["ask", "what does a kayak cost?", "--k", "1", "--llm-url"])
        .arg(server.url("/v1")));
    assert_inert("ask", &answer);
    let stdout = String::from_utf8_lossy(&answer.stdout);
    assert!(
        stdout.contains(r"It costs \x1b]8;;http://evil.example\x1b\eight euros [1].\x1b[2J"),
        "{stdout}"
    );
}

#[test]
fn errors_that_quote_a_server_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let index = hostile_index(dir.path());
    let server = CannedServer::start(vec![response(
        "200 OK",
        &[("Content-Type", "text/html")],
        "<title>\u{1b}]0;pwned\u{7}</title>",
    )]);
    let output = scar(&index)
        .args(["ask", "kayak", "--k", "1", "--llm-url"])
        .arg(server.url("/v1"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_inert("ask error", &output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(r"<title>\x1b]0;pwned\x07</title>"),
        "{stderr}"
    );
}
