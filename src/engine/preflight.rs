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
        .get(models)
        .headers(headers.clone())
        .timeout(CHECK_TIMEOUT)
        .send()
        .await;
    match answer {
        Ok(_) => Ok(()),
        Err(e) if e.is_connect() => Err(Error::msg(format!(
            "cannot reach the server at {}: {}",
            redacted(base),
            root_cause(&e)
        ))),
        // Connected, then slow or odd: the requests will tell.
        Err(_) => Ok(()),
    }
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
    fn credentials_in_a_url_are_left_out() {
        assert_eq!(redacted("http://me:secret@h:8000/v1"), "http://h:8000/v1");
        assert_eq!(redacted("http://h:8000"), "http://h:8000");
    }
}
