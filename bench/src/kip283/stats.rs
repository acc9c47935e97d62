//! Median and spread of repeated measurements (the machine is shared, so every figure is a
//! median over several runs, shown with its minimum and maximum).
//!
//! Must never: hide a sample (no outlier dropping).

use serde::{Deserialize, Serialize};

/// Median, minimum and maximum of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Middle sample (mean of the two middle ones for an even count).
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// How many samples.
    pub count: usize,
}

impl Spread {
    /// The spread of `samples`; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let middle = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[middle]
        } else {
            (sorted[middle - 1] + sorted[middle]) / 2.0
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            count: sorted.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let odd = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(
            (odd.median, odd.min, odd.max, odd.count),
            (2.0, 1.0, 3.0, 3)
        );
        let even = Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(even.median, 2.5);
        assert!(Spread::of(&[]).is_none());
    }

    proptest! {
        #[test]
        fn median_lies_between_min_and_max(samples in prop::collection::vec(-1e9f64..1e9, 1..50)) {
            let spread = Spread::of(&samples).unwrap();
            prop_assert!(spread.min <= spread.median && spread.median <= spread.max);
            prop_assert_eq!(spread.count, samples.len());
        }
    }
}
