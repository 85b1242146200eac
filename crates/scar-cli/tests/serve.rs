//! `scar serve` and `scar mcp` as other tools start them: the HTTP server on a port of its own,
//! refused where other machines reach it without a token; the MCP server driven by the official
//! Python SDK.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::common::{example_index, fails_with, scar, workspace};

/// Kills the server when the test ends, passing or not.
pub struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `scar serve` as `command` says, on a port of its own: the server and the address it
/// says it listens on.
pub fn start(command: &mut Command) -> (Running, String) {
    let mut child = command
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let running = Running(child);
    let address = stderr
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            line.strip_prefix("listening on http://")
                .map(|rest| rest.split('/').next().unwrap_or_default().to_owned())
        })
        .expect("the server says where it listens");
    (running, address)
}

#[test]
fn the_http_server_answers_on_the_address_it_prints() {
    let (running, address) = start(&mut scar(example_index()));
    let health: serde_json::Value = get_json(&format!("http://{address}/v1/health"));
    assert_eq!(health["status"], "ok");
    let indexes = get_json(&format!("http://{address}/v1/indexes"));
    assert_eq!(indexes["indexes"][0]["name"], "example");
    drop(running);
}

pub fn get_json(url: &str) -> serde_json::Value {
    ureq::get(url).call().unwrap().into_json().unwrap()
}

#[test]
fn an_address_other_machines_reach_needs_a_token() {
    fails_with(
        scar(example_index()).args(["serve", "--bind", "0.0.0.0:0"]),
        "can be reached from other machines; serve it with a token",
    );
}

/// The Python of a virtual environment with the MCP SDK (scripts/fetch-mcp-client).
fn mcp_python() -> String {
    std::env::var("SCAR_MCP_PYTHON")
        .expect("SCAR_MCP_PYTHON: run the tests through scripts/test, which installs the MCP SDK")
}

#[test]
fn the_official_mcp_client_lists_calls_and_reads() {
    let mut client = Command::new(mcp_python());
    client
        .arg(workspace().join("crates/scar-cli/tests/mcp_client.py"))
        .arg(env!("CARGO_BIN_EXE_scar"))
        .arg(example_index())
        .arg("What does it cost to take my kayak on the ferry?");
    // The environment `scar` gets in these tests, passed on by the client to the server.
    for (key, value) in scar(example_index()).get_envs() {
        match value {
            Some(value) => client.env(key, value),
            None => client.env_remove(key),
        };
    }
    let output = client.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let seen: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["server"], "scar");
    assert_eq!(seen["tools"], serde_json::json!(["search", "ask"]));
    assert_eq!(seen["search_error"], false);
    let text = seen["search_text"].as_str().unwrap();
    assert!(text.contains("ferry-handbook.md"), "{text}");
    assert_eq!(seen["search_report"]["schema"], "scar.search/2");
    assert_eq!(
        seen["resources"],
        serde_json::json!(["scar://index/example"])
    );
    assert!(
        seen["resource_text"]
            .as_str()
            .unwrap()
            .contains("\"chunks\"")
    );
}
