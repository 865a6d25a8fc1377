//! Saturating u128 arithmetic for plan figures.
//!
//! Config values are capped at 2^40 and flags at 2^32, yet a product of four of them (a
//! workspace per token times batch times context) can pass 2^128. A figure that saturates
//! becomes `u128::MAX`, which the 64-bit check of every reported byte count then refuses
//! (one line, exit 2), instead of wrapping to a small wrong number.

use std::ops::{Add, Mul};

/// A u128 whose `+` and `*` saturate at `u128::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Sat(pub u128);

impl Sat {
    /// The value (`u128::MAX` when it saturated).
    pub fn get(self) -> u128 {
        self.0
    }
}

impl From<u64> for Sat {
    fn from(v: u64) -> Self {
        Sat(u128::from(v))
    }
}

impl Add for Sat {
    type Output = Sat;
    fn add(self, other: Sat) -> Sat {
        Sat(self.0.saturating_add(other.0))
    }
}

impl std::ops::AddAssign for Sat {
    fn add_assign(&mut self, other: Sat) {
        *self = *self + other;
    }
}

impl Mul for Sat {
    type Output = Sat;
    fn mul(self, other: Sat) -> Sat {
        Sat(self.0.saturating_mul(other.0))
    }
}

impl Add<u64> for Sat {
    type Output = Sat;
    fn add(self, other: u64) -> Sat {
        self + Sat::from(other)
    }
}

impl Mul<u64> for Sat {
    type Output = Sat;
    fn mul(self, other: u64) -> Sat {
        self * Sat::from(other)
    }
}

impl Mul<Sat> for u64 {
    type Output = Sat;
    fn mul(self, other: Sat) -> Sat {
        Sat::from(self) * other
    }
}

impl std::iter::Sum for Sat {
    fn sum<I: Iterator<Item = Sat>>(iter: I) -> Sat {
        iter.fold(Sat(0), |a, b| a + b)
    }
}

#[cfg(test)]
mod tests {
    use super::Sat;

    #[test]
    fn saturates_instead_of_wrapping() {
        let big = Sat::from(1u64 << 40);
        assert_eq!((big * big * big).get(), 1u128 << 120);
        assert_eq!((big * big * big * big).get(), u128::MAX);
        assert_eq!((Sat(u128::MAX) + 1).get(), u128::MAX);
        assert_eq!((3 * Sat::from(5u64) + 1).get(), 16);
        assert_eq!(
            [Sat(u128::MAX), Sat(1)].into_iter().sum::<Sat>().get(),
            u128::MAX
        );
    }
}
