//! `-o FILE`, written under a temporary name beside it and renamed to
//! FILE once complete: a conversion that is stopped (a signal, an error)
//! leaves no empty or partial FILE, and an earlier FILE stays as it was.
//! The temporary file is removed on an error, and on SIGINT, SIGTERM or
//! SIGHUP (where their action is the default one, which then follows).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::io::Output;

/// Where the output goes, and what is left to do at the end.
pub struct Destination {
    /// (temporary name, FILE) while the temporary file is being written.
    rename: Option<(PathBuf, PathBuf)>,
}

/// Open the output: standard output, FILE itself where it is not a
/// regular file (a pipe, `/dev/null`), else a temporary file beside it.
pub fn open(path: Option<&Path>) -> Result<(Output, Destination)> {
    let Some(path) = path.filter(|p| p.as_os_str() != "-") else {
        return Ok((Output::open(path)?, Destination { rename: None }));
    };
    let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file());
    if special {
        return Ok((Output::open(Some(path))?, Destination { rename: None }));
    }
    let tmp = temporary(path);
    remove_on_signals(&tmp);
    let out = Output::open(Some(&tmp))?;
    Ok((
        out,
        Destination {
            rename: Some((tmp, path.to_path_buf())),
        },
    ))
}

/// `DIR/.partial-PID.NAME`: hidden, beside FILE (a rename does not cross
/// file systems), and ending as FILE does, so that its compression is
/// FILE's.
fn temporary(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".partial-{}.{name}", std::process::id()))
}

/// The temporary file's path, for the signal handler.
static PARTIAL: OnceLock<CString> = OnceLock::new();

/// Remove the temporary file, then die of the signal as before.
extern "C" fn remove_partial(sig: libc::c_int) {
    // SAFETY: unlink, signal and raise are async-signal-safe; the path was
    // set before the handler was installed and is never changed.
    unsafe {
        if let Some(p) = PARTIAL.get() {
            libc::unlink(p.as_ptr());
        }
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Remove `tmp` if a signal ends the process (before it is made, so that
/// no signal finds it made and not yet covered).
fn remove_on_signals(tmp: &Path) {
    let Ok(path) = CString::new(tmp.as_os_str().as_bytes()) else {
        return;
    };
    if PARTIAL.set(path).is_err() {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: sigaction reads the current action into a zeroed struct;
        // signal installs a handler that only makes async-signal-safe calls.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            // A signal the caller ignores (nohup) stays ignored.
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_DFL
            {
                libc::signal(sig, remove_partial as *const () as libc::sighandler_t);
            }
        }
    }
}

impl Destination {
    /// The output is complete: give it its name.
    pub fn finish(mut self) -> Result<()> {
        if let Some((tmp, path)) = self.rename.take() {
            if let Err(e) = std::fs::rename(&tmp, &path) {
                let _ = std::fs::remove_file(&tmp);
                return Err(Error::io(path.display().to_string(), e));
            }
        }
        Ok(())
    }
}

impl Drop for Destination {
    /// Not finished (an error): the partial output goes.
    fn drop(&mut self) {
        if let Some((tmp, _)) = self.rename.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporary_name_is_hidden_beside_the_file_with_its_ending() {
        let pid = std::process::id();
        assert_eq!(
            temporary(Path::new("out/t.jsonl.gz")),
            PathBuf::from(format!("out/.partial-{pid}.t.jsonl.gz"))
        );
        assert_eq!(
            temporary(Path::new("t.jsonl")),
            PathBuf::from(format!(".partial-{pid}.t.jsonl"))
        );
    }
}
