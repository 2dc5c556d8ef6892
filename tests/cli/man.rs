//! Every flag of `--help` is documented in `man/<tool>.1`, and every flag
//! the page documents exists.

use std::collections::BTreeSet;
use std::path::Path;

fn tools() -> Vec<(&'static str, clap::Command)> {
    tracekit::commands()
}

fn help_flags(cmd: &clap::Command) -> BTreeSet<String> {
    let mut flags: BTreeSet<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    flags.insert("--help".into());
    flags.insert("--version".into());
    flags
}

/// `\-\-flag` entries of the page's OPTIONS section (`.TP` then `.B \-\-flag`).
fn page_flags(page: &str) -> BTreeSet<String> {
    let options = page
        .split(".SH OPTIONS")
        .nth(1)
        .expect("the page has an OPTIONS section");
    let options = options.split("\n.SH ").next().unwrap();
    let mut flags = BTreeSet::new();
    let mut lines = options.lines();
    while let Some(line) = lines.next() {
        if line.trim() == ".TP" {
            let term = lines.next().unwrap_or_default().replace("\\-", "-");
            for word in term.split([' ', ',', '"', '=']) {
                if let Some(flag) = word.strip_prefix("--") {
                    let name: String = flag
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect();
                    flags.insert(format!("--{name}"));
                }
            }
        }
    }
    flags
}

#[test]
fn man_pages_match_help() {
    for (tool, mut cmd) in tools() {
        cmd.build();
        cmd.clone().debug_assert();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("man/{tool}.1"));
        let page =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let help = help_flags(&cmd);
        let documented = page_flags(&page);
        let missing: Vec<_> = help.difference(&documented).collect();
        let extra: Vec<_> = documented.difference(&help).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{tool}: flags in --help but not in the man page: {missing:?}; in the page but not in --help: {extra:?}"
        );
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "EXIT STATUS",
            "EXAMPLES",
        ] {
            assert!(
                page.contains(&format!(".SH {section}")),
                "{tool}: no {section} section"
            );
        }
    }
}
