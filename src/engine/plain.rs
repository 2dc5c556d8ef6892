//! HTTP/1.1 over plain TCP for `http://` URLs, written and read by the
//! request's own task, with a pool of kept-alive connections of our own.
//!
//! A general client (reqwest, hyper) runs each connection in a task of its
//! own and hands every piece of an answer over to the request's task
//! through a channel, on top of URL handling, proxies and a pool shared by
//! any host: together they cost more CPU per request than the request
//! itself. Here one task sends the request, parses the answer's head with
//! `httparse` and decodes its body as it arrives. `https://`, `--http2` and
//! proxies go through reqwest.

use std::io::{self, ErrorKind, Write};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use reqwest::header::{
    CONTENT_LENGTH, HOST, HeaderMap, HeaderName, HeaderValue, TRANSFER_ENCODING,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest response head taken.
const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size or trailer line taken.
const MAX_LINE: usize = 4096;
/// Room made in the read buffer before each read.
const READ_SIZE: usize = 16 * 1024;
/// The most header lines a response head may have.
const MAX_HEADERS: usize = 64;

/// Where plain requests go, and the connections kept alive to it.
#[derive(Debug)]
pub struct Plain {
    /// `host:port`, resolved for each new connection.
    address: String,
    /// Every request's head up to its own headers and Content-Length: the
    /// request line, Host and the run's headers.
    head: Vec<u8>,
    idle: Mutex<Vec<Conn>>,
    connect_timeout: Duration,
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum Failure {
    Connect(io::Error),
    Request(io::Error),
}

/// An answer whose head has been read.
pub struct Answer<'a> {
    pub status: u16,
    /// `Content-Type: text/event-stream`.
    pub event_stream: bool,
    pub body: BodyReader<'a>,
}

/// An answer's body, decoded as it arrives; the connection goes back to
/// the pool once the body has been read to its end.
pub struct BodyReader<'a> {
    pool: &'a Plain,
    /// `None` once the body has ended or failed.
    conn: Option<Conn>,
    framing: Framing,
    keep_alive: bool,
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    /// Bytes read; those before `pos` are used up.
    buf: Vec<u8>,
    pos: usize,
    /// The request being written.
    out: Vec<u8>,
}

impl Plain {
    /// `None` unless the URL is `http://` without credentials in it and no
    /// proxy is set in the environment: reqwest handles those.
    pub fn new(
        url: &reqwest::Url,
        user_headers: &HeaderMap,
        connect_timeout: Duration,
    ) -> Option<Plain> {
        let proxied = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
        if url.scheme() != "http"
            || proxied
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let mut head = Vec::new();
        head.extend_from_slice(b"POST ");
        head.extend_from_slice(url.path().as_bytes());
        if let Some(q) = url.query() {
            head.push(b'?');
            head.extend_from_slice(q.as_bytes());
        }
        head.extend_from_slice(b" HTTP/1.1\r\n");
        // A Host given with --header wins, as it does with reqwest.
        if !user_headers.contains_key(HOST) {
            head.extend_from_slice(b"host: ");
            head.extend_from_slice(host.as_bytes());
            if let Some(p) = url.port() {
                head.extend_from_slice(format!(":{p}").as_bytes());
            }
            head.extend_from_slice(b"\r\n");
        }
        for (name, value) in user_headers {
            // The body's framing is ours to say.
            if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
                continue;
            }
            head.extend_from_slice(name.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        Some(Plain {
            address: format!("{host}:{port}"),
            head,
            idle: Mutex::new(Vec::new()),
            connect_timeout,
        })
    }

    /// POST `body` and read the answer's head. A kept-alive connection
    /// that turns out to have been closed before any of the answer came is
    /// left for a new one, once.
    pub async fn send(
        &self,
        body: &[u8],
        header: Option<(&HeaderName, &HeaderValue)>,
    ) -> Result<Answer<'_>, Failure> {
        let mut fresh = false;
        loop {
            let (mut conn, reused) = match self.checkout().filter(|_| !fresh) {
                Some(c) => (c, true),
                None => (self.connect().await.map_err(Failure::Connect)?, false),
            };
            match conn.exchange(&self.head, header, body).await {
                Ok(head) => {
                    return Ok(Answer {
                        status: head.status,
                        event_stream: head.event_stream,
                        body: BodyReader {
                            pool: self,
                            conn: Some(conn),
                            framing: head.framing,
                            keep_alive: head.keep_alive,
                        },
                    });
                }
                Err(e) if reused && e.nothing_back => fresh = true,
                Err(e) => return Err(Failure::Request(e.error)),
            }
        }
    }

    /// The most recently used idle connection still open.
    fn checkout(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().ok()?;
        while let Some(conn) = idle.pop() {
            if conn.still_open() {
                return Some(conn);
            }
        }
        None
    }

    async fn connect(&self) -> io::Result<Conn> {
        let connect = async {
            let stream = TcpStream::connect(&self.address).await?;
            stream.set_nodelay(true)?;
            Ok(Conn {
                stream,
                buf: Vec::with_capacity(READ_SIZE),
                pos: 0,
                out: Vec::new(),
            })
        };
        match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(ErrorKind::TimedOut, "connect timed out")),
        }
    }

    fn release(&self, mut conn: Conn) {
        conn.buf.clear();
        conn.pos = 0;
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(conn);
        }
    }
}

/// How the writing of a request ended.
enum Written {
    Whole,
    /// Cut short: the server's answer began first, or the server closed
    /// the connection (the error), which may still hold its answer.
    Partly(Option<io::Error>),
}

/// A failed exchange, and whether any of an answer had come back.
struct ExchangeError {
    error: io::Error,
    nothing_back: bool,
}

impl Conn {
    /// Write the request and read the answer's head.
    async fn exchange(
        &mut self,
        head: &[u8],
        header: Option<(&HeaderName, &HeaderValue)>,
        body: &[u8],
    ) -> Result<Head, ExchangeError> {
        let nothing_back = |error| ExchangeError {
            error,
            nothing_back: true,
        };
        self.out.clear();
        self.out.extend_from_slice(head);
        if let Some((name, value)) = header {
            self.out.extend_from_slice(name.as_str().as_bytes());
            self.out.extend_from_slice(b": ");
            self.out.extend_from_slice(value.as_bytes());
            self.out.extend_from_slice(b"\r\n");
        }
        self.out.extend_from_slice(b"content-length: ");
        // Into the buffer itself: no string is made for the length.
        let _ = write!(self.out, "{}", body.len());
        self.out.extend_from_slice(b"\r\n\r\n");
        self.out.extend_from_slice(body);
        let (whole, mut write_error) = match self.write_request().await.map_err(nothing_back)? {
            Written::Whole => (true, None),
            Written::Partly(error) => (false, error),
        };
        loop {
            match parse_head(&self.buf[self.pos..]) {
                Ok(Some((mut head, len))) => {
                    self.pos += len;
                    if is_interim(head.status) {
                        continue;
                    }
                    // The rest of a request cut short would be read as
                    // the next one.
                    head.keep_alive &= whole;
                    return Ok(head);
                }
                Ok(None) if self.buf.len() - self.pos > MAX_HEAD => {
                    return Err(ExchangeError {
                        error: invalid("the response head is longer than 64 KiB"),
                        nothing_back: false,
                    });
                }
                Ok(None) => {}
                Err(error) => {
                    return Err(ExchangeError {
                        error,
                        nothing_back: false,
                    });
                }
            }
            let got_some = self.buf.len() > self.pos;
            let error = match self.fill().await {
                Ok(0) => io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "connection closed before the response head was complete",
                ),
                Ok(_) => continue,
                Err(error) => error,
            };
            return Err(ExchangeError {
                // No answer after all: the write's error is the reason.
                error: write_error.take().unwrap_or(error),
                nothing_back: !got_some,
            });
        }
    }

    /// Write the request, reading what comes back meanwhile. A server may
    /// answer before it has read the whole request (an early 413): it
    /// then stops reading, or closes the connection, which fails the
    /// write. Its answer says more than the write's error or a timeout.
    async fn write_request(&mut self) -> io::Result<Written> {
        let (mut reader, mut writer) = self.stream.split();
        let write = writer.write_all(&self.out);
        tokio::pin!(write);
        let mut reading = true;
        self.buf.reserve(READ_SIZE);
        loop {
            tokio::select! {
                biased;
                written = &mut write => return match written {
                    Ok(()) => Ok(Written::Whole),
                    Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                        Ok(Written::Partly(Some(e)))
                    }
                    Err(e) => Err(e),
                },
                read = reader.read_buf(&mut self.buf), if reading => match read {
                    Ok(_) if final_answer_begun(&self.buf[self.pos..]) => {
                        return Ok(Written::Partly(None));
                    }
                    Ok(n) => reading = n > 0,
                    // Reset: the write fails too, and says so.
                    Err(_) => reading = false,
                },
            }
        }
    }

    /// Read what has arrived, after the unread bytes. Those are moved to
    /// the front first (at most an unfinished head or line), so that a long
    /// answer never grows the buffer.
    async fn fill(&mut self) -> io::Result<usize> {
        self.buf.drain(..self.pos);
        self.pos = 0;
        self.buf.reserve(READ_SIZE);
        self.stream.read_buf(&mut self.buf).await
    }

    /// Not closed by the server while idle, as far as can be told without
    /// waiting. When nothing has been signalled since the last read, no
    /// system call is made.
    fn still_open(&self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        match self.stream.poll_read_ready(&mut cx) {
            Poll::Pending => true,
            Poll::Ready(Err(_)) => false,
            Poll::Ready(Ok(())) => {
                // Readable while idle: closed, or bytes nobody asked for.
                let mut probe = [0u8; 1];
                matches!(self.stream.try_read(&mut probe), Err(e) if e.kind() == ErrorKind::WouldBlock)
            }
        }
    }
}

impl BodyReader<'_> {
    /// The next piece of the body, as it arrived; `None` at its end.
    pub async fn next(&mut self) -> Option<io::Result<&[u8]>> {
        let range = loop {
            let conn = self.conn.as_mut()?;
            match self.framing.step(&conn.buf, &mut conn.pos) {
                Ok(Step::Data(range)) => break range,
                Ok(Step::End) => {
                    self.end();
                    return None;
                }
                Ok(Step::More) => {}
                Err(e) => {
                    self.conn = None;
                    return Some(Err(e));
                }
            }
            match conn.fill().await {
                Ok(0) if matches!(self.framing, Framing::UntilClose) => {
                    self.conn = None;
                    return None;
                }
                Ok(0) => {
                    self.conn = None;
                    return Some(Err(io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "connection closed before the response was complete",
                    )));
                }
                Ok(_) => {}
                Err(e) => {
                    self.conn = None;
                    return Some(Err(e));
                }
            }
        };
        self.conn.as_ref().map(|c| Ok(&c.buf[range]))
    }

    /// The body ended: keep the connection if the server allows and sent
    /// nothing more.
    fn end(&mut self) {
        if let Some(conn) = self.conn.take() {
            if self.keep_alive && conn.pos == conn.buf.len() {
                self.pool.release(conn);
            }
        }
    }
}

/// What a response head says.
#[derive(Debug, PartialEq)]
struct Head {
    status: u16,
    event_stream: bool,
    keep_alive: bool,
    framing: Framing,
}

/// How the body's end is known.
#[derive(Debug, PartialEq)]
enum Framing {
    /// Content-Length: the bytes still to come.
    Length(u64),
    Chunked(Chunk),
    /// Neither: the body ends when the connection closes.
    UntilClose,
}

/// Where a chunked body's decoding is.
#[derive(Debug, PartialEq)]
enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk: the bytes of it still to come.
    Data(u64),
    /// After a chunk's data, before its line end.
    DataEnd,
    /// After the last chunk: trailer lines up to an empty one.
    Trailer,
    Done,
}

/// What [`Framing::step`] found in the bytes read so far.
#[derive(Debug, PartialEq)]
enum Step {
    /// Body bytes, at this range of the buffer.
    Data(std::ops::Range<usize>),
    /// The body has ended.
    End,
    /// More bytes must be read.
    More,
}

impl Framing {
    /// Decode from `buf[*pos..]`, moving `pos` past what was used.
    fn step(&mut self, buf: &[u8], pos: &mut usize) -> io::Result<Step> {
        loop {
            let avail = buf.len() - *pos;
            let chunk = match self {
                Framing::Length(0) => return Ok(Step::End),
                Framing::Length(left) => return Ok(take(buf, pos, left)),
                Framing::UntilClose if avail == 0 => return Ok(Step::More),
                Framing::UntilClose => {
                    let start = *pos;
                    *pos = buf.len();
                    return Ok(Step::Data(start..buf.len()));
                }
                Framing::Chunked(chunk) => chunk,
            };
            match chunk {
                Chunk::Size => {
                    let Some(line) = line(buf, pos)? else {
                        return Ok(Step::More);
                    };
                    let size = chunk_size(line)?;
                    *chunk = if size == 0 {
                        Chunk::Trailer
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    let step = take(buf, pos, left);
                    if *left == 0 {
                        *chunk = Chunk::DataEnd;
                    }
                    return Ok(step);
                }
                Chunk::DataEnd => {
                    let Some(line) = line(buf, pos)? else {
                        return Ok(Step::More);
                    };
                    if !line.is_empty() {
                        return Err(invalid("a chunk is longer than its size says"));
                    }
                    *chunk = Chunk::Size;
                }
                Chunk::Trailer => {
                    let Some(line) = line(buf, pos)? else {
                        return Ok(Step::More);
                    };
                    if line.is_empty() {
                        *chunk = Chunk::Done;
                    }
                }
                Chunk::Done => return Ok(Step::End),
            }
        }
    }
}

/// Up to `left` body bytes from what was read.
fn take(buf: &[u8], pos: &mut usize, left: &mut u64) -> Step {
    let n = (buf.len() - *pos).min(usize::try_from(*left).unwrap_or(usize::MAX));
    if n == 0 {
        return Step::More;
    }
    let start = *pos;
    *pos += n;
    *left -= n as u64;
    Step::Data(start..start + n)
}

/// The next line, without its CRLF (or LF), once it has all arrived.
fn line<'b>(buf: &'b [u8], pos: &mut usize) -> io::Result<Option<&'b [u8]>> {
    let rest = &buf[*pos..];
    let Some(end) = memchr::memchr(b'\n', rest) else {
        return if rest.len() > MAX_LINE {
            Err(invalid("a chunk-size or trailer line is longer than 4 KiB"))
        } else {
            Ok(None)
        };
    };
    *pos += end + 1;
    let line = &rest[..end];
    Ok(Some(line.strip_suffix(b"\r").unwrap_or(line)))
}

/// A chunk-size line: hexadecimal digits, maybe extensions after `;`.
fn chunk_size(line: &[u8]) -> io::Result<u64> {
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let digits = digits.trim_ascii();
    let bad = || {
        let shown = String::from_utf8_lossy(&line[..line.len().min(40)]).into_owned();
        invalid(&format!("invalid chunk size {shown:?}"))
    };
    if digits.is_empty() || digits.len() > 15 {
        return Err(bad());
    }
    let mut size = 0u64;
    for &d in digits {
        let v = (d as char).to_digit(16).ok_or_else(bad)?;
        size = size * 16 + u64::from(v);
    }
    Ok(size)
}

/// The response head at the start of `bytes`, and its length; `None` until
/// it has all arrived.
fn parse_head(bytes: &[u8]) -> io::Result<Option<(Head, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(invalid(&format!("invalid HTTP response: {e}"))),
    };
    let status = resp.code.unwrap_or_default();
    let http11 = resp.version == Some(1);
    let mut event_stream = false;
    let mut chunked = false;
    let mut until_close = false;
    let mut length: Option<u64> = None;
    let mut close = !http11;
    for h in resp.headers.iter() {
        let name = h.name;
        let value = h.value.trim_ascii();
        if name.eq_ignore_ascii_case("content-type") {
            event_stream = super::sse::is_event_stream(value);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // The last coding says how the body ends.
            let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
            chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
            until_close = !chunked;
        } else if name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|n| length.is_none_or(|l| l == *n))
                .ok_or_else(|| {
                    invalid(&format!(
                        "invalid Content-Length {:?}",
                        String::from_utf8_lossy(h.value)
                    ))
                })?;
            length = Some(n);
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && !http11 {
                    close = false;
                }
            }
        }
    }
    let framing = if status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked(Chunk::Size)
    } else if until_close {
        Framing::UntilClose
    } else {
        match length {
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        }
    };
    let keep_alive = !close && status != 101 && framing != Framing::UntilClose;
    Ok(Some((
        Head {
            status,
            event_stream,
            keep_alive,
            framing,
        },
        len,
    )))
}

/// 100 Continue, 103 Early Hints: heads the final answer follows.
fn is_interim(status: u16) -> bool {
    (100..200).contains(&status) && status != 101
}

/// Whether `bytes` hold the start of a final answer, after any interim
/// heads: a whole head, or one too long or malformed to ever be one.
fn final_answer_begun(mut bytes: &[u8]) -> bool {
    loop {
        match parse_head(bytes) {
            Ok(Some((head, len))) if is_interim(head.status) => bytes = &bytes[len..],
            Ok(None) => return bytes.len() > MAX_HEAD,
            _ => return true,
        }
    }
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, msg.to_string())
}

/// The connection was reset, or written to after the server closed it,
/// somewhere along this chain of causes.
pub fn reset_or_broken(mut cause: Option<&(dyn std::error::Error + 'static)>) -> bool {
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if matches!(
                io.kind(),
                ErrorKind::ConnectionReset | ErrorKind::BrokenPipe
            ) {
                return true;
            }
        }
        cause = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decode `wire` arriving in reads of the given sizes (cycled): the
    /// body, and whether its end was seen.
    fn decode(mut framing: Framing, wire: &[u8], reads: &[usize]) -> io::Result<(Vec<u8>, bool)> {
        let mut buf = Vec::new();
        let mut pos = 0;
        let mut fed = 0;
        let mut body = Vec::new();
        let mut k = 0;
        loop {
            match framing.step(&buf, &mut pos)? {
                Step::Data(r) => body.extend_from_slice(&buf[r]),
                Step::End => return Ok((body, true)),
                Step::More if fed == wire.len() => return Ok((body, false)),
                Step::More => {
                    let n = reads[k % reads.len()].min(wire.len() - fed).max(1);
                    k += 1;
                    buf.extend_from_slice(&wire[fed..fed + n]);
                    fed += n;
                }
            }
        }
    }

    const CHUNKED: &[u8] =
        b"5\r\nhello\r\n1;ext=1\r\n \r\n00C\r\nwor\nld\r\n!!!!\r\n0\r\nx-trailer: 1\r\n\r\n";

    #[test]
    fn chunked_bodies_decode_whatever_the_reads() {
        let want = b"hello wor\nld\r\n!!!!".to_vec();
        for split in 1..CHUNKED.len() {
            for reads in [vec![split], vec![split, 1], vec![1, split]] {
                let got = decode(Framing::Chunked(Chunk::Size), CHUNKED, &reads).unwrap();
                assert_eq!(got, (want.clone(), true), "reads {reads:?}");
            }
        }
    }

    #[test]
    fn a_chunked_body_cut_short_has_no_end() {
        for cut in 0..CHUNKED.len() {
            let (_, ended) = decode(Framing::Chunked(Chunk::Size), &CHUNKED[..cut], &[3]).unwrap();
            assert!(!ended, "cut at {cut}");
        }
    }

    #[test]
    fn bad_chunk_framing_is_an_error() {
        for wire in [
            &b"zz\r\nhello\r\n0\r\n\r\n"[..],
            b"\r\nhello\r\n0\r\n\r\n",
            b"3\r\nhello\r\n0\r\n\r\n",
            b"ffffffffffffffff\r\n",
        ] {
            let e = decode(Framing::Chunked(Chunk::Size), wire, &[4]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidData, "{wire:?}");
        }
    }

    #[test]
    fn length_framing_stops_at_the_length() {
        let (body, ended) = decode(Framing::Length(5), b"helloEXTRA", &[2]).unwrap();
        assert_eq!((body.as_slice(), ended), (&b"hello"[..], true));
        let (body, ended) = decode(Framing::Length(9), b"hello", &[2]).unwrap();
        assert_eq!((body.as_slice(), ended), (&b"hello"[..], false));
        let (body, ended) = decode(Framing::UntilClose, b"hello", &[2]).unwrap();
        assert_eq!((body.as_slice(), ended), (&b"hello"[..], false));
    }

    /// A long chunked answer whose chunk-size lines arrive cut in two
    /// leaves a few unread bytes after many reads: the buffer must not
    /// grow with the answer.
    #[test]
    fn a_long_answer_keeps_the_read_buffer_small() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_nodelay(true).unwrap();
            let _ = s.read(&mut [0; 4096]).unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                .unwrap();
            let piece = [b'x'; 1000];
            for _ in 0..400 {
                s.write_all(b"3e8\r\n").unwrap();
                s.write_all(&piece).unwrap();
                s.write_all(b"\r\n3").unwrap();
                std::thread::sleep(Duration::from_micros(200));
                s.write_all(b"e8\r\n").unwrap();
                s.write_all(&piece).unwrap();
                s.write_all(b"\r\n").unwrap();
            }
            s.write_all(b"0\r\n\r\n").unwrap();
            // Keep the connection open until the client is done.
            let _ = s.read(&mut [0; 1]);
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let url = reqwest::Url::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap();
            let plain = Plain::new(&url, &HeaderMap::new(), Duration::from_secs(5)).unwrap();
            let mut answer = plain.send(b"{}", None).await.map_err(|_| ()).unwrap();
            let mut got = 0;
            while let Some(piece) = answer.body.next().await {
                got += piece.unwrap().len();
            }
            assert_eq!(got, 800_000);
            let idle = plain.idle.lock().unwrap();
            assert_eq!(idle.len(), 1);
            assert!(
                idle[0].buf.capacity() <= 2 * READ_SIZE,
                "{}",
                idle[0].buf.capacity()
            );
        });
        drop(rt);
        server.join().unwrap();
    }

    fn head(text: &str) -> Head {
        let (head, len) = parse_head(text.as_bytes()).unwrap().unwrap();
        assert_eq!(len, text.find("\r\n\r\n").unwrap() + 4);
        head
    }

    #[test]
    fn heads_say_how_bodies_end_and_whether_to_keep_the_connection() {
        let h = head(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nrest",
        );
        assert_eq!(
            h,
            Head {
                status: 200,
                event_stream: true,
                keep_alive: true,
                framing: Framing::Chunked(Chunk::Size)
            }
        );
        let h = head("HTTP/1.1 429 Too Many\r\ncontent-length: 12\r\nconnection: close\r\n\r\n");
        assert_eq!(
            (h.status, h.keep_alive, h.framing),
            (429, false, Framing::Length(12))
        );
        // Chunked wins over a length; a length only says nothing else.
        let h = head(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        );
        assert_eq!(h.framing, Framing::Chunked(Chunk::Size));
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((h.keep_alive, h.framing), (false, Framing::UntilClose));
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(h.keep_alive);
        let h = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!((h.keep_alive, h.framing), (true, Framing::Length(0)));
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\ncontent-le")
                .unwrap()
                .is_none()
        );
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            let e = parse_head(bad.as_bytes()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidData, "{bad}");
        }
    }
}
