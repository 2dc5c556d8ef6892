//! trace-summarize --requests otlp (results as GenAI client spans) and
//! their way back through trace-convert; OTLP protobuf and the
//! collector's file exports.

use serde_json::{Value, json};

use crate::otel::{fixture, records};
use crate::util::{Cmd, TestDir, run_stdin};

/// The attributes of an OTLP span as one object (typed values unwrapped).
fn attrs_of(span: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for kv in span["attributes"].as_array().unwrap() {
        let v = kv["value"].as_object().unwrap();
        assert_eq!(v.len(), 1, "{kv}");
        let (kind, inner) = v.iter().next().unwrap();
        let inner = match kind.as_str() {
            "arrayValue" => Value::Array(
                inner["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x["stringValue"].clone())
                    .collect(),
            ),
            _ => inner.clone(),
        };
        out.insert(kv["key"].as_str().unwrap().to_string(), inner);
    }
    Value::Object(out)
}

/// A span's attributes (typed values unwrapped), then its status.
#[track_caller]
fn assert_span(span: &Value, attrs: Value, status: Value) {
    assert_eq!(attrs_of(span), attrs);
    assert_eq!(span["status"], status);
}

fn is_hex(s: &Value, len: usize) -> bool {
    let s = s.as_str().unwrap();
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit()) && s.bytes().any(|b| b != b'0')
}

#[test]
fn summarize_requests_otlp_writes_one_genai_client_span_per_result() {
    let input = concat!(
        r#"{"index":0,"id":"a","session_id":"s","model":"m","scheduled_ms":10.0,"sent_ms":10.5,"start_time":"2026-11-23T10:00:00.010500Z","ttft_ms":100.0,"first_chunk_ms":50.0,"e2e_ms":400.0,"itl_ms":[100.0,200.0],"input_length":5,"output_length":3,"prompt_tokens":6,"completion_tokens":4,"cached_tokens":2,"finish_reason":"stop","status":"ok","http_status":200}"#,
        "\n",
        // Its wall clock is 1 µs ahead of the run's: the span keeps the run's.
        r#"{"index":1,"session_id":"s","after":["a"],"scheduled_ms":420.0,"sent_ms":420.25,"start_time":"2026-11-23T10:00:00.420251Z","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":7,"output_length":2,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"error","http_status":500,"error":"HTTP 500: boom"}"#,
        "\n",
        r#"{"index":2,"id":"t","scheduled_ms":500.0,"sent_ms":500.0,"start_time":"2026-11-23T10:00:00.500000Z","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":1,"output_length":1,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"timeout","http_status":null,"error":"no answer within 1s","shard":"1/2"}"#,
        "\n"
    );
    let run = run_stdin("trace-summarize", &["--requests", "otlp"], input);
    run.ok();
    // One document on one line, as the Collector's file exporter writes.
    assert_eq!(run.lines().len(), 1);
    let doc = run.json();
    let rs = doc["resourceSpans"].as_array().unwrap();
    assert_eq!(rs.len(), 1);
    assert_eq!(
        attrs_of(&rs[0]["resource"]),
        json!({"service.name": "trace-replay",
               "tracekit.run.start": "2026-11-23T10:00:00.000000Z"})
    );
    assert_eq!(rs[0]["scopeSpans"][0]["scope"]["name"], "tracekit");
    let spans = rs[0]["scopeSpans"][0]["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 3);
    for s in spans {
        assert!(is_hex(&s["traceId"], 32) && is_hex(&s["spanId"], 16), "{s}");
        assert_eq!(s["kind"], 3, "{s}");
    }
    // 10:00:00Z is 1795428000 s since the epoch; the run starts there
    // (start_time 10.5 ms after it, at sent_ms 10.5).
    let t0: u64 = 1_795_428_000_000_000_000;
    let times = |s: &Value| {
        [&s["startTimeUnixNano"], &s["endTimeUnixNano"]]
            .map(|t| t.as_str().unwrap().parse::<u64>().unwrap() - t0)
    };
    assert_eq!(times(&spans[0]), [10_500_000, 410_500_000]);
    assert_eq!(times(&spans[1]), [420_250_000, 420_250_000]);
    assert_eq!(times(&spans[2]), [500_000_000, 500_000_000]);
    assert_eq!(spans[0]["name"], "chat m");
    let want = [
        (
            json!({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                   "gen_ai.request.max_tokens": "3", "gen_ai.conversation.id": "s",
                   "gen_ai.usage.input_tokens": "6", "gen_ai.usage.output_tokens": "4",
                   "gen_ai.usage.cache_read.input_tokens": "2",
                   "gen_ai.response.finish_reasons": ["stop"],
                   "gen_ai.response.time_to_first_chunk": 0.1,
                   "http.response.status_code": "200", "tracekit.index": "0",
                   "tracekit.record.id": "a"}),
            json!({}),
        ),
        // Missing counts stay missing; the error's HTTP status is its type.
        (
            json!({"gen_ai.operation.name": "chat", "gen_ai.request.max_tokens": "2",
                   "gen_ai.conversation.id": "s", "http.response.status_code": "500",
                   "error.type": "500", "tracekit.index": "1"}),
            json!({"code": 2, "message": "HTTP 500: boom"}),
        ),
        (
            json!({"gen_ai.operation.name": "chat", "gen_ai.request.max_tokens": "1",
                   "error.type": "timeout", "tracekit.index": "2",
                   "tracekit.record.id": "t", "tracekit.shard": "1/2"}),
            json!({"code": 2, "message": "no answer within 1s"}),
        ),
    ];
    for (span, (attributes, status)) in spans.iter().zip(want) {
        assert_span(span, attributes, status);
    }
    assert!(spans[0].get("links").is_none());
    // One session, one trace; the turn links to the one it waited for.
    assert_eq!(spans[1]["traceId"], spans[0]["traceId"]);
    assert_eq!(
        spans[1]["links"],
        json!([{"traceId": spans[0]["traceId"], "spanId": spans[0]["spanId"]}])
    );
    assert_ne!(spans[2]["traceId"], spans[0]["traceId"]);
    // The same results give the same ids.
    let again = run_stdin("trace-summarize", &["--requests", "otlp"], input);
    assert_eq!(again.stdout, run.stdout);

    // trace-convert reads it back: the errors are dropped and counted; the
    // conversation id is a session, one call long.
    let back = Cmd::new("trace-convert").stdin(run.stdout.clone()).run();
    let got: Vec<Value> = records(&back).iter().map(numbers_as_f64).collect();
    assert_eq!(
        got,
        vec![numbers_as_f64(
            &json!({"timestamp": 0, "input_length": 6, "output_length": 4,
            "session_id": "s", "model": "m", "id": spans[0]["spanId"],
            "observed": {"prompt_tokens": 6, "completion_tokens": 4, "ttft_ms": 100,
                "e2e_ms": 400, "cached_tokens": 2, "status": "ok"}})
        )]
    );
    back.stderr_has("3 records read, 1 written, 2 dropped (2 failed)");
}

#[test]
fn an_empty_results_file_is_an_empty_otlp_document_and_a_bad_start_time_is_named() {
    let run = run_stdin("trace-summarize", &["--requests", "otlp"], "");
    run.ok();
    assert_eq!(run.stdout_str(), "{\"resourceSpans\":[]}\n");
    let bad = r#"{"index":0,"scheduled_ms":0,"sent_ms":0,"start_time":"yesterday","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":1,"output_length":1,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"error","http_status":null}"#;
    let run = run_stdin("trace-summarize", &["--requests", "otlp"], bad);
    run.code(2);
    run.stderr_is("trace-summarize: <stdin>:1: error: field `start_time`: \"yesterday\" is not an RFC 3339 time\n");
}

/// Replay a trace of a session (a fan-out and a join) and a lone request
/// on the simulator, export the results as OTLP and convert them back:
/// the replayed trace returns, its times those the run measured.
#[test]
fn a_replay_exported_as_otlp_converts_back_to_the_replayed_trace() {
    let dir = TestDir::new("otlp-round-trip");
    // b and c both wait for a and start together, so they overlap (each
    // lasts at least the simulator's 20 ms TTFT); d joins them.
    let trace = [
        json!({"timestamp": 0, "input_length": 600, "hash_ids": [1, 2], "output_length": 4, "session_id": "s1", "id": "a"}),
        json!({"timestamp": 5, "input_length": 100, "hash_ids": [7], "output_length": 2, "id": "x"}),
        json!({"input_length": 700, "hash_ids": [1, 3], "output_length": 3, "session_id": "s1", "id": "b", "after": ["a"]}),
        json!({"input_length": 50, "hash_ids": [9], "output_length": 2, "session_id": "s1", "id": "c", "after": ["a"]}),
        json!({"input_length": 1100, "hash_ids": [1, 3, 4], "output_length": 5, "session_id": "s1", "id": "d", "after": ["b", "c"], "delay": 10}),
    ];
    let text: String = trace.iter().map(|r| format!("{r}\n")).collect();
    let trace_path = dir.write("trace.jsonl", &text);
    let replay = Cmd::new("trace-replay").arg("--sim").arg(&trace_path).run();
    replay.code(0);
    let results = replay.json_lines();
    assert_eq!(results.len(), 5);
    let otlp = run_stdin(
        "trace-summarize",
        &["--requests", "otlp"],
        replay.stdout.clone(),
    );
    otlp.ok();
    // Span id to record id, from the export.
    let doc = otlp.json();
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let record_of: std::collections::HashMap<String, String> = spans
        .iter()
        .map(|s| {
            (
                s["spanId"].as_str().unwrap().to_string(),
                attrs_of(s)["tracekit.record.id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let back = run_stdin("trace-convert", &["--from", "otel"], otlp.stdout.clone());
    let got = records(&back);
    assert_eq!(got.len(), 5);

    // Expected, from the results: microseconds as integers.
    let us = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as i64;
    let result: std::collections::HashMap<&str, &Value> = results
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r))
        .collect();
    let sent = |id: &str| us(&result[id]["sent_ms"]);
    let end = |id: &str| sent(id) + us(&result[id]["e2e_ms"]);
    let first = ["a", "x", "b", "c", "d"]
        .map(sent)
        .into_iter()
        .min()
        .unwrap();
    let mut order = vec!["a", "x", "b", "c", "d"];
    order.sort_by_key(|id| sent(id));
    // d waits for the one of b and c that ended last first.
    let mut joined = vec!["b", "c"];
    joined.sort_by_key(|id| std::cmp::Reverse(end(id)));
    let ms = |us: i64| json!(us as f64 / 1000.0);
    for (r, id) in got.iter().zip(&order) {
        let want_id = &record_of[r["id"].as_str().unwrap()];
        assert_eq!(want_id, id, "{r}");
        let rec = &trace.iter().find(|t| t["id"] == *id).unwrap();
        let res = result[id];
        let mut want = json!({
            "timestamp": ms(sent(id) - first),
            "input_length": rec["input_length"],
            "output_length": rec["output_length"],
        });
        if let Some(s) = rec.get("session_id") {
            want["session_id"] = s.clone();
        }
        want["id"] = r["id"].clone();
        want["observed"] = json!({
            "prompt_tokens": rec["input_length"],
            "completion_tokens": rec["output_length"],
            "ttft_ms": res["ttft_ms"],
            "e2e_ms": res["e2e_ms"],
            "cached_tokens": res["cached_tokens"],
            "status": "ok",
        });
        let waited: Vec<&str> = match *id {
            "b" | "c" => vec!["a"],
            "d" => joined.clone(),
            _ => vec![],
        };
        if let Some(last) = waited.first() {
            let after: Vec<Value> = r["after"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| json!(record_of[s.as_str().unwrap()]))
                .collect();
            assert_eq!(after, waited.iter().map(|w| json!(w)).collect::<Vec<_>>());
            want["after"] = r["after"].clone();
            want["delay"] = ms(sent(id) - end(last));
        }
        assert_eq!(numbers_as_f64(r), numbers_as_f64(&want));
    }
}

/// Numbers compared by value (2 and 2.0 are one number).
fn numbers_as_f64(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.iter().map(numbers_as_f64).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), numbers_as_f64(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A small protobuf encoder for the tests: OTLP JSON documents as the
/// binary `TracesData` of opentelemetry-proto (trace.proto field numbers),
/// so that each .pb input has a JSON twin to be compared with.
mod pb {
    use serde_json::Value;

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn tag(out: &mut Vec<u8>, field: u64, wire: u64) {
        varint(out, field << 3 | wire);
    }

    fn bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
        tag(out, field, 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    fn fixed64(out: &mut Vec<u8>, field: u64, v: u64) {
        tag(out, field, 1);
        out.extend_from_slice(&v.to_le_bytes());
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn any(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        let Some((kind, inner)) = v.as_object().and_then(|o| o.iter().next()) else {
            return out;
        };
        match kind.as_str() {
            "stringValue" => bytes(&mut out, 1, inner.as_str().unwrap().as_bytes()),
            "boolValue" => {
                tag(&mut out, 2, 0);
                varint(&mut out, inner.as_bool().unwrap() as u64);
            }
            "intValue" => {
                let n: i64 = match inner {
                    Value::String(s) => s.parse().unwrap(),
                    n => n.as_i64().unwrap(),
                };
                tag(&mut out, 3, 0);
                varint(&mut out, n as u64);
            }
            "doubleValue" => {
                tag(&mut out, 4, 1);
                out.extend_from_slice(&inner.as_f64().unwrap().to_le_bytes());
            }
            "arrayValue" => {
                let mut arr = Vec::new();
                for item in inner["values"].as_array().unwrap() {
                    bytes(&mut arr, 1, &any(item));
                }
                bytes(&mut out, 5, &arr);
            }
            other => panic!("no encoding for {other}"),
        }
        out
    }

    fn kvs(out: &mut Vec<u8>, field: u64, list: Option<&Value>) {
        for kv in list.and_then(Value::as_array).into_iter().flatten() {
            let mut m = Vec::new();
            bytes(&mut m, 1, kv["key"].as_str().unwrap().as_bytes());
            bytes(&mut m, 2, &any(&kv["value"]));
            bytes(out, field, &m);
        }
    }

    fn span(s: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        for (field, key) in [(1, "traceId"), (2, "spanId"), (4, "parentSpanId")] {
            if let Some(id) = s[key].as_str().filter(|id| !id.is_empty()) {
                bytes(&mut out, field, &hex(id));
            }
        }
        bytes(&mut out, 5, s["name"].as_str().unwrap().as_bytes());
        tag(&mut out, 6, 0);
        varint(&mut out, s["kind"].as_u64().unwrap());
        for (field, key) in [(7, "startTimeUnixNano"), (8, "endTimeUnixNano")] {
            fixed64(&mut out, field, s[key].as_str().unwrap().parse().unwrap());
        }
        kvs(&mut out, 9, s.get("attributes"));
        for e in s
            .get("events")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut m = Vec::new();
            fixed64(
                &mut m,
                1,
                e["timeUnixNano"].as_str().unwrap().parse().unwrap(),
            );
            bytes(&mut m, 2, e["name"].as_str().unwrap().as_bytes());
            kvs(&mut m, 3, e.get("attributes"));
            bytes(&mut out, 11, &m);
        }
        if let Some(code) = s["status"].get("code").and_then(Value::as_u64) {
            let mut m = Vec::new();
            tag(&mut m, 3, 0);
            varint(&mut m, code);
            bytes(&mut out, 15, &m);
        }
        out
    }

    /// One `{"resourceSpans": …}` document as a `TracesData` message.
    pub fn traces_data(doc: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        for r in doc["resourceSpans"].as_array().unwrap() {
            let mut rs = Vec::new();
            let mut res = Vec::new();
            kvs(&mut res, 1, r["resource"].get("attributes"));
            bytes(&mut rs, 1, &res);
            for s in r["scopeSpans"].as_array().unwrap() {
                let mut ss = Vec::new();
                let mut scope = Vec::new();
                bytes(
                    &mut scope,
                    1,
                    s["scope"]["name"].as_str().unwrap().as_bytes(),
                );
                bytes(&mut ss, 1, &scope);
                for sp in s["spans"].as_array().unwrap() {
                    bytes(&mut ss, 2, &span(sp));
                }
                bytes(&mut rs, 2, &ss);
            }
            bytes(&mut out, 1, &rs);
        }
        out
    }
}

#[test]
fn otlp_protobuf_converts_to_the_same_trace_as_its_json_twin() {
    let dir = TestDir::new("otel-pb");
    for name in [
        "bifrost.gaia-0-claude-code.traces.jsonl",
        "bifrost.bigcodebench-0-zerostack.traces.jsonl",
    ] {
        let json_run = Cmd::new("trace-convert").arg(fixture(name)).run();
        json_run.code(0);
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        let docs: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // One message (encoded messages concatenated are one message with
        // every resource's spans), and the Collector's framing: each
        // message after its size, 4 bytes big-endian.
        let single: Vec<u8> = docs.iter().flat_map(pb::traces_data).collect();
        let mut framed = Vec::new();
        for d in &docs {
            let m = pb::traces_data(d);
            framed.extend_from_slice(&(m.len() as u32).to_be_bytes());
            framed.extend_from_slice(&m);
        }
        for (file, bytes) in [("single.pb", &single), ("framed.bin", &framed)] {
            let path = dir.write(file, bytes);
            // By content, whatever the name.
            let run = Cmd::new("trace-convert").arg(&path).run();
            run.code(0);
            assert_eq!(run.stdout_str(), json_run.stdout_str(), "{name} as {file}");
            run.stderr_has("recognised as otel input");
            let spans = json_run
                .stderr
                .lines()
                .find(|l| l.contains("spans read"))
                .unwrap();
            let spans = spans.split(".jsonl").nth(1).unwrap();
            assert!(run.stderr.contains(spans), "{spans}\n{}", run.stderr);
        }
    }
}

#[test]
fn bad_otlp_protobuf_names_the_file_and_byte_and_never_panics() {
    let dir = TestDir::new("otel-pb-bad");
    let doc: Value = serde_json::from_str(
        std::fs::read_to_string(fixture("bifrost.bigcodebench-0-zerostack.traces.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let whole = pb::traces_data(&doc);
    let cut = dir.write("cut.pb", &whole[..whole.len() / 2]);
    let run = Cmd::new("trace-convert").arg(&cut).run();
    run.code(2);
    let want = format!(
        "trace-convert: {}:1: error: malformed OTLP protobuf (byte 0): failed to decode Protobuf message: ",
        cut.display()
    );
    run.stderr_has(&want);
    // A frame that claims more bytes than are left.
    let mut framed = (whole.len() as u32 + 10).to_be_bytes().to_vec();
    framed.extend_from_slice(&whole);
    let path = dir.write("framed.pb", &framed);
    let run = Cmd::new("trace-convert").arg(&path).run();
    run.code(2);
    let want = format!(
        "trace-convert: {}:1: error: malformed OTLP protobuf (byte 0): a message of {} bytes, but {} are left\n",
        path.display(),
        whole.len() + 10,
        whole.len()
    );
    run.stderr_has(&want);
}

#[test]
fn collector_file_exports_framed_and_compressed_as_the_fileexporter_writes_them() {
    // opentelemetry-collector-contrib exporter/fileexporter: with `format:
    // proto` each message follows its size, 4 bytes big-endian
    // (file_writer.go, exportMessageAsBuffer); with `compression: zstd`
    // each message, protobuf or JSON, is one zstd frame after its size;
    // with the native compression feature gate the file is one zstd stream
    // (of the same frames for protobuf). Two messages: the two llm.call
    // lines of Bifrost's export (lines 2 and 3), whose JSON twin is those
    // two lines.
    let dir = TestDir::new("otel-collector-files");
    let text = std::fs::read_to_string(fixture("bifrost.gaia-0-claude-code.traces.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().skip(1).take(2).collect();
    let twin = dir.write("twin.jsonl", lines.join("\n") + "\n");
    let want = Cmd::new("trace-convert").arg(&twin).run();
    want.code(0);
    assert_eq!(want.json_lines().len(), 2);
    let framed = |bodies: Vec<Vec<u8>>| -> Vec<u8> {
        let mut out = Vec::new();
        for b in bodies {
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(&b);
        }
        out
    };
    let proto: Vec<Vec<u8>> = lines
        .iter()
        .map(|l| pb::traces_data(&serde_json::from_str(l).unwrap()))
        .collect();
    let zstd = |b: &[u8]| zstd::stream::encode_all(b, 3).unwrap();
    let files = [
        ("proto.bin", framed(proto.clone())),
        (
            "proto-zstd.bin",
            framed(proto.iter().map(|b| zstd(b)).collect()),
        ),
        (
            "json-zstd.bin",
            framed(lines.iter().map(|l| zstd(l.as_bytes())).collect()),
        ),
        ("proto-native.zst", zstd(&framed(proto.clone()))),
    ];
    for (name, bytes) in files {
        let path = dir.write(name, &bytes);
        // Recognised by content.
        let run = Cmd::new("trace-convert").arg(&path).run();
        run.code(0);
        assert_eq!(run.stdout_str(), want.stdout_str(), "{name}");
        assert!(
            run.stderr
                .contains(&format!("{}: recognised as otel input", path.display())),
            "{name}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains(": 2 spans read, 2 model calls\n"),
            "{name}: {}",
            run.stderr
        );
    }
    // A compressed frame that is not zstd inside is named by its offset.
    let mut bad = framed(vec![proto[0].clone()]);
    let second = {
        let mut z = zstd(&proto[1]);
        z.truncate(z.len() - 3);
        z
    };
    let at = bad.len() + 4;
    bad.extend_from_slice(&(second.len() as u32).to_be_bytes());
    bad.extend_from_slice(&second);
    let path = dir.write("cut-zstd.bin", &bad);
    let run = Cmd::new("trace-convert")
        .args(["--from", "otel"])
        .arg(&path)
        .run();
    run.code(2);
    run.stderr_has(&format!(
        "{}:1: error: malformed zstd frame (byte {at}): ",
        path.display()
    ));
}
