//! Small number helpers shared by the page generator, trap URLs and the rules: a cheap
//! uniform draw, and decimal formatting without going through `fmt` on hot paths.

use rand::Rng;

/// A uniform integer in `0..n` (Lemire's multiply-shift; the bias is below 2^-32 for our `n`).
pub fn below<R: Rng + ?Sized>(rng: &mut R, n: usize) -> usize {
    ((rng.next_u32() as u64 * n as u64) >> 32) as usize
}

/// Appends `value` zero-padded to `width` digits, without going through `fmt`.
pub fn push_number(out: &mut String, value: usize, width: usize) {
    let mut digits = [b'0'; 20];
    let mut len = 0;
    let mut rest = value;
    while rest > 0 || len == 0 {
        digits[len] = b'0' + (rest % 10) as u8;
        rest /= 10;
        len += 1;
    }
    for _ in len..width {
        out.push('0');
    }
    for &digit in digits[..len].iter().rev() {
        out.push(digit as char);
    }
}
