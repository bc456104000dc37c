//! UTC timestamps as the state file writes them: `YYYY-MM-DDTHH:MM:SS[.f]Z`
//! on read, and `YYYY-MM-DDTHH:MM:SS.ffffffZ` (microseconds) for new ones, so
//! two edits in one second are still ordered by when they happened.
//!
//! A [`Timestamp`] keeps the exact text it was read from, so merge and
//! re-serialisation never rewrite a user's timestamps, and orders by the
//! instant it denotes (text breaks ties), because lexicographic order is wrong
//! once fractional seconds appear (`…05.5Z` sorts before `…05Z` as text).

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A validated UTC timestamp; see the module docs.
#[derive(Clone, Debug)]
pub struct Timestamp {
    text: String,
    /// Seconds since the Unix epoch.
    seconds: i64,
    nanos: u32,
}

/// Why a string is not a state-file timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a UTC timestamp of the form YYYY-MM-DDTHH:MM:SS[.fff]Z")]
pub struct TimestampError(pub String);

impl Timestamp {
    /// Parses `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z` with calendar checks.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        let err = || TimestampError(text.to_owned());
        let b = text.as_bytes();
        if b.len() < 20 || b[b.len() - 1] != b'Z' {
            return Err(err());
        }
        let digits = |range: std::ops::Range<usize>| -> Result<u32, TimestampError> {
            let mut v = 0u32;
            for &c in &b[range] {
                if !c.is_ascii_digit() {
                    return Err(err());
                }
                v = v * 10 + u32::from(c - b'0');
            }
            Ok(v)
        };
        if b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
            return Err(err());
        }
        let year = digits(0..4)? as i32;
        let month = digits(5..7)? as u8;
        let day = digits(8..10)? as u8;
        let hour = digits(11..13)?;
        let minute = digits(14..16)?;
        let second = digits(17..19)?;
        let mut nanos = 0u32;
        let rest = &b[19..b.len() - 1];
        if !rest.is_empty() {
            if rest[0] != b'.' || rest.len() < 2 || rest.len() > 10 {
                return Err(err());
            }
            let frac = digits(20..20 + rest.len() - 1)?;
            nanos = frac * 10u32.pow((10 - rest.len()) as u32);
        }
        if hour > 23 || minute > 59 || second > 59 {
            return Err(err());
        }
        let month = time::Month::try_from(month).map_err(|_| err())?;
        let date = time::Date::from_calendar_date(year, month, day).map_err(|_| err())?;
        let seconds = i64::from(date.to_julian_day() - UNIX_EPOCH_JULIAN_DAY) * 86_400
            + i64::from(hour * 3600 + minute * 60 + second);
        Ok(Timestamp {
            text: text.to_owned(),
            seconds,
            nanos,
        })
    }

    /// The current time, in microseconds (`…SS.ffffffZ`).
    pub fn now() -> Self {
        let nanos = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
        Self::from_unix_micros(i64::try_from(nanos / 1000).unwrap_or(i64::MAX))
    }

    /// The current time, or the first microsecond after `prev` when the
    /// clock is not past it: what a change of something dated `prev` is
    /// stamped with, so the change always orders after what it changed.
    pub fn now_after(prev: &Timestamp) -> Self {
        let now = Self::now();
        if now > *prev { now } else { prev.next_micro() }
    }

    /// The first whole microsecond strictly after this instant.
    pub fn next_micro(&self) -> Self {
        Self::from_unix_micros(self.unix_micros().saturating_add(1))
    }

    /// A whole-second timestamp from Unix seconds (clamped to years 0000–9999).
    pub fn from_unix(seconds: i64) -> Self {
        let seconds = seconds.clamp(MIN_UNIX, MAX_UNIX);
        let text = Self::whole_seconds_text(seconds);
        Timestamp {
            text,
            seconds,
            nanos: 0,
        }
    }

    /// A microsecond timestamp (`…SS.ffffffZ`) from Unix microseconds
    /// (clamped to years 0000–9999).
    pub fn from_unix_micros(micros: i64) -> Self {
        let seconds = micros.div_euclid(1_000_000);
        let frac = micros.rem_euclid(1_000_000) as u32;
        if !(MIN_UNIX..=MAX_UNIX).contains(&seconds) {
            return Self::from_unix(seconds);
        }
        let mut text = Self::whole_seconds_text(seconds);
        text.pop(); // 'Z'
        text.push_str(&format!(".{frac:06}Z"));
        Timestamp {
            text,
            seconds,
            nanos: frac * 1000,
        }
    }

    fn whole_seconds_text(seconds: i64) -> String {
        let dt = time::OffsetDateTime::from_unix_timestamp(seconds)
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            dt.year(),
            u8::from(dt.month()),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second()
        )
    }

    /// Microseconds since the Unix epoch (finer digits dropped).
    pub fn unix_micros(&self) -> i64 {
        self.seconds
            .saturating_mul(1_000_000)
            .saturating_add(i64::from(self.nanos / 1000))
    }

    /// The text exactly as read or written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Seconds since the Unix epoch (fraction dropped).
    pub fn unix_seconds(&self) -> i64 {
        self.seconds
    }

    /// The instant as (seconds, nanoseconds) — the ordering key.
    pub fn instant(&self) -> (i64, u32) {
        (self.seconds, self.nanos)
    }
}

const UNIX_EPOCH_JULIAN_DAY: i32 = 2_440_588;
const MIN_UNIX: i64 = -62_167_219_200; // 0000-01-01T00:00:00Z
const MAX_UNIX: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z

impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Timestamp {}
impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> Ordering {
        self.instant()
            .cmp(&other.instant())
            .then_with(|| self.text.cmp(&other.text))
    }
}
impl std::hash::Hash for Timestamp {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_whole_and_fractional_seconds() {
        let a = Timestamp::parse("2026-02-22T20:11:05Z").unwrap();
        let b = Timestamp::parse("2026-02-22T20:11:05.5Z").unwrap();
        assert_eq!(a.unix_seconds(), 1_771_791_065);
        assert!(a < b, "fractional part must order after the whole second");
        assert_eq!(b.instant().1, 500_000_000);
    }

    #[test]
    fn rejects_bad_forms_and_calendar_dates() {
        for bad in [
            "2026-02-22 20:11:05Z",
            "2026-02-22T20:11:05",
            "2026-02-22T20:11:05+01:00",
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00.1234567890Z",
            "２026-01-01T00:00:00Z",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn now_has_microseconds_and_next_micro_is_strictly_later() {
        let now = Timestamp::now();
        let text = now.as_str();
        assert_eq!(text.len(), "2026-02-22T20:11:05.123456Z".len(), "{text}");
        assert_eq!(Timestamp::parse(text).unwrap(), now);
        // Whole seconds, microseconds and finer digits all move on.
        for t in [
            "2026-02-22T20:11:05Z",
            "2026-02-22T20:11:05.999999Z",
            "2026-02-22T20:11:05.1234567Z",
        ] {
            let t = Timestamp::parse(t).unwrap();
            let next = t.next_micro();
            assert!(next > t, "{next} after {t}");
            assert_eq!(Timestamp::parse(next.as_str()).unwrap(), next);
        }
        assert_eq!(
            Timestamp::parse("2026-02-22T20:11:05.999999Z")
                .unwrap()
                .next_micro()
                .as_str(),
            "2026-02-22T20:11:06.000000Z"
        );
        // A change of something dated in the future still orders after it.
        let future = Timestamp::from_unix(4_000_000_000);
        assert!(Timestamp::now_after(&future) > future);
        let past = Timestamp::from_unix(1_000_000_000);
        let after = Timestamp::now_after(&past);
        assert!(after > past && after <= Timestamp::now());
    }

    #[test]
    fn from_unix_round_trips() {
        let t = Timestamp::from_unix(1_771_791_065);
        assert_eq!(t.as_str(), "2026-02-22T20:11:05Z");
        assert_eq!(Timestamp::parse(t.as_str()).unwrap(), t);
    }
}
