//! Log-scale bucket arithmetic for the completion-latency histogram of issue 14.
//!
//! HdrHistogram-style: a value's bucket comes from the position of its highest set bit and
//! the [`SUB_BITS`] bits below it, so every power of two is split into `1 << SUB_BITS` equal
//! sub-buckets. With `SUB_BITS = 3` a bucket is never wider than 1/8 of its lower bound, so
//! reporting a bucket's lower bound for any value in it is off by less than 1/8 of the value.
//! Values below `2 << SUB_BITS` (16 ns) get one bucket each and are exact.
//!
//! The index costs a `clz`, a shift and an add: no division, no floating point, no branch.
//! [`BUCKETS_U64`] buckets cover all of u64; how many of them a slot stores (and where the
//! storage lives) is the recording side's choice, which clamps with [`clamp_index`].

/// Bits below the highest set bit that pick the sub-bucket.
pub const SUB_BITS: u32 = 3;
/// Sub-buckets per power of two (8: the relative error is at most 1/8).
pub const SUB_BUCKETS: u64 = 1 << SUB_BITS;
/// Buckets needed to hold every u64 value.
pub const BUCKETS_U64: usize = bucket_index(u64::MAX) + 1;

/// The bucket of `v` (ns). Monotonic in `v`; `bucket_index(0) == 0`.
#[inline(always)]
pub const fn bucket_index(v: u64) -> usize {
    // For v < 16, (v | 15) has 60 leading zeros: shift 0 and the index is v itself.
    // Otherwise shift = (highest bit) - SUB_BITS and v >> shift lies in [8, 16).
    let shift = (64 - SUB_BITS - 1) - (v | (2 * SUB_BUCKETS - 1)).leading_zeros();
    ((shift as u64) * SUB_BUCKETS + (v >> shift)) as usize
}

/// The bucket of `v` when only buckets `0..buckets` are stored: everything beyond goes into
/// the last one (its upper bound is then reported as open).
#[inline(always)]
pub const fn clamp_index(v: u64, buckets: usize) -> usize {
    let i = bucket_index(v);
    if i < buckets {
        i
    } else {
        buckets - 1
    }
}

/// Inclusive bounds `(lo, hi)` in ns of bucket `i` (`i < BUCKETS_U64`): a value `v` has
/// `bucket_index(v) == i` exactly when `lo <= v <= hi`.
pub const fn bucket_bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB_BUCKETS {
        return (i, i);
    }
    let shift = (i / SUB_BUCKETS - 1) as u32;
    let mantissa = SUB_BUCKETS + (i % SUB_BUCKETS);
    let lo = mantissa << shift;
    (lo, lo + ((1u64 << shift) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(v: u64) {
        let i = bucket_index(v);
        assert!(i < BUCKETS_U64, "v={v} i={i}");
        let (lo, hi) = bucket_bounds(i);
        assert!(lo <= v && v <= hi, "v={v} i={i} lo={lo} hi={hi}");
        // Relative error: reporting lo for v is off by (v - lo) <= (hi - lo) <= v / 8.
        assert!(
            (hi - lo) as u128 * SUB_BUCKETS as u128 <= lo.max(1) as u128 || hi == lo,
            "v={v} width {} over lo {lo}",
            hi - lo
        );
        assert!(
            (v - lo) as u128 * SUB_BUCKETS as u128 <= v as u128,
            "v={v} lo={lo}"
        );
    }

    #[test]
    fn covers_u64_in_496_buckets() {
        assert_eq!(BUCKETS_U64, 496);
        assert_eq!(bucket_bounds(BUCKETS_U64 - 1).1, u64::MAX);
        // 10 s lies well inside the range.
        assert!(bucket_index(10_000_000_000) < BUCKETS_U64 - 1);
    }

    #[test]
    fn exhaustive_small_values() {
        for v in 0..=(1u64 << 20) {
            check(v);
        }
        for v in 0..16 {
            assert_eq!(bucket_index(v), v as usize, "values below 16 ns are exact");
        }
    }

    #[test]
    fn buckets_tile_u64_at_every_edge() {
        let mut next = 0u64;
        for i in 0..BUCKETS_U64 {
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(
                lo,
                next,
                "bucket {i} starts where {} ended",
                i.saturating_sub(1)
            );
            assert!(hi >= lo);
            assert_eq!(bucket_index(lo), i);
            assert_eq!(bucket_index(hi), i);
            if lo > 0 {
                assert_eq!(bucket_index(lo - 1), i - 1);
            }
            if hi < u64::MAX {
                assert_eq!(bucket_index(hi + 1), i + 1);
            }
            check(lo);
            check(hi);
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    #[test]
    fn clamp_puts_the_tail_in_the_last_stored_bucket() {
        let n = bucket_index(10_000_000_000) + 1;
        assert_eq!(clamp_index(10_000_000_000, n), n - 1);
        assert_eq!(clamp_index(u64::MAX, n), n - 1);
        assert_eq!(clamp_index(5_000, n), bucket_index(5_000));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn any_u64_lies_in_its_bucket_within_one_eighth(v in any::<u64>()) {
            check(v);
        }

        #[test]
        fn any_magnitude_lies_in_its_bucket(bits in 0u32..=64, low in any::<u64>()) {
            // any::<u64>() almost never draws small values; this spreads over magnitudes:
            // `bits` is the position of the highest set bit plus one (0: the value 0).
            let v = if bits == 0 {
                0
            } else {
                let top = 1u64 << (bits - 1);
                top | (low & (top - 1))
            };
            check(v);
        }

        #[test]
        fn monotonic(a in any::<u64>(), b in any::<u64>()) {
            let (a, b) = (a.min(b), a.max(b));
            prop_assert!(bucket_index(a) <= bucket_index(b));
        }
    }
}
