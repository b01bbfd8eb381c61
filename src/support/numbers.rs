//! Small number helpers shared by the page generator, trap URLs and the rules: a cheap
//! uniform draw, and decimal formatting without going through `fmt` on hot paths.

use rand::Rng;

/// A uniform integer in `0..n` (Lemire's multiply-shift; the bias is below 2^-32 for our `n`).
pub(crate) fn below<R: Rng + ?Sized>(rng: &mut R, n: usize) -> usize {
    ((rng.next_u32() as u64 * n as u64) >> 32) as usize
}

/// A number in decimal, zero-padded, formatted on the stack.
pub(crate) struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    /// `value` zero-padded to `width` digits (at most 20, which any `usize` fits).
    pub(crate) fn new(value: usize, width: usize) -> Self {
        let mut digits = [b'0'; 20];
        let mut start = digits.len();
        let mut rest = value;
        while rest > 0 || start == digits.len() {
            start -= 1;
            digits[start] = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        Decimal { digits, start: start.min(digits.len() - width.min(digits.len())) }
    }

    /// The digits.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }

    /// The digits as text.
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

/// Appends `value` zero-padded to `width` digits.
pub(crate) fn push_number(out: &mut Vec<u8>, value: usize, width: usize) {
    out.extend_from_slice(Decimal::new(value, width).as_bytes());
}

/// `seconds` since the Unix epoch as an RFC 3339 UTC time, e.g. `2026-12-04T09:30:00Z`.
pub(crate) fn rfc3339(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rest = seconds % 86_400;
    // Days to a civil date (Howard Hinnant's algorithm, proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest / 60 % 60, rest % 60)
}
