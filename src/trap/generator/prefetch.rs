//! A cache prefetch hint: the one CPU instruction the Markov walk needs that safe Rust has no
//! word for.
//!
//! A walk step's cost is one cache miss on a multi-megabyte model. Stepping several sentences in
//! turn only overlaps those misses if the CPU can look far enough ahead, and a load that misses
//! holds up everything behind it. A prefetch does not: the walk asks for the line it will need
//! one round later, goes on with the other sentences, and reads the line when it is there.

#![allow(unsafe_code)]

/// Hints that `slice[index]` will be read soon. Does nothing else: an index past the end is
/// harmless, and targets without a stable prefetch instruction ignore the hint.
#[inline(always)]
pub(crate) fn prefetch<T>(slice: &[T], index: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let address = slice.as_ptr().wrapping_add(index).cast::<i8>();
        // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has. A prefetch never
        // faults and never changes memory or registers, whatever the address, so any address
        // (computed with `wrapping_add`, without dereferencing) is sound.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slice, index);
}
