//! Servers for replay tests: the real trace-sim binary, and a scripted
//! HTTP server whose answers are exact byte streams.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::util::{bin, data};

/// A trace-sim process on a free loopback port, stopped when dropped.
pub struct Sim {
    child: Child,
    pub url: String,
}

impl Sim {
    pub fn start(args: &[&str]) -> Sim {
        let mut child = Command::new(bin("trace-sim"))
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("trace-sim starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
        Sim { child, url }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One scripted answer: the raw bytes after the headers, written in
/// pieces of `piece` bytes; `cut` closes the connection early.
#[derive(Clone, Debug)]
pub struct Answer {
    pub head: String,
    pub body: Vec<u8>,
    pub piece: usize,
    /// After the answer, wait for the next request and close unanswered.
    pub close_on_next: bool,
}

impl Answer {
    /// An SSE stream of named `events` (name, data), in pieces of
    /// `piece` bytes.
    pub fn events(events: &[(&str, &str)], piece: usize) -> Answer {
        let sse: String = events
            .iter()
            .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
            .collect();
        Answer::sse(sse.as_bytes(), piece)
    }

    /// An SSE stream delimited by the connection's close.
    pub fn sse(body: &[u8], piece: usize) -> Answer {
        Answer {
            head: "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                .into(),
            body: body.to_vec(),
            piece,
            close_on_next: false,
        }
    }

    /// A JSON answer with a status line.
    pub fn json(status: &str, body: &str) -> Answer {
        Answer {
            head: format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            ),
            body: body.as_bytes().to_vec(),
            piece: usize::MAX,
            close_on_next: false,
        }
    }

    /// A JSON answer that promises to keep the connection alive; the
    /// server then reads the start of the next request on it and closes
    /// it unanswered: the race a server that closes kept-alive connections
    /// unannounced (llama.cpp's) runs with each next request.
    pub fn json_unannounced_close(body: &str) -> Answer {
        Answer {
            head: format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            ),
            body: body.as_bytes().to_vec(),
            piece: usize::MAX,
            close_on_next: true,
        }
    }

    /// A chunked SSE answer that stops in the middle of a chunk.
    pub fn cut_chunked(first_event: &str) -> Answer {
        let chunk = format!("{:x}\r\n{first_event}\r\n", first_event.len());
        Answer {
            head: "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n".into(),
            body: format!("{chunk}400\r\ndata: {{\"choi").into_bytes(),
            piece: usize::MAX,
            close_on_next: false,
        }
    }
}

/// Larger request bodies get an early 413, as from a server with a limit.
pub const BODY_LIMIT: usize = 1 << 20;

/// A request as the scripted server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub head: String,
    pub body: String,
}

/// An HTTP/1.1 server on a free loopback port that answers each request
/// with `choose(body)`. Its thread lives as long as the test process.
pub struct Scripted {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    pub fn start(choose: fn(&str) -> Answer) -> Scripted {
        Scripted::start_with_head(Arc::new(move |_head: &str, body: &str| choose(body)))
    }

    /// As [`Scripted::start`], with the answer chosen from the request's
    /// head too (a server that echoes headers).
    pub fn start_with_head(choose: Chooser) -> Scripted {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let addr = accept_each(move |conn| serve(conn, &*choose, &log));
        Scripted {
            url: format!("http://{addr}"),
            seen,
        }
    }
}

/// Listen on a free loopback port and hand each connection to `handle` on
/// a thread of its own, for as long as the test process lives; the
/// address listened on.
fn accept_each(handle: impl Fn(TcpStream) + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = Arc::new(handle);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let handle = handle.clone();
            std::thread::spawn(move || handle(conn));
        }
    });
    addr
}

/// Chooses the answer from the request's head and body.
pub type Chooser = Arc<dyn Fn(&str, &str) -> Answer + Send + Sync>;

/// Read a request's head (to its blank line) from `conn`, and its
/// Content-Length. `None` when the client closed first, or for a `GET`:
/// the replay's check that the server is up (`GET /v1/models`), answered
/// here as by a server without the route, and not logged.
fn read_head(conn: &TcpStream) -> Option<(BufReader<TcpStream>, String, usize)> {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    if head.starts_with("GET ") {
        let answer = Answer::json("404 Not Found", r#"{"error":"not found"}"#);
        let mut conn = conn;
        let _ = conn.write_all(answer.head.as_bytes());
        let _ = conn.write_all(&answer.body);
        return None;
    }
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    Some((reader, head, length))
}

fn serve(
    conn: TcpStream,
    choose: &(dyn Fn(&str, &str) -> Answer + Send + Sync),
    log: &Mutex<Vec<Seen>>,
) {
    conn.set_nodelay(true).unwrap();
    let Some((mut reader, head, length)) = read_head(&conn) else {
        return;
    };
    if length > BODY_LIMIT {
        // Answered before the body is read, and closed with the body
        // unread: the client's write then fails with a reset. With
        // `x-early: keep-open`, kept open unread instead: the client's
        // write then stalls.
        let answer = Answer::json(
            "413 Payload Too Large",
            r#"{"error":{"message":"request body too large","type":"invalid_request_error"}}"#,
        );
        let mut conn = conn;
        let _ = conn.write_all(answer.head.as_bytes());
        let _ = conn.write_all(&answer.body);
        if head
            .to_ascii_lowercase()
            .contains("\r\nx-early: keep-open\r\n")
        {
            std::thread::sleep(Duration::from_secs(30));
        }
        log.lock().unwrap().push(Seen {
            head,
            body: String::new(),
        });
        return;
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let body = String::from_utf8(body).unwrap();
    let answer = choose(&head, &body);
    log.lock().unwrap().push(Seen { head, body });
    let mut conn = conn;
    if conn.write_all(answer.head.as_bytes()).is_err() {
        return;
    }
    for piece in answer
        .body
        .chunks(answer.piece.min(answer.body.len()).max(1))
    {
        if conn.write_all(piece).is_err() {
            return;
        }
        let _ = conn.flush();
        if answer.piece < 16 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    if answer.close_on_next {
        let _ = reader.fill_buf();
    }
    let _ = conn.shutdown(std::net::Shutdown::Both);
}

/// An https server on a free loopback port, with a certificate for
/// 127.0.0.1 signed by `tests/data/tls/ca.pem`, that answers every request
/// with `body` and closes the connection. Its thread lives as long as the
/// test process.
pub struct Tls {
    pub url: String,
}

impl Tls {
    pub fn start(body: &'static str) -> Tls {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs = CertificateDer::pem_file_iter(data("tls/server.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(data("tls/server.key")).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .unwrap(),
        );
        let addr = accept_each(move |conn| {
            let tls = rustls::ServerConnection::new(config.clone()).unwrap();
            // A client that rejects the certificate ends here.
            let _ = serve_tls(rustls::StreamOwned::new(tls, conn), body);
        });
        Tls {
            url: format!("https://{addr}"),
        }
    }
}

fn serve_tls(
    mut stream: rustls::StreamOwned<rustls::ServerConnection, TcpStream>,
    body: &str,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(&mut stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut request = vec![0; length];
    reader.read_exact(&mut request)?;
    drop(reader);
    let answer = Answer::json("200 OK", body);
    stream.write_all(answer.head.as_bytes())?;
    stream.write_all(&answer.body)?;
    stream.conn.send_close_notify();
    stream.flush()
}

/// A Prometheus endpoint on a free loopback port: its n-th request (from
/// 0) is answered after `answer(n).2` with status line `answer(n).0` and
/// body `answer(n).1`. Its thread lives as long as the test process.
pub struct MetricsEndpoint {
    pub url: String,
    pub requests: Arc<std::sync::atomic::AtomicUsize>,
}

/// What a [`MetricsEndpoint`] answers its n-th request.
pub type MetricsAnswer = fn(usize) -> (&'static str, String, Duration);

impl MetricsEndpoint {
    pub fn start(answer: MetricsAnswer) -> MetricsEndpoint {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let count = requests.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let n = count.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                    }
                    let (status, body, delay) = answer(n);
                    std::thread::sleep(delay);
                    let _ = write!(
                        conn,
                        "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                });
            }
        });
        MetricsEndpoint { url, requests }
    }
}

/// The body of `GET url` (plain HTTP/1.1 on loopback, answered whole).
pub fn http_get(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_once('/').map_or((rest, "/"), |(h, p)| (h, p));
    let path = if path == "/" {
        "/".to_string()
    } else {
        format!("/{path}")
    };
    let mut conn = TcpStream::connect(host).unwrap();
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// What a [`Raw`] server does with one request: given the request's head
/// and body, it writes (or does not write) the answer on the connection
/// itself.
pub type RawAnswer = Arc<dyn Fn(&str, &str, TcpStream) + Send + Sync>;

/// A loopback server whose answers the test writes byte by byte: for
/// behaviours no well-formed answer has (a reset, a drip, a wrong length,
/// a connection kept open). The replay's `GET` check is answered 404, as
/// by [`Scripted`]. Its thread lives as long as the test process.
pub struct Raw {
    pub url: String,
}

impl Raw {
    pub fn start(answer: RawAnswer) -> Raw {
        let addr = accept_each(move |conn| {
            let _ = conn.set_nodelay(true);
            let Some((mut reader, head, length)) = read_head(&conn) else {
                return;
            };
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            answer(&head, &String::from_utf8_lossy(&body), conn);
        });
        Raw {
            url: format!("http://{addr}"),
        }
    }
}

/// Keep `conn` open, sending nothing, until the client closes it.
pub fn hold_open(mut conn: TcpStream) {
    let mut byte = [0; 1];
    while matches!(conn.read(&mut byte), Ok(n) if n > 0) {}
}
/// Close `conn` with a reset (RST) rather than an orderly end.
pub fn reset(conn: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on the socket this thread owns, with a value of
    // the size given.
    unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(conn);
}
