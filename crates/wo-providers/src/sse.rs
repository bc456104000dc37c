//! An incremental Server-Sent Events parser (the WHATWG `text/event-stream`
//! rules), fed with arbitrary byte chunks.
//!
//! Written by hand because the rules are short and we need control over the
//! edge cases that matter for LLM streams: a frame split across TCP reads, a
//! multi-byte UTF-8 character split across reads, `\r\n` line endings, `:`
//! comment lines (llama.cpp's keep-alive pings), and telling a truncated last
//! line (connection dropped) from a clean end.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any (Anthropic and WikiOracle name their events).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
}

/// What went wrong while parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// A line was not valid UTF-8.
    InvalidUtf8,
    /// The input ended in the middle of a line: the connection was cut.
    Truncated,
    /// One line grew past 4 MiB without a line break: not an event stream.
    LineTooLong,
}

/// Feed bytes with [`SseParser::feed`], then call [`SseParser::finish`] at EOF.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    // A `\r` ended the previous chunk: a following `\n` belongs to it.
    pending_cr: bool,
    bom_checked: bool,
}

/// Cap on one unterminated line; beyond it the peer is not speaking SSE.
const MAX_LINE: usize = 4 * 1024 * 1024;

impl SseParser {
    /// A fresh parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Consume a chunk; returns the events completed by it.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut out = Vec::new();
        let mut bytes = chunk;
        if self.pending_cr {
            self.pending_cr = false;
            if let [b'\n', rest @ ..] = bytes {
                bytes = rest;
            }
        }
        self.buf.extend_from_slice(bytes);
        if !self.bom_checked && self.buf.len() >= 3 {
            self.bom_checked = true;
            if self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.buf.drain(..3);
            }
        }
        let mut start = 0;
        let mut i = 0;
        while i < self.buf.len() {
            let b = self.buf[i];
            if b == b'\n' || b == b'\r' {
                let line = std::str::from_utf8(&self.buf[start..i])
                    .map_err(|_| SseError::InvalidUtf8)?
                    .to_owned();
                if b == b'\r' {
                    if i + 1 < self.buf.len() {
                        if self.buf[i + 1] == b'\n' {
                            i += 1;
                        }
                    } else {
                        self.pending_cr = true;
                    }
                }
                self.line(&line, &mut out);
                start = i + 1;
            }
            i += 1;
        }
        self.buf.drain(..start);
        if self.buf.len() > MAX_LINE {
            return Err(SseError::LineTooLong);
        }
        Ok(out)
    }

    /// Signal end of input. A complete but undispatched event (no trailing
    /// blank line) is returned, which tolerates servers that omit the final
    /// blank line; a partial line means the connection was cut.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, SseError> {
        if !self.buf.is_empty() {
            return Err(SseError::Truncated);
        }
        if self.has_data {
            return Ok(Some(self.take()));
        }
        Ok(None)
    }

    fn take(&mut self) -> SseEvent {
        self.has_data = false;
        SseEvent {
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            id: self.id.take(),
        }
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                out.push(self.take());
            } else {
                // A blank line with no data resets the event name (spec).
                self.event = None;
            }
            return;
        }
        if line.starts_with(':') {
            return; // comment / keep-alive
        }
        let (field, value) = match line.find(':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            "id" => self.id = Some(value.to_owned()),
            _ => {} // `retry:` and unknown fields are ignored
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.feed(c).unwrap());
        }
        out.extend(p.finish().unwrap());
        out
    }

    #[test]
    fn splits_anywhere_and_handles_crlf_comments_and_names() {
        let text = b"event: a\r\ndata: {\"x\":1}\r\n\r\n: ping - 2024\n\ndata: one\ndata: two\n\n";
        let whole = all(&[text]);
        for cut in 0..text.len() {
            assert_eq!(all(&[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
        }
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].event.as_deref(), Some("a"));
        assert_eq!(whole[0].data, "{\"x\":1}");
        assert_eq!(whole[1].data, "one\ntwo");
    }

    #[test]
    fn utf8_split_across_chunks() {
        let text = "data: {\"token\":\"héllo ✓\"}\n\n".as_bytes();
        let cut = text.iter().position(|&b| b == 0xC3).unwrap() + 1;
        let ev = all(&[&text[..cut], &text[cut..]]);
        assert_eq!(ev[0].data, "{\"token\":\"héllo ✓\"}");
    }

    #[test]
    fn truncated_line_is_an_error_but_missing_blank_line_is_not() {
        let mut p = SseParser::new();
        p.feed(b"data: {\"tok").unwrap();
        assert_eq!(p.finish(), Err(SseError::Truncated));
        let mut p = SseParser::new();
        assert!(p.feed(b"data: [DONE]\n").unwrap().is_empty());
        assert_eq!(p.finish().unwrap().unwrap().data, "[DONE]");
    }

    #[test]
    fn lone_cr_line_endings() {
        assert_eq!(all(&[b"data: a\r\rdata: b\r", b"\r"]).len(), 2);
    }
}
