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
