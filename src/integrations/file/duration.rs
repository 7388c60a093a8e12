//! Durations as Spring Boot writes them: `100ms`, `1s`, `2m`, ISO-8601 `PT0.1S`, or a bare
//! number of milliseconds.

use core::time::Duration;

/// Why a duration was refused; the caller words the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DurationError {
    Negative,
    TooLarge,
    Invalid,
}

const NANOS_PER_SEC: i128 = 1_000_000_000;

/// Parses Spring's two styles (its `DurationStyle`): ISO-8601 when the text starts with an
/// optional sign and `P`, else "simple": an optional sign, digits and an optional unit
/// (`ns`, `us`, `ms`, `s`, `m`, `h`, `d`, any case; none means milliseconds).
pub(crate) fn parse(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let nanos =
        if unsigned.starts_with(['P', 'p']) { parse_iso(text)? } else { parse_simple(text)? };
    from_nanos(nanos)
}

/// A whole number of milliseconds, as YAML and TOML integers are read.
pub(crate) fn from_millis(n: i64) -> Result<Duration, DurationError> {
    from_nanos(i128::from(n) * 1_000_000)
}

fn from_nanos(nanos: i128) -> Result<Duration, DurationError> {
    if nanos < 0 {
        return Err(DurationError::Negative);
    }
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| DurationError::TooLarge)?;
    // The remainder is below 10^9, so it fits.
    let sub = u32::try_from(nanos % NANOS_PER_SEC).map_err(|_| DurationError::TooLarge)?;
    Ok(Duration::new(secs, sub))
}

/// A signed whole number: an optional sign and 1 to 19 digits (Java's `long`).
fn signed_digits(s: &str) -> Result<i128, DurationError> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DurationError::Invalid);
    }
    let digits = digits.trim_start_matches('0');
    if digits.len() > 19 {
        return Err(DurationError::TooLarge);
    }
    let value: i128 =
        if digits.is_empty() { 0 } else { digits.parse().map_err(|_| DurationError::Invalid)? };
    Ok(if neg { -value } else { value })
}

fn parse_simple(text: &str) -> Result<i128, DurationError> {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let per_unit: i128 = match unit.to_ascii_lowercase().as_str() {
        "ns" => 1,
        "us" => 1_000,
        "" | "ms" => 1_000_000,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3_600 * NANOS_PER_SEC,
        "d" => 86_400 * NANOS_PER_SEC,
        _ => return Err(DurationError::Invalid),
    };
    Ok(signed_digits(number)? * per_unit)
}

/// Java's `Duration.parse`: `[-+]P[nD][T[nH][nM][n[.f]S]]`, case-insensitive, each number
/// signed, at least one part, and at least one part after `T`.
fn parse_iso(text: &str) -> Result<i128, DurationError> {
    let upper = text.to_ascii_uppercase();
    let (neg, rest) = match upper.as_bytes().first() {
        Some(b'-') => (true, &upper[1..]),
        Some(b'+') => (false, &upper[1..]),
        _ => (false, upper.as_str()),
    };
    let rest = rest.strip_prefix('P').ok_or(DurationError::Invalid)?;
    let (date, time) = match rest.find('T') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut total: i128 = 0;
    let mut parts = 0;
    if !date.is_empty() {
        let days = date.strip_suffix('D').ok_or(DurationError::Invalid)?;
        total += signed_digits(days)? * 86_400 * NANOS_PER_SEC;
        parts += 1;
    }
    if let Some(mut time) = time {
        if time.is_empty() {
            return Err(DurationError::Invalid);
        }
        for (unit, per_unit) in [('H', 3_600 * NANOS_PER_SEC), ('M', 60 * NANOS_PER_SEC)] {
            if let Some(i) = time.find(unit) {
                total += signed_digits(&time[..i])? * per_unit;
                time = &time[i + 1..];
                parts += 1;
            }
        }
        if !time.is_empty() {
            let seconds = time.strip_suffix('S').ok_or(DurationError::Invalid)?;
            total += parse_iso_seconds(seconds)?;
            parts += 1;
        }
    }
    if parts == 0 {
        return Err(DurationError::Invalid);
    }
    Ok(if neg { -total } else { total })
}

/// `n` or `n.f` (or `n,f`) seconds, with up to 9 fraction digits; the sign of `n` applies
/// to the fraction too, as in Java.
fn parse_iso_seconds(s: &str) -> Result<i128, DurationError> {
    let (whole, fraction) = match s.find(['.', ',']) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    };
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DurationError::Invalid);
    }
    let secs = signed_digits(whole)?;
    let mut frac: i128 = 0;
    for (i, b) in fraction.bytes().enumerate() {
        frac += i128::from(b - b'0') * 10i128.pow(8 - i as u32);
    }
    let negative = whole.starts_with('-');
    Ok(secs * NANOS_PER_SEC + if negative { -frac } else { frac })
}

/// Formats a duration the way Spring users write it: the largest unit that is exact
/// (`100ms`, `1s`, `90s`, `2m`, `250us`), `0` for zero, `unbounded` for `Duration::MAX`.
pub(crate) fn format(d: Duration) -> String {
    if d == Duration::MAX {
        return "unbounded".to_owned();
    }
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0".to_owned();
    }
    let units: [(u128, &str); 6] = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    for (per_unit, name) in units {
        if nanos % per_unit == 0 {
            return format!("{}{name}", nanos / per_unit);
        }
    }
    unreachable!("every duration is a whole number of nanoseconds")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn simple_style_units() {
        assert_eq!(parse("100ms"), Ok(ms(100)));
        assert_eq!(parse("100"), Ok(ms(100)));
        assert_eq!(parse("1s"), Ok(ms(1000)));
        assert_eq!(parse("2m"), Ok(ms(120_000)));
        assert_eq!(parse("1h"), Ok(ms(3_600_000)));
        assert_eq!(parse("1d"), Ok(ms(86_400_000)));
        assert_eq!(parse("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse("10ns"), Ok(Duration::from_nanos(10)));
        assert_eq!(parse("10MS"), Ok(ms(10)));
        assert_eq!(parse(" +5s "), Ok(ms(5000)));
        assert_eq!(parse("-0ms"), Ok(ms(0)));
    }

    #[test]
    fn simple_style_rejects() {
        assert_eq!(parse("-5ms"), Err(DurationError::Negative));
        assert_eq!(parse("1.5s"), Err(DurationError::Invalid));
        assert_eq!(parse("5 ms"), Err(DurationError::Invalid));
        assert_eq!(parse("5sec"), Err(DurationError::Invalid));
        assert_eq!(parse("ms"), Err(DurationError::Invalid));
        assert_eq!(parse(""), Err(DurationError::Invalid));
        assert_eq!(parse("99999999999999999999ms"), Err(DurationError::TooLarge));
        assert_eq!(parse("9999999999999999999d"), Err(DurationError::TooLarge));
    }

    #[test]
    fn iso_style() {
        assert_eq!(parse("PT0.1S"), Ok(ms(100)));
        assert_eq!(parse("pt0.1s"), Ok(ms(100)));
        assert_eq!(parse("PT1M30S"), Ok(ms(90_000)));
        assert_eq!(parse("PT2H"), Ok(ms(7_200_000)));
        assert_eq!(parse("P1D"), Ok(ms(86_400_000)));
        assert_eq!(parse("P1DT1S"), Ok(ms(86_401_000)));
        assert_eq!(parse("PT0,5S"), Ok(ms(500)));
        assert_eq!(parse("PT0.000000001S"), Ok(Duration::from_nanos(1)));
        assert_eq!(parse("PT1M-30S"), Ok(ms(30_000)));
        assert_eq!(parse("-PT-1S"), Ok(ms(1000)));
        assert_eq!(parse("-PT1S"), Err(DurationError::Negative));
        assert_eq!(parse("PT-0.5S"), Err(DurationError::Negative));
    }

    #[test]
    fn iso_style_rejects() {
        for bad in
            ["P", "PT", "P1H", "PT1D", "PT1S1M", "PT0.1234567890S", "PT.5S", "P1W", "PTS", "PT1M1M"]
        {
            assert_eq!(parse(bad), Err(DurationError::Invalid), "{bad}");
        }
    }

    #[test]
    fn integers_are_milliseconds() {
        assert_eq!(from_millis(250), Ok(ms(250)));
        assert_eq!(from_millis(-1), Err(DurationError::Negative));
        assert!(from_millis(i64::MAX).is_ok());
    }

    #[test]
    fn format_picks_the_largest_exact_unit() {
        assert_eq!(format(ms(100)), "100ms");
        assert_eq!(format(ms(1000)), "1s");
        assert_eq!(format(ms(90_000)), "90s");
        assert_eq!(format(ms(120_000)), "2m");
        assert_eq!(format(Duration::from_micros(250)), "250us");
        assert_eq!(format(Duration::ZERO), "0");
        assert_eq!(format(Duration::MAX), "unbounded");
    }
}
