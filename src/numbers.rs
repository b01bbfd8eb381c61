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
