//! Parsing `--at WHEN`: a moment in time, or an operation id.

use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp, Zoned};

/// What `--at` named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// A moment, milliseconds since the Unix epoch.
    Time(i64),
    /// An operation id prefix (hex).
    Operation(String),
}

fn weekday(name: &str) -> Option<Weekday> {
    Some(match name {
        "monday" | "mon" => Weekday::Monday,
        "tuesday" | "tue" => Weekday::Tuesday,
        "wednesday" | "wed" => Weekday::Wednesday,
        "thursday" | "thu" => Weekday::Thursday,
        "friday" | "fri" => Weekday::Friday,
        "saturday" | "sat" => Weekday::Saturday,
        "sunday" | "sun" => Weekday::Sunday,
        _ => return None,
    })
}

fn at_local(dt: DateTime, tz: &TimeZone) -> Result<i64, String> {
    dt.to_zoned(tz.clone())
        .map(|z| z.timestamp().as_millisecond())
        .map_err(|e| e.to_string())
}

/// Parses WHEN relative to `now` in time zone `tz`. Accepted: RFC 3339
/// (`2026-11-01T14:00:00+01:00`), a local date and time (`2026-11-01 14:00[:ss]`), a date
/// (`2026-11-01`, meaning its start), `now`, `today`, `yesterday` (start of that day),
/// `N minutes|hours|days|weeks ago`, `last monday` (start of the most recent Monday before
/// today), or an operation id (at least 6 hex digits).
pub fn parse_when(input: &str, now: &Zoned) -> Result<When, String> {
    let s = input.trim().to_ascii_lowercase();
    let tz = now.time_zone();
    if s.is_empty() {
        return Err("empty time".into());
    }
    if let Ok(ts) = s.parse::<Timestamp>() {
        return Ok(When::Time(ts.as_millisecond()));
    }
    if let Ok(dt) = s.replace('t', " ").parse::<DateTime>() {
        return at_local(dt, tz).map(When::Time);
    }
    if let Ok(dt) = DateTime::strptime("%Y-%m-%d %H:%M", &s) {
        return at_local(dt, tz).map(When::Time);
    }
    if let Ok(d) = s.parse::<Date>() {
        return at_local(d.to_datetime(jiff::civil::Time::midnight()), tz).map(When::Time);
    }
    let today = now.date();
    match s.as_str() {
        "now" => return Ok(When::Time(now.timestamp().as_millisecond())),
        "today" => {
            return at_local(today.to_datetime(jiff::civil::Time::midnight()), tz).map(When::Time)
        }
        "yesterday" => {
            let y = today.yesterday().map_err(|e| e.to_string())?;
            return at_local(y.to_datetime(jiff::civil::Time::midnight()), tz).map(When::Time);
        }
        _ => {}
    }
    let words: Vec<&str> = s.split_whitespace().collect();
    if let ["last", day] = words.as_slice() {
        let wd = weekday(day).ok_or_else(|| format!("unknown weekday {day:?}"))?;
        let mut d = today.yesterday().map_err(|e| e.to_string())?;
        while d.weekday() != wd {
            d = d.yesterday().map_err(|e| e.to_string())?;
        }
        return at_local(d.to_datetime(jiff::civil::Time::midnight()), tz).map(When::Time);
    }
    if let [n, unit, "ago"] = words.as_slice() {
        let n: i64 = n.parse().map_err(|_| format!("{n:?} is not a number"))?;
        let span = match unit.trim_end_matches('s') {
            "second" | "sec" => Span::new().try_seconds(n),
            "minute" | "min" => Span::new().try_minutes(n),
            "hour" => Span::new().try_hours(n),
            "day" => Span::new().try_days(n),
            "week" => Span::new().try_weeks(n),
            other => {
                return Err(format!(
                    "unknown unit {other:?} (use minutes, hours, days or weeks)"
                ))
            }
        }
        .map_err(|_| format!("{input:?} is too far in the past"))?;
        let t = now.checked_sub(span).map_err(|e| e.to_string())?;
        return Ok(When::Time(t.timestamp().as_millisecond()));
    }
    if s.len() >= 6 && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(When::Operation(s));
    }
    Err(format!(
        "cannot understand {input:?} as a time; use e.g. \"2026-11-01 14:00\", 2026-11-01, yesterday, \"3 days ago\", \"last monday\" or an operation id"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Zoned {
        "2026-12-02T15:30:00+01:00[Europe/Paris]".parse().unwrap()
    }

    fn t(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn accepted_forms() {
        let n = now();
        assert_eq!(
            parse_when("2026-11-01T14:00:00Z", &n),
            Ok(When::Time(t("2026-11-01T14:00:00Z")))
        );
        assert_eq!(
            parse_when("2026-11-01 14:00", &n),
            Ok(When::Time(t("2026-11-01T13:00:00Z")))
        );
        assert_eq!(
            parse_when("2026-11-01", &n),
            Ok(When::Time(t("2026-10-31T23:00:00Z")))
        );
        assert_eq!(
            parse_when("yesterday", &n),
            Ok(When::Time(t("2026-11-30T23:00:00Z")))
        );
        assert_eq!(
            parse_when("3 days ago", &n),
            Ok(When::Time(t("2026-11-29T14:30:00Z")))
        );
        assert_eq!(
            parse_when("90 minutes ago", &n),
            Ok(When::Time(t("2026-12-02T13:00:00Z")))
        );
        assert_eq!(
            parse_when("2 weeks ago", &n),
            Ok(When::Time(t("2026-11-18T14:30:00Z")))
        );
        // 2026-12-02 is a Wednesday; last monday is 2026-11-30.
        assert_eq!(
            parse_when("last monday", &n),
            Ok(When::Time(t("2026-11-29T23:00:00Z")))
        );
        assert_eq!(
            parse_when("last wednesday", &n),
            Ok(When::Time(t("2026-11-24T23:00:00Z")))
        );
        assert_eq!(
            parse_when("3f9c2a1b", &n),
            Ok(When::Operation("3f9c2a1b".into()))
        );
    }

    #[test]
    fn rejected_forms_say_what_is_accepted() {
        let n = now();
        for bad in [
            "",
            "soon",
            "3 fortnights ago",
            "last blursday",
            "x days ago",
        ] {
            assert!(parse_when(bad, &n).is_err(), "{bad}");
        }
        assert!(parse_when("soon", &n).unwrap_err().contains("3 days ago"));
        // Far past or future amounts are errors, not overflows.
        for bad in [
            "99999999999999999999 days ago",
            "9223372036854775807 weeks ago",
        ] {
            assert!(parse_when(bad, &n).is_err(), "{bad}");
        }
    }

    const VALID: &[&str] = &[
        "2026-11-01T14:00:00Z",
        "2026-11-01 14:00",
        "2026-11-01",
        "yesterday",
        "3 days ago",
        "90 minutes ago",
        "last monday",
        "3f9c2a1b",
    ];

    proptest::proptest! {
        /// Valid `--at` times with characters changed, inserted, removed or repeated.
        #[test]
        fn damaged_times_never_panic(
            which in 0..VALID.len(),
            edits in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>(), proptest::prelude::any::<u8>()), 1..6),
        ) {
            let bytes = lifeos_store::mutate::mutate(VALID[which].as_bytes(), &edits);
            let _ = parse_when(&String::from_utf8_lossy(&bytes), &now());
        }
    }
}
