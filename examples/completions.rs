//! Shell completions of every tracekit tool, from clap's generator:
//! `cargo run --example completions -- SHARE` writes them for bash, zsh and
//! fish under SHARE (`~/.local/share`, say) where each shell looks for
//! them. `scripts/install-extras.sh` runs it and installs the man pages.
//!
//! An example rather than a flag of each tool: the tools' `--help` stays
//! about their work, and clap_complete stays out of the release binaries.

use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// Every binary with its flags.
pub fn tools() -> Vec<(&'static str, clap::Command)> {
    tracekit::commands()
}

/// Where each shell looks for a command's completions under SHARE.
pub fn file_for(share: &Path, shell: Shell, tool: &str) -> PathBuf {
    match shell {
        Shell::Zsh => share.join("zsh/site-functions").join(format!("_{tool}")),
        Shell::Fish => share
            .join("fish/vendor_completions.d")
            .join(format!("{tool}.fish")),
        _ => share.join("bash-completion/completions").join(tool),
    }
}

/// The completion script of one tool for one shell.
pub fn script(shell: Shell, tool: &str, cmd: &mut clap::Command) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, cmd, tool, &mut out);
    out
}

/// Write every tool's completions for bash, zsh and fish under `share`.
pub fn write_all(share: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        for (tool, mut cmd) in tools() {
            let file = file_for(share, shell, tool);
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&file, script(shell, tool, &mut cmd))?;
            written.push(file);
        }
    }
    Ok(written)
}

// The tests include this file for its functions; `main` is the example's.
#[allow(dead_code)]
fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(share), None) = (args.next(), args.next()) else {
        eprintln!("usage: cargo run --example completions -- SHARE_DIR");
        std::process::exit(2);
    };
    match write_all(Path::new(&share)) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
        }
        Err(e) => {
            eprintln!(
                "completions: cannot write under {}: {e}",
                Path::new(&share).display()
            );
            std::process::exit(2);
        }
    }
}
