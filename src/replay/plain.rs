//! HTTP/1.1 over plain TCP for `http://` URLs: hyper's connection API with
//! a pool of kept-alive connections of our own, without the general
//! client's layers (URL handling, proxies, redirects, a pool shared by any
//! host), which cost more CPU per request than the request itself.
//! `https://` and `--http2` go through reqwest.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use hyper::http::{HeaderMap, HeaderValue, Request, Response, Uri, header};
use hyper_util::rt::TokioIo;

pub type Sender = SendRequest<Full<Bytes>>;

/// Where plain requests go, and the connections kept alive to it.
#[derive(Debug)]
pub struct Plain {
    /// `host:port`, resolved for each new connection.
    address: String,
    /// The request line's target: the URL's path and query.
    path: Uri,
    /// Host and the run's headers, in every request.
    headers: HeaderMap,
    idle: Mutex<Vec<Sender>>,
    connect_timeout: Duration,
}

/// Why a request got no response.
#[derive(Debug)]
pub enum Failure {
    Connect(std::io::Error),
    Request(hyper::Error),
}

/// A connection lent to one request; [`Lease::release`] gives it back once
/// the answer has been read to its end.
pub struct Lease<'a> {
    pool: &'a Plain,
    sender: Sender,
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
        let address = format!("{host}:{port}");
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let mut path = url.path().to_string();
        if let Some(q) = url.query() {
            path.push('?');
            path.push_str(q);
        }
        // A Host given with --header wins, as it does with reqwest.
        let mut headers = user_headers.clone();
        if !headers.contains_key(header::HOST) {
            headers.insert(header::HOST, HeaderValue::from_str(&authority).ok()?);
        }
        Some(Plain {
            address,
            path: path.parse().ok()?,
            headers,
            idle: Mutex::new(Vec::new()),
            connect_timeout,
        })
    }

    /// Send `body` as a POST; retried once on a new connection when a kept-
    /// alive one turns out to have been closed before the request reached
    /// the server.
    pub async fn send(
        &self,
        body: Bytes,
    ) -> Result<(Response<hyper::body::Incoming>, Lease<'_>), Failure> {
        let mut req = self.request(body.clone());
        let mut fresh = false;
        loop {
            let (mut sender, reused) = match self.checkout() {
                Some(s) if !fresh => (s, true),
                _ => (self.connect().await.map_err(Failure::Connect)?, false),
            };
            match sender.try_send_request(req).await {
                Ok(resp) => return Ok((resp, Lease { pool: self, sender })),
                Err(mut e) => {
                    let unsent = e.take_message();
                    let error = e.into_error();
                    match unsent {
                        Some(r) if reused => req = r,
                        _ if reused && stale(&error) => req = self.request(body.clone()),
                        _ => return Err(Failure::Request(error)),
                    }
                    fresh = true;
                }
            }
        }
    }

    fn request(&self, body: Bytes) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = hyper::Method::POST;
        *req.uri_mut() = self.path.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }

    /// An idle connection, if one is ready. Closed ones are dropped; one
    /// still finishing its last answer stays for the next request.
    fn checkout(&self) -> Option<Sender> {
        let mut idle = self.idle.lock().ok()?;
        // Most recently released first: the likeliest to be still open.
        let mut i = idle.len();
        while i > 0 {
            i -= 1;
            if idle[i].is_closed() {
                // What moves into `i` was looked at already.
                idle.swap_remove(i);
            } else if idle[i].is_ready() {
                return Some(idle.swap_remove(i));
            }
        }
        None
    }

    async fn connect(&self) -> std::io::Result<Sender> {
        let connect = async {
            let tcp = tokio::net::TcpStream::connect(&self.address).await?;
            tcp.set_nodelay(true)?;
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .map_err(std::io::Error::other)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(sender)
        };
        match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connect timed out",
            )),
        }
    }
}

impl Lease<'_> {
    /// The answer was read to its end: the connection can take another.
    pub fn release(self) {
        if let Ok(mut idle) = self.pool.idle.lock() {
            idle.push(self.sender);
        }
    }
}

/// A kept-alive connection the server had closed: nothing of the request
/// was answered, and the server saw at most a request it never started.
fn stale(e: &hyper::Error) -> bool {
    e.is_canceled() || e.is_incomplete_message() || reset_or_broken(std::error::Error::source(e))
}

/// The connection was reset, or written to after the server closed it,
/// somewhere along this chain of causes.
pub fn reset_or_broken(mut cause: Option<&(dyn std::error::Error + 'static)>) -> bool {
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ) {
                return true;
            }
        }
        cause = e.source();
    }
    false
}
