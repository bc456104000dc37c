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

/// Feed bytes with [`SseParser::feed`] (or [`SseParser::feed_each`]), then
/// call [`SseParser::finish`] at EOF.
#[derive(Debug, Default)]
pub struct SseParser {
    /// The start of a line that the last chunk did not finish (only that:
    /// complete lines are parsed where they arrived, never copied here).
    buf: Vec<u8>,
    /// The event being built; its strings are cleared, not dropped, after
    /// each dispatch, so a stream of events reuses one set of buffers.
    event: SseEvent,
    has_event: bool,
    has_id: bool,
    has_data: bool,
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
        self.feed_each(chunk, |ev| {
            out.push(ev.clone());
            Ok::<_, SseError>(false)
        })?;
        Ok(out)
    }

    /// Consume a chunk, handing each event it completes to `f` as it is
    /// found (borrowed: the parser reuses its buffers for the next one).
    /// `f` returns `Ok(true)` to stop (the rest of the chunk is ignored:
    /// the stream is over) or an error, which is returned as it is. Each
    /// complete line is parsed in place, in `chunk`; only a line cut by the
    /// end of the chunk is kept, to be finished by the next.
    pub fn feed_each<E: From<SseError>>(
        &mut self,
        chunk: &[u8],
        mut f: impl FnMut(&SseEvent) -> Result<bool, E>,
    ) -> Result<bool, E> {
        if chunk.is_empty() {
            // Nothing to parse, and a `\r` just before stays pending.
            return Ok(false);
        }
        let mut bytes = chunk;
        if self.pending_cr {
            self.pending_cr = false;
            if let [b'\n', rest @ ..] = bytes {
                bytes = rest;
            }
        }
        if !self.bom_checked {
            // The BOM is looked for in the first three bytes of the stream,
            // which may arrive split: gather them first.
            if self.buf.len() + bytes.len() < 3 {
                self.buf.extend_from_slice(bytes);
                return Ok(false);
            }
            self.bom_checked = true;
            let mut head = std::mem::take(&mut self.buf);
            head.extend_from_slice(bytes);
            let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head);
            return self.lines(body, &mut f);
        }
        if self.buf.is_empty() {
            return self.lines(bytes, &mut f);
        }
        // Finish the line the previous chunk cut, then go on in place.
        let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') else {
            self.buf.extend_from_slice(bytes);
            self.check_len()?;
            return Ok(false);
        };
        let mut line = std::mem::take(&mut self.buf);
        line.extend_from_slice(&bytes[..end]);
        let rest = self.after_eol(bytes, end);
        let stop = self.line(&line, &mut f);
        // Keep the allocation for the next cut line.
        line.clear();
        self.buf = line;
        if stop? {
            return Ok(true);
        }
        self.lines(rest, &mut f)
    }

    /// Parses the complete lines of `bytes` (nothing is buffered before
    /// them) and keeps the cut line at its end, if any.
    fn lines<E: From<SseError>>(
        &mut self,
        bytes: &[u8],
        f: &mut impl FnMut(&SseEvent) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            let line = &rest[..end];
            rest = self.after_eol(rest, end);
            if self.line(line, f)? {
                return Ok(true);
            }
        }
        self.buf.extend_from_slice(rest);
        self.check_len()?;
        Ok(false)
    }

    /// What follows the line ending at `bytes[end]` (`\r\n` is one
    /// ending; a `\r` at the very end may be the first half of one).
    fn after_eol<'b>(&mut self, bytes: &'b [u8], end: usize) -> &'b [u8] {
        if bytes[end] == b'\r' {
            match bytes.get(end + 1) {
                Some(b'\n') => return &bytes[end + 2..],
                None => self.pending_cr = true,
                Some(_) => {}
            }
        }
        &bytes[end + 1..]
    }

    fn check_len(&self) -> Result<(), SseError> {
        if self.buf.len() > MAX_LINE {
            return Err(SseError::LineTooLong);
        }
        Ok(())
    }

    /// Signal end of input. A complete but undispatched event (no trailing
    /// blank line) is returned, which tolerates servers that omit the final
    /// blank line; a partial line means the connection was cut.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, SseError> {
        if !self.buf.is_empty() {
            return Err(SseError::Truncated);
        }
        if self.has_data {
            let ev = self.current().clone();
            self.reset();
            return Ok(Some(ev));
        }
        Ok(None)
    }

    /// The event as dispatched: fields not seen in it are `None`.
    fn current(&mut self) -> &SseEvent {
        if !self.has_event {
            self.event.event = None;
        }
        if !self.has_id {
            self.event.id = None;
        }
        &self.event
    }

    /// Clears the event for the next one, keeping its buffers.
    fn reset(&mut self) {
        self.has_data = false;
        self.has_event = false;
        self.has_id = false;
        self.event.data.clear();
    }

    fn line<E: From<SseError>>(
        &mut self,
        line: &[u8],
        f: &mut impl FnMut(&SseEvent) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let line = std::str::from_utf8(line).map_err(|_| SseError::InvalidUtf8)?;
        if line.is_empty() {
            if self.has_data {
                let stop = f(self.current());
                self.reset();
                return stop;
            }
            // A blank line with no data resets the event name (spec).
            self.has_event = false;
            return Ok(false);
        }
        if line.starts_with(':') {
            return Ok(false); // comment / keep-alive
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
                    self.event.data.push('\n');
                }
                self.event.data.push_str(value);
                self.has_data = true;
            }
            "event" => {
                set(&mut self.event.event, value);
                self.has_event = true;
            }
            "id" => {
                set(&mut self.event.id, value);
                self.has_id = true;
            }
            _ => {} // `retry:` and unknown fields are ignored
        }
        Ok(false)
    }
}

/// `slot = Some(value)`, re-using the string already there.
fn set(slot: &mut Option<String>, value: &str) {
    let s = slot.get_or_insert_with(String::new);
    s.clear();
    s.push_str(value);
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
    fn three_way_splits_bom_and_reused_buffers() {
        // A BOM, an event with a name and an id, one without (its name and
        // id must not leak from the one before), multi-line data, a cut
        // `\r\n`, a comment.
        let text = b"\xEF\xBB\xBFevent: a\r\nid: 7\r\ndata: x\r\n\r\ndata: y\ndata: z\n\n: c\r\rdata: \xC3\xA9\r\n\r\n";
        let whole = all(&[text]);
        assert_eq!(whole.len(), 3);
        assert_eq!(
            whole[0],
            SseEvent {
                event: Some("a".into()),
                data: "x".into(),
                id: Some("7".into())
            }
        );
        assert_eq!(
            whole[1],
            SseEvent {
                event: None,
                data: "y\nz".into(),
                id: None
            }
        );
        assert_eq!(whole[2].data, "é");
        for a in 0..text.len() {
            for b in a..text.len() {
                assert_eq!(
                    all(&[&text[..a], &text[a..b], &text[b..]]),
                    whole,
                    "cuts at {a}, {b}"
                );
            }
        }
    }

    #[test]
    fn feed_each_stops_when_asked_and_passes_errors_through() {
        let mut p = SseParser::new();
        let mut seen = Vec::new();
        let stopped = p
            .feed_each(b"data: 1\n\ndata: 2\n\ndata: 3\n\n", |ev| {
                seen.push(ev.data.clone());
                Ok::<_, SseError>(ev.data == "2")
            })
            .unwrap();
        assert!(stopped);
        assert_eq!(seen, ["1", "2"]);
        let mut p = SseParser::new();
        assert_eq!(
            p.feed_each(b"data: \xFF\n\n", |_| Ok::<_, SseError>(false)),
            Err(SseError::InvalidUtf8)
        );
        let mut p = SseParser::new();
        assert_eq!(
            p.feed_each(b"data: 1\n\n", |_| Err::<bool, _>(SseError::Truncated)),
            Err(SseError::Truncated)
        );
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut p = SseParser::new();
        let chunk = vec![b'x'; 1 << 20];
        let mut result = Ok(Vec::new());
        for _ in 0..5 {
            result = p.feed(&chunk);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(SseError::LineTooLong));
    }

    #[test]
    fn lone_cr_line_endings() {
        assert_eq!(all(&[b"data: a\r\rdata: b\r", b"\r"]).len(), 2);
    }
}
