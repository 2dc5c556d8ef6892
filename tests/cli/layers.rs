//! The crate's floors (see `src/lib.rs`): no tool imports another, and
//! nothing below the tools imports a tool.

use std::path::{Path, PathBuf};

const TOOLS: [&str; 10] = [
    "convert",
    "validate",
    "slice",
    "rescale",
    "synth",
    "replay",
    "summarize",
    "sim",
    "sweep",
    "generate",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The tool a source file belongs to: `src/summarize/…` and `src/replay.rs`
/// are replay's; the floors' files and the binaries belong to none.
fn owner(src: &Path, file: &Path) -> Option<&'static str> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    TOOLS.iter().copied().find(|t| *t == name)
}

#[test]
fn no_tool_imports_another_and_floors_import_no_tool() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in &files {
        if file.starts_with(src.join("bin")) {
            continue;
        }
        let me = owner(&src, file);
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for tool in TOOLS {
                if Some(tool) == me {
                    continue;
                }
                let named = [format!("crate::{tool}::"), format!("crate::{tool}}}")]
                    .iter()
                    .any(|p| code.contains(p.as_str()))
                    || code.contains(&format!("crate::{{{tool}"))
                    || code
                        .trim_start()
                        .starts_with(&format!("use crate::{tool};"));
                if named {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "modules that reach into a tool they are not part of:\n{}",
        found.join("\n")
    );
}
