//! Golden cases: `tests/golden/<tool>/<case>/` holds `cmd` (the tool, then
//! one argument per line), optional `stdin` and input files, and `expected`:
//! the exit status, stdout and stderr the command must produce, run from the
//! case directory. `UPDATE_GOLDEN=1 cargo test golden` rewrites `expected`
//! (review the diff: the expected text is the specification).

use std::path::Path;

use crate::util::Cmd;

fn render(code: i32, stdout: &[u8], stderr: &str) -> String {
    format!(
        "exit_code: {code}\n----- stdout -----\n{}----- stderr -----\n{stderr}",
        String::from_utf8_lossy(stdout)
    )
}

#[test]
fn golden_cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .flat_map(|tool| std::fs::read_dir(tool.unwrap().path()).unwrap())
        .map(|case| case.unwrap().path())
        .collect();
    cases.sort();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for case in &cases {
        let cmd_text = std::fs::read_to_string(case.join("cmd"))
            .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        let mut words = cmd_text.lines().filter(|l| !l.is_empty());
        let tool = words.next().expect("cmd names the tool");
        let mut cmd = Cmd::new(tool).current_dir(case).args(words);
        if let Ok(stdin) = std::fs::read(case.join("stdin")) {
            cmd = cmd.stdin(stdin);
        }
        let run = cmd.run();
        let got = render(run.code, &run.stdout, &run.stderr);
        let expected_path = case.join("expected");
        if update {
            std::fs::write(&expected_path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if want != got {
            failures.push(format!(
                "{}\n==== want ====\n{want}==== got =====\n{got}",
                case.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden case(s) differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
