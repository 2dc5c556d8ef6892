//! Before the clock starts: is the server there at all? A replay against a
//! closed port would otherwise play its whole schedule into errors.

use std::time::Duration;

use crate::error::{Error, Result};

/// How long the check may take: a server that cannot answer a listing of
/// its models this fast is still taken as there once it accepted the
/// connection.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// Connect to the server and `GET /v1/models` (through the run's own
/// client, so proxies and TLS roots are the run's). A connection that
/// cannot be made is an error naming the URL and the cause; any HTTP
/// answer (a 404 too: some servers lack the route) or a slow one is fine.
pub(super) async fn check_server(
    client: &reqwest::Client,
    headers: &reqwest::header::HeaderMap,
    base: &str,
    url: &reqwest::Url,
) -> Result<()> {
    let mut models = url.clone();
    models.set_path("/v1/models");
    models.set_query(None);
    let answer = client
        .get(models.clone())
        .headers(headers.clone())
        .timeout(CHECK_TIMEOUT)
        .send()
        .await;
    let e = match answer {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    // https:// to a server of plain HTTP: the TLS handshake fails on its
    // answer, or waits for one that never comes (a server reading a
    // request line), and every request would time out as well.
    let handshake = e.is_connect() || e.is_timeout();
    if url.scheme() == "https" && handshake && speaks_plain_http(client, headers, &models).await {
        let suggestion = reqwest::Url::parse(base)
            .ok()
            .and_then(|u| plain_http(&u))
            .map(|u| {
                format!(
                    "; give --url {}",
                    redacted(u.as_str().trim_end_matches('/'))
                )
            })
            .unwrap_or_default();
        return Err(Error::msg(format!(
            "cannot reach the server at {} over TLS ({}), but it answers plain HTTP: the server \
             may not speak TLS{suggestion}",
            redacted(base),
            root_cause(&e),
        )));
    }
    match e {
        e if e.is_connect() => Err(Error::msg(format!(
            "cannot reach the server at {}: {}",
            redacted(base),
            root_cause(&e)
        ))),
        // Connected, then slow or odd: the requests will tell.
        _ => Ok(()),
    }
}

/// Whether `url` (an https one) answers as plain HTTP: any HTTP answer to
/// its listing of models over http://.
async fn speaks_plain_http(
    client: &reqwest::Client,
    headers: &reqwest::header::HeaderMap,
    url: &reqwest::Url,
) -> bool {
    let Some(plain) = plain_http(url) else {
        return false;
    };
    client
        .get(plain)
        .headers(headers.clone())
        .timeout(CHECK_TIMEOUT)
        .send()
        .await
        .is_ok()
}

/// `url` with the scheme http and the same port (443 where it had none).
fn plain_http(url: &reqwest::Url) -> Option<reqwest::Url> {
    let port = url.port_or_known_default();
    let mut plain = url.clone();
    plain.set_scheme("http").ok()?;
    plain.set_port(port).ok()?;
    Some(plain)
}

/// The innermost error of a chain, on one line.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut root = e;
    while let Some(s) = root.source() {
        root = s;
    }
    root.to_string().replace('\n', " ")
}

/// A URL as the user gave it, without a user name or password in it.
pub(super) fn redacted(base: &str) -> String {
    match reqwest::Url::parse(base) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_keeps_the_port() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert_eq!(
            plain_http(&u("https://h:8000/v1")).unwrap().as_str(),
            "http://h:8000/v1"
        );
        assert_eq!(
            plain_http(&u("https://h/")).unwrap().as_str(),
            "http://h:443/"
        );
    }

    #[test]
    fn credentials_in_a_url_are_left_out() {
        assert_eq!(redacted("http://me:secret@h:8000/v1"), "http://h:8000/v1");
        assert_eq!(redacted("http://h:8000"), "http://h:8000");
    }
}
