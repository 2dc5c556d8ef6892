//! What the endpoints' tests share: an answer in a form they compare, and
//! the simulated server's streams as the engine reads them.

use serde_json::Value;

use super::{Answer, Api, Reply};

/// What an answer says, in a form tests compare: the error, the number of
/// results, content, the finish reason, the usage, the end.
pub type Seen = (
    Option<Value>,
    Option<usize>,
    bool,
    Option<String>,
    Option<[Option<u64>; 3]>,
    bool,
);

pub fn seen(a: Answer) -> Seen {
    (
        a.error,
        a.results,
        a.content,
        a.finish_reason.map(|f| f.into_owned()),
        a.usage
            .map(|u| [u.prompt_tokens, u.completion_tokens, u.cached_tokens]),
        a.end,
    )
}

/// One answer object as `api` reads it.
pub fn read(api: &dyn Api, text: &str) -> Seen {
    seen(api.read(text.as_bytes()).unwrap())
}

/// The body `api` sends for a request built in chat's form as `chat`.
pub fn render(api: &dyn Api, chat: &Value) -> Value {
    serde_json::from_slice(&api.render(chat.to_string().as_bytes()).unwrap()).unwrap()
}

/// The reply the stream tests simulate: 10 prompt tokens, 6 of them
/// cached, and 2 generated.
pub const REPLY: Reply<'static> = Reply {
    n: 4,
    model: "m",
    text: "",
    seed: 0,
    prompt_tokens: 10,
    completion_tokens: 2,
    cached_tokens: 6,
};

/// The simulated server's stream of [`REPLY`] sending `tokens` (each with
/// whether it is the last): its events, and the data of each as `api`
/// reads it.
pub fn stream(api: &dyn Api, tokens: &[(&str, bool)]) -> (Vec<String>, Vec<Seen>) {
    let g = api.generation().unwrap();
    let mut events = g.opening(&REPLY);
    for (text, last) in tokens {
        events.push(g.token(&REPLY, text, *last));
    }
    events.extend(g.closing(&REPLY, false));
    let data = events
        .iter()
        .map(|e| read(api, e.split_once("data: ").unwrap().1.trim()))
        .collect();
    (events, data)
}
