//! The MCP server over in-memory streams: the handshake, the tools, the resources, and errors
//! that follow JSON-RPC.

use serde_json::{Value, json};

use crate::common::example;

/// Sends `messages` (one per line) and returns the responses, one per request.
fn exchange(messages: &[Value]) -> Vec<Value> {
    let input = messages
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    let mut output = Vec::new();
    scar_serve::mcp::serve(&example(), input.as_bytes(), &mut output).unwrap();
    String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn request(id: u64, method: &str, params: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[test]
fn a_client_can_initialise_list_and_call_the_tools() {
    let responses = exchange(&[
        request(
            1,
            "initialize",
            &json!({"protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}),
        ),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        request(2, "tools/list", &json!({})),
        request(
            3,
            "tools/call",
            &json!({"name": "search", "arguments": {
            "question": "What does it cost to take my kayak on the ferry?", "k": 2}}),
        ),
        request(4, "resources/list", &json!({})),
        request(5, "resources/read", &json!({"uri": "scar://index/example"})),
        request(6, "ping", &json!({})),
    ]);
    assert_eq!(
        responses.len(),
        6,
        "the notification gets no response: {responses:#?}"
    );
    assert_eq!(responses[0]["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(responses[0]["result"]["serverInfo"]["name"], "scar");
    let tools: Vec<&str> = responses[1]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["search", "ask"]);
    let search = &responses[2]["result"];
    assert_eq!(search["isError"], false);
    let text = search["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("ferry-handbook.md") && text.contains("(seed)"),
        "{text}"
    );
    assert_eq!(search["structuredContent"]["schema"], "scar.search/2");
    assert_eq!(
        responses[3]["result"]["resources"][0]["uri"],
        "scar://index/example"
    );
    let summary: Value = serde_json::from_str(
        responses[4]["result"]["contents"][0]["text"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(summary["chunks"].as_u64().unwrap() > 0);
    assert_eq!(responses[5]["result"], json!({}));
}

#[test]
fn mistakes_are_errors_the_client_can_read() {
    let responses = exchange(&[
        request(
            1,
            "tools/call",
            &json!({"name": "search", "arguments": {"question": "q", "k": 0}}),
        ),
        request(
            2,
            "tools/call",
            &json!({"name": "translate", "arguments": {}}),
        ),
        request(
            3,
            "resources/read",
            &json!({"uri": "scar://index/elsewhere"}),
        ),
        request(4, "sing", &json!({})),
        json!({"jsonrpc": "2.0", "id": 5}),
    ]);
    // A tool that fails reports it in its result, for the model to read.
    assert_eq!(responses[0]["result"]["isError"], true);
    let text = responses[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("`k`"), "{text}");
    assert_eq!(responses[1]["error"]["code"], -32602);
    assert_eq!(responses[2]["error"]["code"], -32602);
    assert_eq!(responses[3]["error"]["code"], -32601);
    assert_eq!(responses[4]["error"]["code"], -32600);

    let mut output = Vec::new();
    scar_serve::mcp::serve(&example(), &b"{not json\n"[..], &mut output).unwrap();
    let response: Value = serde_json::from_slice(&output).unwrap();
    assert_eq!(response["error"]["code"], -32700);
}

/// Every malformed line gets the error JSON-RPC gives for it, with a null id, and the server
/// goes on to answer the next.
#[test]
fn malformed_lines_are_answered_and_the_session_goes_on() {
    let lines: &[&[u8]] = &[
        b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\", \"x\": \"\xff\xfe\"}",
        br#"[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]"#,
        b"[]",
        b"42",
        br#""ping""#,
        b"{}",
        br#"{"jsonrpc": "2.0", "id": 3, "method": 7}"#,
        br#"{"jsonrpc": "2.0", "id": 9, "result": {}}"#,
        br#"{"jsonrpc": "2.0", "id": 4, "method": "ping"}"#,
    ];
    let input = lines.join(&b'\n');
    let mut output = Vec::new();
    scar_serve::mcp::serve(&example(), &input[..], &mut output).unwrap();
    let responses: Vec<Value> = String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let codes: Vec<Option<i64>> = responses
        .iter()
        .map(|r| r["error"]["code"].as_i64())
        .collect();
    let invalid = Some(-32600);
    assert_eq!(
        codes,
        [
            Some(-32700),
            invalid,
            invalid,
            invalid,
            invalid,
            invalid,
            invalid,
            None
        ],
        "{responses:#?}"
    );
    assert!(responses[..6].iter().all(|r| r["id"].is_null()));
    assert_eq!(responses[6]["id"], 3);
    assert_eq!(responses[7]["id"], 4);
    assert_eq!(responses[7]["result"], json!({}));
}
