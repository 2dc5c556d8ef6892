//! Server-sent events, parsed from bytes however the network chunks them.

/// A Content-Type value announcing server-sent events.
pub fn is_event_stream(content_type: &[u8]) -> bool {
    content_type.starts_with(b"text/event-stream")
}

/// Incremental SSE parser: feed bytes, get the `data` of each complete
/// event. Handles events split across reads, several events per read,
/// `data:` with or without a space, multi-line data, comments, CR, LF and
/// CRLF line ends.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The previous byte was a CR: a following LF belongs to it.
    after_cr: bool,
}

impl SseParser {
    /// Feed bytes; `event` is called with the data of each event completed.
    pub fn feed(&mut self, mut bytes: &[u8], mut event: impl FnMut(&[u8])) {
        while let Some(&first) = bytes.first() {
            if self.after_cr {
                self.after_cr = false;
                if first == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            // Whole runs of line content at a time, not byte by byte.
            match memchr::memchr2(b'\r', b'\n', bytes) {
                Some(end) => {
                    self.line.extend_from_slice(&bytes[..end]);
                    self.after_cr = bytes[end] == b'\r';
                    self.end_line(&mut event);
                    bytes = &bytes[end + 1..];
                }
                None => {
                    self.line.extend_from_slice(bytes);
                    return;
                }
            }
        }
    }

    /// Bytes held for the line and the event not yet complete.
    pub fn pending(&self) -> usize {
        self.line.len() + self.data.len()
    }

    /// The stream ended: an event without its final blank line still counts.
    pub fn finish(&mut self, mut event: impl FnMut(&[u8])) {
        if !self.line.is_empty() {
            self.end_line(&mut event);
        }
        self.dispatch(&mut event);
    }

    fn end_line(&mut self, event: &mut impl FnMut(&[u8])) {
        if self.line.is_empty() {
            self.dispatch(event);
            return;
        }
        let mut line = std::mem::take(&mut self.line);
        if line[0] != b':' {
            let (field, value) = match memchr::memchr(b':', &line) {
                Some(i) => {
                    let v = i + 1 + usize::from(line.get(i + 1) == Some(&b' '));
                    (i, v)
                }
                None => (line.len(), line.len()),
            };
            if &line[..field] == b"data" {
                if self.has_data {
                    self.data.push(b'\n');
                    self.data.extend_from_slice(&line[value..]);
                } else {
                    // The event's first data line becomes its data where it
                    // is: a long line is held once, not twice.
                    line.copy_within(value.., 0);
                    line.truncate(line.len() - value);
                    std::mem::swap(&mut line, &mut self.data);
                }
                self.has_data = true;
            }
        }
        self.line = line;
        self.line.clear();
        release(&mut self.line);
    }

    fn dispatch(&mut self, event: &mut impl FnMut(&[u8])) {
        if self.has_data {
            event(&self.data);
            self.data.clear();
            release(&mut self.data);
            self.has_data = false;
        }
    }
}

/// A buffer emptied after a long line or event: its room is given back,
/// so that one long event does not hold its size for the rest of the
/// stream.
fn release(buf: &mut Vec<u8>) {
    const KEEP: usize = 64 * 1024;
    if buf.capacity() > KEEP {
        *buf = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, |d| out.push(String::from_utf8_lossy(d).into_owned()));
        }
        p.finish(|d| out.push(String::from_utf8_lossy(d).into_owned()));
        out
    }

    const STREAM: &[u8] = b": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\ndata:{\"b\":2}\n\nevent: x\ndata: l1\ndata: l2\n\n\ndata: [DONE]\n\n";

    #[test]
    fn every_split_gives_the_same_events() {
        let want = vec!["{\"a\":1}", "{\"b\":2}", "l1\nl2", "[DONE]"];
        assert_eq!(events(&[STREAM]), want);
        for i in 0..=STREAM.len() {
            for j in i..=STREAM.len() {
                let got = events(&[&STREAM[..i], &STREAM[i..j], &STREAM[j..]]);
                assert_eq!(got, want, "split at {i}, {j}");
            }
        }
        let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(events(&bytes), want);
    }

    #[test]
    fn last_event_without_blank_line_counts() {
        assert_eq!(events(&[b"data: x"]), vec!["x"]);
        assert_eq!(events(&[b"data: x\r"]), vec!["x"]);
    }
}
