//! Records shared by the store's test files.

use wo_format::{Message, Timestamp};

/// A fixed instant `secs` seconds after a base, so runs are repeatable.
pub fn ts(secs: i64) -> Timestamp {
    Timestamp::from_unix(1_800_000_000 + secs)
}

/// Message `n`: its own time, title and content, so its id is distinct.
pub fn msg(n: i64) -> Message {
    Message::new(
        "alec",
        ts(n),
        format!("m{n}"),
        format!("<p>message {n}</p>"),
    )
}
