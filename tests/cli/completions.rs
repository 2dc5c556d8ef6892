//! The shell completions that `scripts/install-extras.sh` installs (written
//! by `examples/completions.rs`, included here) name every flag of every
//! tool, for each shell.

use clap_complete::Shell;

use crate::util::TestDir;

#[path = "../../examples/completions.rs"]
mod generator;

/// `flag` (`--speed`, `-l speed`) occurs as a whole word in `text`.
fn mentions(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(at, _)| {
        let next = text[at + flag.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

#[test]
fn completions_name_every_flag_of_every_tool_for_each_shell() {
    let dir = TestDir::new("completions");
    let files = generator::write_all(&dir.path).unwrap();
    // Every binary of src/bin, for each of the three shells.
    let bins = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src/bin"))
        .unwrap()
        .count();
    assert_eq!(generator::tools().len(), bins);
    assert_eq!(files.len(), 3 * bins);
    for (tool, cmd) in generator::tools() {
        let longs: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
        assert!(longs.len() > 3, "{tool}");
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let file = generator::file_for(&dir.path, shell, tool);
            let text = std::fs::read_to_string(&file).unwrap();
            for long in &longs {
                let flag = match shell {
                    Shell::Fish => format!("-l {long}"),
                    _ => format!("--{long}"),
                };
                assert!(mentions(&text, &flag), "{} lacks {flag}", file.display());
            }
        }
    }
    // Where each shell looks, under the share directory given.
    let names: Vec<String> = files
        .iter()
        .filter(|f| f.to_string_lossy().contains("trace-replay"))
        .map(|f| f.strip_prefix(&dir.path).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "bash-completion/completions/trace-replay",
            "zsh/site-functions/_trace-replay",
            "fish/vendor_completions.d/trace-replay.fish"
        ]
    );
}
