use super::*;
use clap::Parser;

/// What reading `text` line by line leaves: each line's outcome, the
/// calls held and the tally; by [`otlp`] where it takes a line (and
/// how many it took), else by the generic reader.
fn read_lines(text: &str, fast: bool) -> (String, usize) {
    let args = super::super::Args::parse_from(["trace-convert"]);
    let mut ctx = Ctx::new(&args);
    let mut st = State::default();
    let mut out = String::new();
    let mut taken = 0;
    for (i, line) in text.lines().enumerate() {
        let loc = Location::new(Arc::from("t.jsonl"), i as u64 + 1);
        let result = match fast {
            true => fast_document(&mut ctx, &mut st, &loc, line),
            false => Ok(false),
        };
        let result = match result {
            Ok(true) => {
                taken += 1;
                Ok(())
            }
            Ok(false) => match serde_json::from_str::<Value>(line) {
                Ok(doc) => document(&mut ctx, &mut st, &loc, doc),
                Err(e) => Err(malformed(&loc, &e)),
            },
            // A span's error: the line was the OTLP reader's.
            Err(e) => {
                taken += 1;
                Err(e)
            }
        };
        out.push_str(&format!(
            "{}: {:?}\n",
            i + 1,
            result.map_err(|e| e.to_string())
        ));
    }
    for c in st.calls.into_iter().flatten() {
        let keys = format!("{} {} {}", c.span, c.parent, c.dup_key);
        out.push_str(&format!(
            "{:?} {keys}\n",
            c.request(&Arc::from("t.jsonl"), &st.texts)
        ));
    }
    let t = &st.tally;
    out.push_str(&format!(
        "{} {} {} {:?} {:?}",
        t.spans,
        t.calls,
        t.no_output,
        st.parents.len(),
        st.first_no_output
            .as_ref()
            .map(|(l, id, n)| (l.line, id, n))
    ));
    (out, taken)
}

#[track_caller]
fn same(text: &str, fast_lines: usize) {
    let (generic, _) = read_lines(text, false);
    let (fast, taken) = read_lines(text, true);
    assert_eq!(fast, generic);
    assert_eq!(taken, fast_lines, "lines the OTLP reader took");
}

#[test]
fn the_otlp_reader_reads_the_fixtures_as_the_generic_reader() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/convert/otel/");
    for (name, lines) in [
        ("bifrost.gaia-0-claude-code.traces.jsonl", 8),
        ("bifrost.bigcodebench-0-zerostack.traces.jsonl", 1),
        (
            "litellm-migrated.naturalquestions-2165-aider.traces.jsonl",
            5,
        ),
    ] {
        let text = std::fs::read_to_string(format!("{dir}{name}")).unwrap();
        same(&text, lines);
    }
}

/// A span line in the Collector's form with these attributes and
/// span-level fields (JSON text after the attributes).
fn line(attrs: &str, more: &str) -> String {
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[]}},"scopeSpans":[{{"scope":{{"name":"s"}},"spans":[{{"traceId":"t1","spanId":"s1","parentSpanId":"p1","name":"chat","kind":3,"startTimeUnixNano":"1781627099248209120","endTimeUnixNano":"1781627100248209120","attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"chat"}}}}{attrs}]{more}}}]}}]}}]}}"#
    )
}

#[test]
fn the_otlp_reader_agrees_on_every_value_kind_and_leaves_odd_shapes_alone() {
    let usage = r#",{"key":"gen_ai.usage.input_tokens","value":{"intValue":"12"}},{"key":"gen_ai.usage.output_tokens","value":{"intValue":7}}"#;
    let taken = [
        line(usage, ""),
        // Doubles, arrays, maps, booleans, bytes, unset and missing
        // values; attributes no rule reads.
        line(
            &format!(
                r#"{usage},{{"key":"gen_ai.request.temperature","value":{{"doubleValue":0.5}}}},{{"key":"gen_ai.response.time_to_first_chunk","value":{{"doubleValue":"0.25"}}}},{{"key":"gen_ai.response.finish_reasons","value":{{"arrayValue":{{"values":[{{"stringValue":"stop"}}]}}}}}},{{"key":"m","value":{{"kvlistValue":{{"values":[{{"key":"a","value":{{"intValue":"1"}}}}]}}}}}},{{"key":"error","value":{{"boolValue":false}}}},{{"key":"b","value":{{"bytesValue":"AQI="}}}},{{"key":"u","value":{{}}}},{{"key":"n"}},{{"key":"session.id","value":{{"stringValue":"s\u00e9"}}}}"#
            ),
            r#","status":{"code":"STATUS_CODE_ERROR"},"events":[{"name":"first_token","timeUnixNano":"1781627099348209120"}],"links":[],"flags":1"#,
        ),
        // A bad value, an unknown type and a bad integer: the same
        // error, from the attribute at fault.
        line(
            &format!(r#"{usage},{{"key":"x","value":{{"intValue":"1.5"}}}}"#),
            "",
        ),
        line(
            &format!(r#"{usage},{{"key":"x","value":{{"fooValue":1}}}}"#),
            "",
        ),
        line(&format!(r#"{usage},{{"key":"x","value":"plain"}}"#), ""),
        line(
            r#",{"key":"gen_ai.usage.input_tokens","value":{"stringValue":"twelve"}}"#,
            "",
        ),
        // A first kind repeated: the generic reader keeps the last.
        line(
            r#",{"key":"gen_ai.usage.output_tokens","value":{"intValue":"3","intValue":"4"}}"#,
            "",
        ),
        // Unset ids and times.
        line(usage, r#","traceId":"","spanId":null"#)
            .replace(r#""traceId":"t1","spanId":"s1","#, ""),
    ];
    let odd = [
        // Keys the generic reader looks at, repeated keys, ids as
        // numbers, attributes as an object, null resourceSpans, a list.
        line(usage, r#","tags":[]"#),
        line(usage, r#","spanId":"again""#),
        line(usage, "").replace(r#""traceId":"t1""#, r#""traceId":7"#),
        line("", "").replace(
            r#""attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}]"#,
            r#""attributes":{"gen_ai.operation.name":"chat"}"#,
        ),
        r#"{"resourceSpans":null}"#.to_string(),
        format!("[{}]", line(usage, "")),
        // A number no f64 holds, in a field no rule reads.
        line(usage, r#","droppedEventsCount":1e400"#),
    ];
    let text = taken.join("\n") + "\n" + &odd.join("\n");
    same(&text, taken.len());
}
