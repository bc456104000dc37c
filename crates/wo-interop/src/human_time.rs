//! Times as the neighbours write them.
//!
//! the profiles layout (product §9) stores human local times without a zone (`Dec 06, 2025 05:14 PM`,
//! Python's `%b %d, %Y %I:%M %p`; meta files use `2025-12-06 04:52 PM`).
//! Mapping them to UTC needs an offset the file does not carry, so callers
//! choose one ([`LocalOffset`]). the CLI chat format (product §9) writes ISO-8601, sometimes with an
//! offset or none at all.

use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};
use wo_format::Timestamp;

/// How zone-less local times map to UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalOffset {
    /// One fixed offset for every timestamp (tests; or a known zone without
    /// daylight saving).
    Fixed(UtcOffset),
    /// The machine's zone rules at each timestamp's date (so daylight saving
    /// is honoured). The `time` crate refuses to read the zone while other
    /// threads run (it is unsound on some platforms); the importers then fall
    /// back to UTC and say so in a warning.
    System,
}

impl LocalOffset {
    /// UTC instant of a local wall-clock time; `None` when the system offset
    /// cannot be determined.
    pub fn to_utc(&self, local: PrimitiveDateTime) -> Option<OffsetDateTime> {
        match self {
            LocalOffset::Fixed(o) => Some(local.assume_offset(*o)),
            LocalOffset::System => {
                // The offset depends on the instant, which depends on the
                // offset: guess with the wall time read as UTC, then refine
                // once (enough except inside a DST gap, where any answer is
                // a guess).
                let first = UtcOffset::local_offset_at(local.assume_utc()).ok()?;
                let guess = local.assume_offset(first);
                let second = UtcOffset::local_offset_at(guess).ok()?;
                Some(local.assume_offset(second))
            }
        }
    }

    /// Local wall-clock time of a UTC instant; `None` when the system offset
    /// cannot be determined.
    pub fn to_local(&self, utc: OffsetDateTime) -> Option<PrimitiveDateTime> {
        let offset = match self {
            LocalOffset::Fixed(o) => *o,
            LocalOffset::System => UtcOffset::local_offset_at(utc).ok()?,
        };
        let local = utc.to_offset(offset);
        Some(PrimitiveDateTime::new(local.date(), local.time()))
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Parses `Dec 06, 2025 05:14 PM`. Lenient where a human or another locale
/// setting might differ: case, full or abbreviated English month names, one
/// or two digit day and hour, and a 24-hour clock when AM/PM is absent.
pub fn parse_human(s: &str) -> Option<PrimitiveDateTime> {
    let tokens: Vec<&str> = s.split_whitespace().collect();
    if !(4..=5).contains(&tokens.len()) {
        return None;
    }
    let month_token = tokens[0].trim_end_matches('.').to_ascii_lowercase();
    if month_token.len() < 3 {
        return None;
    }
    let month_index = MONTHS.iter().position(|m| m.starts_with(&month_token))?;
    let day: u8 = small_number(tokens[1].trim_end_matches(','), 1, 2)?;
    let year: i32 = small_number(tokens[2].trim_end_matches(','), 4, 4)?;
    let (h, m) = tokens[3].split_once(':')?;
    let mut hour: u8 = small_number(h, 1, 2)?;
    let minute: u8 = small_number(m, 2, 2)?;
    if let Some(ampm) = tokens.get(4) {
        let pm = match ampm.to_ascii_uppercase().as_str() {
            "AM" => false,
            "PM" => true,
            _ => return None,
        };
        if !(1..=12).contains(&hour) {
            return None;
        }
        hour = hour % 12 + if pm { 12 } else { 0 };
    }
    let month = Month::try_from(month_index as u8 + 1).ok()?;
    let date = Date::from_calendar_date(year, month, day).ok()?;
    let time = Time::from_hms(hour, minute, 0).ok()?;
    Some(PrimitiveDateTime::new(date, time))
}

fn small_number<T: std::str::FromStr>(s: &str, min_len: usize, max_len: usize) -> Option<T> {
    if s.len() < min_len || s.len() > max_len || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses a meta file's `created_at` (`2025-12-06 04:52 PM`), also
/// accepting the message form.
pub(crate) fn parse_created_at(s: &str) -> Option<PrimitiveDateTime> {
    let mut tokens = s.split_whitespace();
    let (date, clock) = (tokens.next()?, tokens.next()?);
    let ampm = tokens.next();
    if tokens.next().is_some() {
        return parse_human(s);
    }
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return parse_human(s);
    }
    let month = Month::try_from(small_number::<u8>(m, 1, 2)?).ok()?;
    let (month_name, day, year) = (MONTHS[usize::from(u8::from(month)) - 1], d, y);
    let human = match ampm {
        Some(a) => format!("{month_name} {day}, {year} {clock} {a}"),
        None => format!("{month_name} {day}, {year} {clock}"),
    };
    parse_human(&human)
}

/// Formats as the profiles layout's (product §9) messages do: `Dec 06, 2025 05:14 PM`.
pub fn format_human(dt: PrimitiveDateTime) -> String {
    let (hour12, ampm) = twelve_hour(dt.hour());
    format!(
        "{} {:02}, {:04} {:02}:{:02} {}",
        month_abbrev(dt.month()),
        dt.day(),
        dt.year(),
        hour12,
        dt.minute(),
        ampm
    )
}

/// Formats as the profiles layout's (product §9) meta files do: `2025-12-06 04:52 PM`.
pub(crate) fn format_created_at(dt: PrimitiveDateTime) -> String {
    let (hour12, ampm) = twelve_hour(dt.hour());
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} {}",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        hour12,
        dt.minute(),
        ampm
    )
}

fn twelve_hour(hour: u8) -> (u8, &'static str) {
    let ampm = if hour < 12 { "AM" } else { "PM" };
    let h = match hour % 12 {
        0 => 12,
        h => h,
    };
    (h, ampm)
}

fn month_abbrev(m: Month) -> String {
    let full = MONTHS[usize::from(u8::from(m)) - 1];
    let mut s = full[..3].to_owned();
    s[..1].make_ascii_uppercase();
    s
}

/// Parses ISO-8601 as the CLI chat format (product §9) may hold it. Returns the instant and whether
/// the text carried a zone (`Z` or an offset); zone-less text is read as UTC.
pub(crate) fn parse_iso(s: &str) -> Option<(OffsetDateTime, bool)> {
    use time::format_description::well_known::Rfc3339;
    let mut text = s.trim().to_owned();
    // RFC 3339 allows a space for `T` in prose; the parser wants the letter.
    if text.len() > 10 && text.as_bytes()[10] == b' ' {
        text.replace_range(10..11, "T");
    }
    if let Ok(t) = OffsetDateTime::parse(&text, &Rfc3339) {
        return Some((t, true));
    }
    let zoned = format!("{text}Z");
    OffsetDateTime::parse(&zoned, &Rfc3339)
        .ok()
        .map(|t| (t, false))
}

/// The state-file form of an instant: whole seconds as `…SSZ`, otherwise
/// with the shortest exact fraction.
pub(crate) fn to_timestamp(t: OffsetDateTime) -> Timestamp {
    let t = t.to_offset(UtcOffset::UTC);
    if t.nanosecond() == 0 {
        return Timestamp::from_unix(t.unix_timestamp());
    }
    let frac = format!("{:09}", t.nanosecond());
    let text = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        frac.trim_end_matches('0')
    );
    Timestamp::parse(&text).unwrap_or_else(|_| Timestamp::from_unix(t.unix_timestamp()))
}

/// The instant a state-file timestamp denotes.
pub(crate) fn from_timestamp(ts: &Timestamp) -> OffsetDateTime {
    let (secs, nanos) = ts.instant();
    OffsetDateTime::from_unix_timestamp(secs)
        .map(|t| t + time::Duration::nanoseconds(i64::from(nanos)))
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// Nanoseconds since the epoch, for arithmetic on instants.
pub(crate) fn nanos_of(t: OffsetDateTime) -> i128 {
    t.unix_timestamp_nanos()
}

/// The instant `nanos` after the epoch (clamped to the representable range).
pub(crate) fn from_nanos(nanos: i128) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::{datetime, offset};

    #[test]
    fn parses_and_formats_the_seed_form() {
        let dt = parse_human("Dec 06, 2025 05:14 PM").unwrap();
        assert_eq!(dt, datetime!(2025-12-06 17:14));
        assert_eq!(format_human(dt), "Dec 06, 2025 05:14 PM");
        for (text, at) in [
            ("Dec 06, 2025 12:03 AM", datetime!(2025-12-06 0:03)),
            ("Dec 06, 2025 12:03 PM", datetime!(2025-12-06 12:03)),
            ("december 6, 2025 5:14 pm", datetime!(2025-12-06 17:14)),
            ("Sept 6, 2025 17:14", datetime!(2025-09-06 17:14)),
        ] {
            assert_eq!(parse_human(text).unwrap(), at, "{text}");
        }
        assert_eq!(
            format_human(datetime!(2025-12-06 0:03)),
            "Dec 06, 2025 12:03 AM"
        );
        assert_eq!(
            format_created_at(datetime!(2025-12-06 16:52)),
            "2025-12-06 04:52 PM"
        );
    }

    #[test]
    fn parsing_is_lenient_but_not_sloppy() {
        for bad in [
            "",
            "Dec 32, 2025 05:14 PM",
            "Dec 06, 2025 13:14 PM",
            "Dec 06, 2025 05:60 PM",
            "Feb 29, 2025 05:14 PM",
            "Ju 06, 2025 05:14 PM",
            "Dec 06, 25 05:14 PM",
            "Dec 06, 2025 05:14 XM",
            "2025-12-06T17:14:00Z",
        ] {
            assert!(parse_human(bad).is_none(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn fixed_offsets_convert_both_ways() {
        let o = LocalOffset::Fixed(offset!(+1));
        let utc = o.to_utc(datetime!(2025-12-06 17:14)).unwrap();
        assert_eq!(to_timestamp(utc).as_str(), "2025-12-06T16:14:00Z");
        assert_eq!(o.to_local(utc).unwrap(), datetime!(2025-12-06 17:14));
    }

    #[test]
    fn iso_forms_of_seed_001() {
        let (t, zoned) = parse_iso("2025-10-20T12:01:10Z").unwrap();
        assert!(zoned);
        assert_eq!(to_timestamp(t).as_str(), "2025-10-20T12:01:10Z");
        let (t, _) = parse_iso("2025-10-20T14:01:10.250+02:00").unwrap();
        assert_eq!(to_timestamp(t).as_str(), "2025-10-20T12:01:10.25Z");
        let (t, zoned) = parse_iso("2025-10-20 12:01:10").unwrap();
        assert!(!zoned);
        assert_eq!(to_timestamp(t).as_str(), "2025-10-20T12:01:10Z");
        assert!(parse_iso("yesterday").is_none());
    }
}
