//! The one error type of the library, and where a problem was found.
//!
//! Every message names its source (a path as the user gave it, or `<stdin>`),
//! the line, and the field at fault, so a user can go straight to the bad
//! record. `cli::finish` prints `TOOL: ` in front of the `Display` form.

use std::fmt;
use std::io;
use std::sync::Arc;

/// Result with the library's error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where in the input a record sits: `SOURCE:LINE` (1-based physical line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The path as the user gave it, or `<stdin>`.
    pub source: Arc<str>,
    /// Physical line number, counting blank lines too.
    pub line: u64,
    /// Column (1-based), where a JSON parser reported one.
    pub column: Option<u64>,
}

impl Location {
    /// A location without a column.
    pub fn new(source: Arc<str>, line: u64) -> Location {
        Location {
            source,
            line,
            column: None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.source, self.line)?;
        if let Some(col) = self.column {
            write!(f, ":{col}")?;
        }
        Ok(())
    }
}

/// A problem with one field of one record, before it is given a location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's name (`hash_ids`, `observed.ttft_ms`), or empty for a
    /// problem with the record as a whole.
    pub field: String,
    /// What is wrong, lowercase, no final period.
    pub msg: String,
}

impl FieldError {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, msg: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            msg: msg.into(),
        }
    }

    /// A problem with the record as a whole.
    pub fn record(msg: impl Into<String>) -> FieldError {
        FieldError::new("", msg)
    }

    /// Attach the location, making an [`Error`].
    pub fn at(self, loc: &Location) -> Error {
        Error::Record {
            loc: loc.clone(),
            field: self.field,
            msg: self.msg,
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.msg)
        } else {
            write!(f, "field `{}`: {}", self.field, self.msg)
        }
    }
}

/// Everything that can go wrong in a tool.
#[derive(Debug)]
pub enum Error {
    /// Flags that parse but cannot work together, found before any input is read.
    Usage(String),
    /// Opening, reading or writing `path` failed.
    Io {
        /// The path as given, `<stdin>` or `<stdout>`.
        path: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A record that is malformed or breaks the contract.
    Record {
        /// Where it is.
        loc: Location,
        /// The field at fault, or empty.
        field: String,
        /// What is wrong.
        msg: String,
    },
    /// Anything else, already phrased for the user.
    Msg(String),
}

impl Error {
    /// A usage error.
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::Usage(msg.into())
    }

    /// A message for the user.
    pub fn msg(msg: impl Into<String>) -> Error {
        Error::Msg(msg.into())
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// True when the error is a closed pipe on output: the reader went away
    /// (`| head`), which ends a tool quietly with status 0.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::BrokenPipe)
    }
}

impl Error {
    /// Where the problem is, for record errors.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::Record { loc, .. } => Some(loc),
            _ => None,
        }
    }

    /// The message without location and severity: what a warning about the
    /// same problem would say.
    pub fn message(&self) -> String {
        match self {
            Error::Usage(msg) | Error::Msg(msg) => msg.clone(),
            Error::Io { path, source } => format!("{path}: {}", io_message(source)),
            Error::Record { field, msg, .. } if field.is_empty() => msg.clone(),
            Error::Record { field, msg, .. } => format!("field `{field}`: {msg}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location() {
            Some(loc) => write!(f, "{loc}: error: {}", self.message()),
            None => write!(f, "error: {}", self.message()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An I/O error's message without Rust's "(os error N)" suffix, lowercased
/// at the start to fit `error: path: message`.
pub fn io_message(err: &io::Error) -> String {
    let text = err.to_string();
    let text = match text.find(" (os error") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => text.to_string(),
    }
}

/// Quote a raw JSON value for a message, cut to a readable length.
pub fn quote_value(raw: &str) -> String {
    const MAX: usize = 40;
    let raw = raw.trim();
    if raw.chars().count() <= MAX {
        raw.to_string()
    } else {
        let cut: String = raw.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_error_names_source_line_and_field() {
        let loc = Location::new("t.jsonl".into(), 17);
        let err = FieldError::new("input_length", "expected an integer, found \"12k\"").at(&loc);
        assert_eq!(
            err.to_string(),
            "t.jsonl:17: error: field `input_length`: expected an integer, found \"12k\""
        );
    }

    #[test]
    fn io_message_drops_os_error_suffix() {
        let err = io::Error::from_raw_os_error(2);
        assert_eq!(io_message(&err), "no such file or directory");
    }

    #[test]
    fn quote_value_cuts_long_values() {
        assert_eq!(quote_value("\"ab\""), "\"ab\"");
        let long = "x".repeat(50);
        assert_eq!(quote_value(&long).chars().count(), 41);
    }
}
