//! Traces as users bring them: converter outputs checked by trace-validate,
//! whose advice must rest on evidence.

use crate::util::{Cmd, data};

#[test]
fn burstgpt_absolute_output_draws_no_unit_advice() {
    // 20 days into BurstGPT: 1728000000 ms looks like epoch seconds by
    // magnitude alone, but every gap is whole seconds: already milliseconds.
    let run = Cmd::new("trace-convert")
        .arg("--absolute")
        .arg(data("convert/BurstGPT_day20.constructed.csv"))
        .run();
    run.code(0);
    assert_eq!(
        run.lines()[..2],
        [
            r#"{"timestamp":1728000000,"input_length":472,"output_length":18}"#,
            r#"{"timestamp":1728000000,"input_length":90,"output_length":12}"#,
        ]
    );
    let check = Cmd::new("trace-validate")
        .args(["--check", "--strict"])
        .stdin(run.stdout.clone())
        .run();
    check.ok();
}

#[test]
fn langfuse_latency_unit_follows_the_observation_times() {
    // pydantic-ai's UI download gives latency and timeToFirstToken in ms:
    // gen-1 ran 1.707 s (latency 1707), gen-2 912 ms with its first
    // token at 240 ms; gen-3's latency 5 fits its 1.2 s neither way.
    // Sessions come from trace.sessionId: the observations carry none.
    let run = Cmd::new("trace-convert")
        .arg(data(
            "convert/ui_trace_download.pydantic-ai.constructed.json",
        ))
        .run();
    run.code(0);
    assert_eq!(
        run.lines(),
        [
            r#"{"timestamp":0,"input_length":120,"output_length":30,"session_id":"chat-42","model":"gpt-4o","id":"gen-1","observed":{"prompt_tokens":120,"completion_tokens":30,"e2e_ms":1707,"status":"ok"}}"#,
            r#"{"timestamp":2000,"input_length":180,"output_length":12,"session_id":"chat-42","delay":293,"model":"gpt-4o","id":"gen-2","observed":{"prompt_tokens":180,"completion_tokens":12,"ttft_ms":240,"e2e_ms":912,"status":"ok"}}"#,
            r#"{"timestamp":3000,"input_length":200,"output_length":8,"session_id":"chat-42","delay":88,"model":"gpt-4o","id":"gen-3","observed":{"prompt_tokens":200,"completion_tokens":8,"e2e_ms":5000,"status":"ok"}}"#,
        ]
    );
    let file = data("convert/ui_trace_download.pydantic-ai.constructed.json");
    assert!(
        run.stderr.contains(&format!(
            "trace-convert: {}:1: warning: field `latency`: 5 agrees with the observation's times \
             (1200 ms from startTime to endTime) neither as seconds nor as milliseconds; taken as seconds\n",
            file.display()
        )),
        "{}",
        run.stderr
    );
}
