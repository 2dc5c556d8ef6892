//! Reading inputs and writing outputs the same way in every tool.
//!
//! Inputs are paths or `-` (standard input); gzip, zstd and xz are
//! recognised by their magic bytes, so a compressed file named `trace.jsonl`
//! or a compressed stream on stdin both work, and concatenated members
//! (frames, streams) are read to the end. Lines are
//! counted physically (blank lines too), so `FILE:LINE` in a message is the
//! line an editor shows.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;

use crate::error::{Error, Location, Result};

/// Display name of standard input in messages.
pub const STDIN_NAME: &str = "<stdin>";
/// Display name of standard output in messages.
pub const STDOUT_NAME: &str = "<stdout>";

const READ_BUFFER: usize = 256 * 1024;
const WRITE_BUFFER: usize = 128 * 1024;

/// One input as the user named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputSpec {
    /// Standard input (`-` or no file argument).
    Stdin,
    /// A file path.
    Path(PathBuf),
}

impl InputSpec {
    /// The name used in messages: the path as given, or `<stdin>`.
    pub fn display_name(&self) -> Arc<str> {
        match self {
            InputSpec::Stdin => STDIN_NAME.into(),
            InputSpec::Path(p) => p.to_string_lossy().into(),
        }
    }
}

/// Turn file arguments into inputs: none means stdin; `-` is stdin and may
/// appear once (it cannot be read twice).
pub fn input_specs(files: &[String]) -> Result<Vec<InputSpec>> {
    if files.is_empty() {
        return Ok(vec![InputSpec::Stdin]);
    }
    let stdin_count = files.iter().filter(|f| f.as_str() == "-").count();
    if stdin_count > 1 {
        return Err(Error::usage("standard input (`-`) can be given only once"));
    }
    Ok(files
        .iter()
        .map(|f| {
            if f == "-" {
                InputSpec::Stdin
            } else {
                InputSpec::Path(PathBuf::from(f))
            }
        })
        .collect())
}

/// Open an input for reading, decompressing gzip when the content is gzip.
pub fn open_input(spec: &InputSpec) -> Result<Box<dyn BufRead + Send>> {
    let name = spec.display_name();
    let raw: Box<dyn Read + Send> = match spec {
        InputSpec::Stdin => Box::new(io::stdin()),
        InputSpec::Path(path) => {
            let file = File::open(path).map_err(|e| Error::io(&*name, e))?;
            if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
                return Err(Error::msg(format!(
                    "{name}: is a directory, not a file of records"
                )));
            }
            Box::new(file)
        }
    };
    let mut reader = BufReader::with_capacity(READ_BUFFER, raw);
    let head = reader.fill_buf().map_err(|e| Error::io(&*name, e))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(BufReader::with_capacity(
            READ_BUFFER,
            MultiGzDecoder::new(reader),
        )))
    } else if head.starts_with(&ZSTD_MAGIC) {
        // Reads every frame, as `zstd -d` does.
        let decoder =
            zstd::stream::read::Decoder::with_buffer(reader).map_err(|e| Error::io(&*name, e))?;
        Ok(Box::new(BufReader::with_capacity(READ_BUFFER, decoder)))
    } else if head.starts_with(&XZ_MAGIC) {
        Ok(Box::new(BufReader::with_capacity(
            READ_BUFFER,
            liblzma::bufread::XzDecoder::new_multi_decoder(reader),
        )))
    } else {
        Ok(Box::new(reader))
    }
}

/// The first bytes of a zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The first bytes of an xz stream.
const XZ_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0x00];

/// Reads non-blank lines, counting physical lines, reusing one buffer.
pub struct LineReader {
    reader: Box<dyn BufRead + Send>,
    source: Arc<str>,
    buf: Vec<u8>,
    line: u64,
    /// The decompressor failed: a compressed stream does not resume after
    /// corrupt data (liblzma answers every later read with an internal
    /// error), so the input ends there.
    broken: bool,
}

impl LineReader {
    /// Open `spec` and read it line by line.
    pub fn open(spec: &InputSpec) -> Result<LineReader> {
        Ok(LineReader::new(open_input(spec)?, spec.display_name()))
    }

    /// Read lines from any reader, naming it `source` in messages.
    pub fn new(reader: Box<dyn BufRead + Send>, source: Arc<str>) -> LineReader {
        LineReader {
            reader,
            source,
            buf: Vec::with_capacity(4096),
            line: 0,
            broken: false,
        }
    }

    /// The name of the input, as messages show it.
    pub fn source(&self) -> &Arc<str> {
        &self.source
    }

    /// The location of the line last returned.
    pub fn location(&self) -> Location {
        Location::new(self.source.clone(), self.line)
    }

    /// The line last returned by [`LineReader::next_line`] (for readers
    /// that cannot return its borrow from a loop).
    pub fn last_line(&self) -> &str {
        std::str::from_utf8(&self.buf[..trimmed_len(&self.buf)]).unwrap_or_default()
    }

    /// The next non-blank line without its line ending, with its 1-based
    /// line number; `None` at the end.
    pub fn next_line(&mut self) -> Result<Option<(u64, &str)>> {
        let end = loop {
            self.buf.clear();
            if self.broken {
                return Ok(None);
            }
            let n = self.reader.read_until(b'\n', &mut self.buf).map_err(|e| {
                let err = read_error(&self.source, self.line + 1, e);
                self.broken = matches!(err, Error::Record { .. });
                err
            })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            let end = trimmed_len(&self.buf);
            if !self.buf[..end].iter().all(u8::is_ascii_whitespace) {
                break end;
            }
        };
        match std::str::from_utf8(&self.buf[..end]) {
            Ok(text) => Ok(Some((self.line, text))),
            Err(e) => Err(Error::Record {
                loc: Location {
                    source: self.source.clone(),
                    line: self.line,
                    column: Some(e.valid_up_to() as u64 + 1),
                },
                field: String::new(),
                msg: "line is not valid UTF-8".into(),
            }),
        }
    }
}

fn read_error(source: &Arc<str>, line: u64, err: io::Error) -> Error {
    if err.kind() == io::ErrorKind::InvalidInput || err.kind() == io::ErrorKind::InvalidData {
        // flate2 reports a corrupt or truncated gzip stream this way.
        Error::Record {
            loc: Location::new(source.clone(), line),
            field: String::new(),
            msg: format!("cannot decompress: {}", crate::error::io_message(&err)),
        }
    } else {
        Error::io(&**source, err)
    }
}

/// Reads the non-blank lines of several inputs in turn, opening each when
/// the previous one is exhausted.
pub struct Lines {
    specs: std::vec::IntoIter<(InputSpec, Arc<str>)>,
    current: Option<LineReader>,
}

impl Lines {
    /// Lines of `specs`, in order.
    pub fn new(specs: &[InputSpec]) -> Lines {
        let named = specs
            .iter()
            .map(|s| (s.clone(), s.display_name()))
            .collect();
        Lines::named(named)
    }

    fn named(specs: Vec<(InputSpec, Arc<str>)>) -> Lines {
        Lines {
            specs: specs.into_iter(),
            current: None,
        }
    }

    /// The next non-blank line and where it is; `None` after the last input.
    pub fn next_line(&mut self) -> Result<Option<(Location, &str)>> {
        loop {
            if self.current.is_none() {
                match self.specs.next() {
                    None => return Ok(None),
                    Some((spec, name)) => {
                        self.current = Some(LineReader::new(open_input(&spec)?, name));
                    }
                }
            }
            let reader = self.current.as_mut().expect("opened above");
            // Polonius would accept returning the borrow directly; until then,
            // ask for the line number first and re-borrow for the text.
            if reader.next_line()?.is_some() {
                let reader = self.current.as_ref().expect("opened above");
                let loc = reader.location();
                let end = trimmed_len(&reader.buf);
                let text = std::str::from_utf8(&reader.buf[..end]).expect("checked by next_line");
                return Ok(Some((loc, text)));
            }
            self.current = None;
        }
    }
}

fn trimmed_len(buf: &[u8]) -> usize {
    let mut end = buf.len();
    while end > 0 && matches!(buf[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    end
}

/// Calls `f` with every non-blank line of every input, in order.
pub fn for_each_line(
    inputs: &[InputSpec],
    mut f: impl FnMut(&Location, &str) -> Result<()>,
) -> Result<()> {
    let mut lines = Lines::new(inputs);
    while let Some((loc, text)) = lines.next_line()? {
        f(&loc, text)?;
    }
    Ok(())
}

/// Inputs that can be read more than once: files as they are, standard
/// input copied to a temporary file first. Tools that need two passes (a
/// target rate needs the trace's span before the first record is written)
/// use this instead of holding records in memory.
pub struct Rereadable {
    specs: Vec<(InputSpec, Arc<str>)>,
    _spool: Option<tempfile::NamedTempFile>,
}

impl Rereadable {
    /// Spool standard input, if it is among `specs`, to a temporary file.
    pub fn new(specs: &[InputSpec]) -> Result<Rereadable> {
        let mut spool = None;
        let mut out = Vec::with_capacity(specs.len());
        for spec in specs {
            let name = spec.display_name();
            match spec {
                InputSpec::Stdin => {
                    let mut tmp = tempfile::NamedTempFile::new()
                        .map_err(|e| Error::io("temporary file", e))?;
                    io::copy(&mut io::stdin().lock(), tmp.as_file_mut())
                        .map_err(|e| Error::io(STDIN_NAME, e))?;
                    out.push((InputSpec::Path(tmp.path().to_path_buf()), name));
                    spool = Some(tmp);
                }
                InputSpec::Path(_) => out.push((spec.clone(), name)),
            }
        }
        Ok(Rereadable {
            specs: out,
            _spool: spool,
        })
    }

    /// A fresh pass over every line, naming the inputs as the user did.
    pub fn lines(&self) -> Lines {
        Lines::named(self.specs.clone())
    }
}

enum Sink {
    Stdout(BufWriter<io::Stdout>),
    File(BufWriter<File>),
    Gzip(GzEncoder<BufWriter<File>>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
}

#[cfg(unix)]
fn stdout_is_file() -> bool {
    use std::os::fd::AsFd;
    io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| File::from(fd).metadata())
        .is_ok_and(|m| m.is_file())
}

#[cfg(not(unix))]
fn stdout_is_file() -> bool {
    false
}

/// Raise this process's soft limit on open files to its hard limit and
/// return the limit in force. Every connection in flight holds a file, and
/// shells often start programs with a soft limit of 1,024 while the system
/// allows far more; a replay should be capped by the server, not by that.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
pub fn raise_open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Some(raised.rlim_cur as u64);
        }
    }
    Some(limit.rlim_cur as u64)
}

#[cfg(not(unix))]
pub fn raise_open_files_limit() -> Option<u64> {
    None
}

/// Where records go: standard output or `-o FILE` (`.gz` compresses with
/// gzip, `.zst` with zstd).
///
/// Writes are buffered; on a terminal, or when asked, every line is flushed
/// as it is written. `finish` must be called: it flushes and completes the
/// gzip trailer, and reports errors a dropped writer would swallow.
pub struct Output {
    sink: Sink,
    name: String,
    line_flush: bool,
}

impl Output {
    /// Open `path`, or standard output when `None` or `-`.
    pub fn open(path: Option<&Path>) -> Result<Output> {
        match path {
            None => Ok(Output::stdout()),
            Some(p) if p.as_os_str() == "-" => Ok(Output::stdout()),
            Some(p) => {
                let name = p.to_string_lossy().into_owned();
                let file = File::create(p).map_err(|e| Error::io(&name, e))?;
                let buffered = BufWriter::with_capacity(WRITE_BUFFER, file);
                let sink = if name.ends_with(".gz") {
                    Sink::Gzip(GzEncoder::new(buffered, Compression::default()))
                } else if name.ends_with(".zst") {
                    let encoder = zstd::stream::write::Encoder::new(buffered, 0)
                        .map_err(|e| Error::io(&name, e))?;
                    Sink::Zstd(encoder)
                } else {
                    Sink::File(buffered)
                };
                Ok(Output {
                    sink,
                    name,
                    line_flush: false,
                })
            }
        }
    }

    fn stdout() -> Output {
        let stdout = io::stdout();
        let line_flush = stdout.is_terminal();
        Output {
            sink: Sink::Stdout(BufWriter::with_capacity(WRITE_BUFFER, stdout)),
            name: STDOUT_NAME.to_string(),
            line_flush,
        }
    }

    /// Flush after every line (results of a replay must survive a crash).
    /// Whether lines go to a regular file (directly or compressed), where
    /// a write never waits for a reader, unlike a pipe or a terminal.
    pub fn is_file(&self) -> bool {
        match &self.sink {
            Sink::File(_) | Sink::Gzip(_) | Sink::Zstd(_) => true,
            Sink::Stdout(_) => stdout_is_file(),
        }
    }

    pub fn set_line_flush(&mut self, on: bool) {
        self.line_flush = on;
    }

    /// The output's name for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.sink {
            Sink::Stdout(w) => w,
            Sink::File(w) => w,
            Sink::Gzip(w) => w,
            Sink::Zstd(w) => w,
        }
    }

    /// Write `line` and a newline.
    pub fn write_line(&mut self, line: &[u8]) -> Result<()> {
        let line_flush = self.line_flush;
        let w = self.writer();
        let result = w
            .write_all(line)
            .and_then(|_| w.write_all(b"\n"))
            .and_then(|_| if line_flush { w.flush() } else { Ok(()) });
        result.map_err(|e| Error::io(self.name.clone(), e))
    }

    /// Write raw bytes (a report, a table); no newline is added.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        let w = self.writer();
        let result = w.write_all(bytes);
        result.map_err(|e| Error::io(self.name.clone(), e))
    }

    /// Flush buffered bytes now.
    pub fn flush(&mut self) -> Result<()> {
        let result = self.writer().flush();
        result.map_err(|e| Error::io(self.name.clone(), e))
    }

    /// Flush everything and complete the file (gzip trailer).
    pub fn finish(self) -> Result<()> {
        let name = self.name;
        let result = match self.sink {
            Sink::Stdout(mut w) => w.flush(),
            Sink::File(mut w) => w.flush(),
            Sink::Gzip(w) => w.finish().and_then(|mut b| b.flush()),
            Sink::Zstd(w) => w.finish().and_then(|mut b| b.flush()),
        };
        result.map_err(|e| Error::io(name, e))
    }
}

/// A plot is SVG, alone or inline in HTML: a `--plot` name promising
/// another format (`run.png`) would get a file its viewers cannot open.
pub fn check_plot_name(path: &Path, tool: &str) -> Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ["svg", "html", "htm"]
        .iter()
        .any(|known| ext.eq_ignore_ascii_case(known))
    {
        return Ok(());
    }
    let what = if ext.is_empty() {
        "has no extension".to_string()
    } else {
        format!("asks for .{ext}, which {tool} cannot draw")
    };
    Err(Error::usage(format!(
        "--plot {}: the name {what}; give a name ending in .svg (the plot) or .html (the plot in a web page)",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(bytes: &'static [u8]) -> Vec<(u64, String)> {
        let mut reader = LineReader::new(Box::new(bytes), "t".into());
        let mut out = Vec::new();
        while let Some((n, text)) = reader.next_line().unwrap() {
            out.push((n, text.to_string()));
        }
        out
    }

    #[test]
    fn counts_physical_lines_and_skips_blank_ones() {
        assert_eq!(
            lines(b"a\n\n  \r\nb\r\nc"),
            vec![(1, "a".into()), (4, "b".into()), (5, "c".into())]
        );
    }

    #[test]
    fn invalid_utf8_names_line_and_column() {
        let mut reader = LineReader::new(Box::new(&b"ok\nab\xffc\n"[..]), "t".into());
        reader.next_line().unwrap();
        let err = reader.next_line().unwrap_err();
        assert_eq!(err.to_string(), "t:2:3: error: line is not valid UTF-8");
    }

    #[test]
    fn stdin_only_once() {
        assert!(input_specs(&["-".into(), "-".into()]).is_err());
        assert_eq!(input_specs(&[]).unwrap(), vec![InputSpec::Stdin]);
    }
}
