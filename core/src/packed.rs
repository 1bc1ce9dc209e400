//! A `u64` kept as two `u32` words.
//!
//! Aligned to 4 bytes, not 8: with 32-bit ticks no part of a dependency's state needs 8-byte
//! alignment, so it packs without padding on a 32-bit core (a `[T; 0]` for a protection compiled
//! out keeps `T`'s alignment, so even an unused 8-byte field would pad the whole state).

/// A `u64` in two 4-byte-aligned words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct U64([u32; 2]);

impl U64 {
    #[inline]
    #[allow(clippy::cast_possible_truncation)] // Each word is masked or shifted to 32 bits first.
    pub(crate) const fn of(v: u64) -> Self {
        Self([(v & 0xffff_ffff) as u32, (v >> 32) as u32])
    }

    #[inline]
    pub(crate) const fn get(self) -> u64 {
        let [low, high] = self.0;
        ((high as u64) << 32) | low as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_comes_back() {
        for v in [0, 1, 0xffff_ffff, 1 << 32, 0x1234_5678_9abc_def0, u64::MAX] {
            assert_eq!(U64::of(v).get(), v);
        }
        assert_eq!(core::mem::align_of::<U64>(), 4);
    }
}
