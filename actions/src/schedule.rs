//! The schedule of a time rule: the slots at which `lifeos watch` fires it.

/// A time rule's schedule: every `every_ms`, at a local time of day if given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// The period.
    pub every_ms: i64,
    /// Minutes after local midnight (then the period is whole days).
    pub at_min: Option<i64>,
}

const DAY_MS: i64 = 86_400_000;

impl Schedule {
    /// The first slot strictly after `after_ms`. Without a time of day, slots are the
    /// multiples of the period since the epoch; with one, they are that time on the
    /// days whose number since 1970-01-01 is a multiple of the period in days (local
    /// time, `tz`).
    pub fn next_after(&self, after_ms: i64, tz: &jiff::tz::TimeZone) -> i64 {
        let Some(at_min) = self.at_min else {
            return (after_ms.div_euclid(self.every_ms) + 1) * self.every_ms;
        };
        let days = (self.every_ms / DAY_MS).max(1);
        let local_day = |ms: i64| -> Option<jiff::civil::Date> {
            jiff::Timestamp::from_millisecond(ms)
                .ok()
                .map(|t| t.to_zoned(tz.clone()).date())
        };
        let epoch = jiff::civil::date(1970, 1, 1);
        let Some(mut day) = local_day(after_ms) else {
            return after_ms + self.every_ms;
        };
        for _ in 0..(days + 2) * 2 {
            let n = (day - epoch).get_days() as i64;
            if n.rem_euclid(days) == 0 {
                let time = jiff::civil::time((at_min / 60) as i8, (at_min % 60) as i8, 0, 0);
                if let Ok(z) = day.to_datetime(time).to_zoned(tz.clone()) {
                    let ms = z.timestamp().as_millisecond();
                    if ms > after_ms {
                        return ms;
                    }
                }
            }
            match day.tomorrow() {
                Ok(d) => day = d,
                Err(_) => break,
            }
        }
        after_ms + self.every_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_period_and_the_time_of_day() {
        let utc = jiff::tz::TimeZone::UTC;
        let s = Schedule {
            every_ms: 60_000,
            at_min: None,
        };
        assert_eq!(s.next_after(0, &utc), 60_000);
        assert_eq!(s.next_after(59_999, &utc), 60_000);
        assert_eq!(s.next_after(60_000, &utc), 120_000);
        let daily = Schedule {
            every_ms: DAY_MS,
            at_min: Some(9 * 60),
        };
        // 1970-01-01 10:00 UTC: the next 09:00 is the next day's.
        assert_eq!(
            daily.next_after(10 * 3_600_000, &utc),
            DAY_MS + 9 * 3_600_000
        );
        assert_eq!(daily.next_after(8 * 3_600_000, &utc), 9 * 3_600_000);
        let weekly = Schedule {
            every_ms: 7 * DAY_MS,
            at_min: Some(0),
        };
        assert_eq!(weekly.next_after(1, &utc), 7 * DAY_MS);
    }
}
