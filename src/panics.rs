//! Panics caught where a tool runs code that may panic (a bug of ours, or
//! a library that asserts on bad input), so that they are told in one line
//! instead of as a panic message and a backtrace.
//!
//! One process-wide hook serves every catch site: it keeps quiet on the
//! threads that said they catch their panics ([`caught_here`]) and keeps
//! what it saw for the catch site to report; every other thread gets the
//! hook that was there before.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::sync::Once;

thread_local! {
    /// This thread's panics are caught and reported where they are caught.
    static CAUGHT: Cell<bool> = const { Cell::new(false) };
    /// Where and why this thread last panicked, as the hook saw it.
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Install the hook, once per process.
pub fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CAUGHT.with(Cell::get) {
                return before(info);
            }
            let msg = payload_text(info.payload());
            let text = match info.location() {
                Some(at) => format!("internal error at {}:{}: {msg}", at.file(), at.line()),
                None => format!("internal error: {msg}"),
            };
            LAST.with(|l| *l.borrow_mut() = Some(text));
        }));
    });
}

/// Mark this thread's panics as caught and reported by the caller, until
/// the guard is dropped.
pub fn caught_here() -> CaughtHere {
    let before = CAUGHT.with(|c| c.replace(true));
    CaughtHere { before }
}

/// See [`caught_here`].
pub struct CaughtHere {
    before: bool,
}

impl Drop for CaughtHere {
    fn drop(&mut self) {
        CAUGHT.with(|c| c.set(self.before));
    }
}

/// A caught panic of ours: `internal error at FILE:LINE: message` (the
/// location when the hook saw it on this thread).
pub fn describe(payload: &(dyn Any + Send)) -> String {
    let seen = LAST.with(|l| l.borrow_mut().take());
    seen.unwrap_or_else(|| format!("internal error: {}", payload_text(payload)))
}

/// `f`'s value, or the message of its panic, with the panic kept quiet:
/// for a library that asserts on a damaged input where it should return
/// an error (the message is the library's, not where in it it stopped).
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let _caught = caught_here();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    LAST.with(|l| l.borrow_mut().take());
    result.map_err(|panic| payload_text(&*panic))
}

fn payload_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catch_gives_the_message_and_leaves_the_thread_as_it_was() {
        assert_eq!(catch(|| 7), Ok(7));
        assert_eq!(
            catch(|| -> u8 { panic!("bad footer") }),
            Err("bad footer".into())
        );
        let n = 3;
        assert_eq!(
            catch(|| -> u8 { panic!("column {n}") }),
            Err("column 3".into())
        );
        assert!(!CAUGHT.with(Cell::get));
        assert!(LAST.with(|l| l.borrow().is_none()));
    }
}
