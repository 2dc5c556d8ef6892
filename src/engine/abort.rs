//! `--abort-after N`: a run whose first N completed requests all failed
//! (a wrong key, model or URL) stops early instead of playing the whole
//! schedule into errors, and says what to check.

/// How a request ended, as far as the early stop cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    Ok,
    /// `error` or `timeout`: the result's `error` and `http_status`.
    Failed {
        error: String,
        http_status: Option<u16>,
    },
    /// Cancelled requests say nothing about the server.
    Cancelled,
}

/// Watches the first completions of a run.
#[derive(Debug, Default)]
pub(super) struct FailWatch {
    /// N; 0 never stops.
    limit: u64,
    failed: u64,
    /// The first failure, and whether every later one was the same.
    first: Option<(String, Option<u16>)>,
    same: bool,
    /// An ok request was seen, or the limit reached: nothing more to watch.
    decided: bool,
}

/// What the run knows to say why its requests failed.
#[derive(Debug)]
pub(super) struct Context<'a> {
    /// The name of the API key's variable (--api-key-env).
    pub key_env: &'a str,
    /// Whether that variable holds a key.
    pub key_set: bool,
    /// An Authorization header was given with --header.
    pub auth_header: bool,
    /// The request URL, without credentials.
    pub url: &'a str,
    /// --model, if given.
    pub model: Option<&'a str>,
}

/// Why a run stopped early: the message printed when it stops, and the
/// advice repeated on the final line.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Abort {
    pub message: String,
    pub advice: String,
}

impl FailWatch {
    pub(super) fn new(limit: u64) -> FailWatch {
        FailWatch {
            limit,
            same: true,
            decided: limit == 0,
            ..FailWatch::default()
        }
    }

    /// Whether completions still matter.
    pub(super) fn watching(&self) -> bool {
        !self.decided
    }

    /// Count one completion; `Some` when the run should stop now. Costs
    /// one test once the watch is over (an ok request, or the limit).
    pub(super) fn observe<'c>(
        &mut self,
        fate: &Fate,
        cx: impl FnOnce() -> Context<'c>,
    ) -> Option<Abort> {
        if self.decided {
            return None;
        }
        match fate {
            Fate::Ok => self.decided = true,
            Fate::Cancelled => {}
            Fate::Failed { error, http_status } => {
                self.failed += 1;
                match &self.first {
                    None => self.first = Some((error.clone(), *http_status)),
                    Some((e, _)) => self.same &= e == error,
                }
                if self.failed >= self.limit {
                    self.decided = true;
                    let (error, status) = self.first.clone()?;
                    return Some(abort(self.failed, &error, status, self.same, &cx()));
                }
            }
        }
        None
    }
}

/// The early stop's message and advice for the common error.
pub(super) fn abort(
    n: u64,
    error: &str,
    http_status: Option<u16>,
    same: bool,
    cx: &Context<'_>,
) -> Abort {
    let key = cx.key_env;
    let model = match cx.model {
        Some(m) => format!("--model `{m}`"),
        None => "the records' `model` (or give --model)".to_string(),
    };
    let advice = match http_status {
        Some(s @ (401 | 403)) if !cx.key_set && !cx.auth_header => format!(
            "the server answered {} and ${key} is not set (--api-key-env names the variable)",
            status_text(s)
        ),
        Some(401 | 403) if cx.auth_header => {
            "check the Authorization header given with --header".to_string()
        }
        Some(401 | 403) => {
            format!("check the API key in ${key} (--api-key-env names the variable)")
        }
        Some(404) => format!("check {model} and --url (requests go to {})", cx.url),
        Some(_) => format!("check the server at {} (its log says why)", cx.url),
        None if error.starts_with("connection failed") => {
            format!("check --url ({}) and that the server is up", cx.url)
        }
        None if error.starts_with("no complete answer") => format!(
            "check that the server at {} answers, or give a longer --timeout",
            cx.url
        ),
        None => format!("check the server at {} (its log says why)", cx.url),
    };
    let how = if same {
        format!("all failed with {error}")
    } else {
        format!("all failed, the first with {error}")
    };
    Abort {
        message: format!(
            "stopped early: the first {n} requests {how}; {advice}; requests not sent are \
             written as cancelled (--abort-after 0 never stops)"
        ),
        advice,
    }
}

fn status_text(status: u16) -> String {
    match status {
        401 => "401 Unauthorized".to_string(),
        403 => "403 Forbidden".to_string(),
        s => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx(key_set: bool) -> Context<'static> {
        Context {
            key_env: "OPENAI_API_KEY",
            key_set,
            auth_header: false,
            url: "http://h:8000/v1/chat/completions",
            model: None,
        }
    }

    fn failed(error: &str, http_status: Option<u16>) -> Fate {
        Fate::Failed {
            error: error.to_string(),
            http_status,
        }
    }

    #[test]
    fn the_first_n_completions_all_failed_stop_the_run_once() {
        let mut w = FailWatch::new(3);
        let e = failed("HTTP 401: no key", Some(401));
        assert_eq!(w.observe(&e, || cx(false)), None);
        assert_eq!(w.observe(&Fate::Cancelled, || cx(false)), None);
        assert_eq!(w.observe(&e, || cx(false)), None);
        assert_eq!(
            w.observe(&e, || cx(false)),
            Some(Abort {
                message: "stopped early: the first 3 requests all failed with HTTP 401: no key; \
                          the server answered 401 Unauthorized and $OPENAI_API_KEY is not set \
                          (--api-key-env names the variable); requests not sent are written as \
                          cancelled (--abort-after 0 never stops)"
                    .to_string(),
                advice: "the server answered 401 Unauthorized and $OPENAI_API_KEY is not set \
                         (--api-key-env names the variable)"
                    .to_string(),
            })
        );
        assert_eq!(w.observe(&e, || cx(false)), None);
    }

    #[test]
    fn one_ok_request_or_a_zero_limit_never_stops() {
        let e = failed("connection failed: refused", None);
        let mut w = FailWatch::new(2);
        assert_eq!(w.observe(&e, || cx(true)), None);
        assert_eq!(w.observe(&Fate::Ok, || cx(true)), None);
        assert_eq!(w.observe(&e, || cx(true)), None);
        assert_eq!(w.observe(&e, || cx(true)), None);
        let mut never = FailWatch::new(0);
        for _ in 0..5 {
            assert_eq!(never.observe(&e, || cx(true)), None);
        }
    }

    #[test]
    fn the_advice_fits_the_error() {
        let a = |error: &str, status, same, cx: &Context<'_>| abort(2, error, status, same, cx);
        assert_eq!(
            a("HTTP 401: bad key", Some(401), true, &cx(true)).advice,
            "check the API key in $OPENAI_API_KEY (--api-key-env names the variable)"
        );
        let with_model = Context {
            model: Some("m"),
            ..cx(true)
        };
        assert_eq!(
            a("HTTP 404: model m not found", Some(404), true, &with_model).advice,
            "check --model `m` and --url (requests go to http://h:8000/v1/chat/completions)"
        );
        let mixed = a("HTTP 500: boom", Some(500), false, &cx(true));
        assert!(
            mixed
                .message
                .starts_with("stopped early: the first 2 requests all failed, the first with HTTP 500: boom; check the server at http://h:8000/v1/chat/completions (its log says why);"),
            "{}",
            mixed.message
        );
        assert_eq!(
            a("no complete answer within --timeout", None, true, &cx(true)).advice,
            "check that the server at http://h:8000/v1/chat/completions answers, or give a \
             longer --timeout"
        );
        assert_eq!(
            a("connection failed: reset", None, true, &cx(true)).advice,
            "check --url (http://h:8000/v1/chat/completions) and that the server is up"
        );
    }
}
