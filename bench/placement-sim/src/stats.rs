//! Small statistics helpers for the placement simulator: moments, order statistics, a normal
//! sampler and an exact weighted quantile for latency percentiles.

use rand::Rng;

/// Mean of `xs` (0 for none).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Population standard deviation of `xs`.
pub fn std_dev(xs: &[f64]) -> f64 {
    let m = mean(xs);
    mean(&xs.iter().map(|x| (x - m) * (x - m)).collect::<Vec<_>>()).sqrt()
}

/// max − min of `xs` (0 for none).
pub fn range(xs: &[f64]) -> f64 {
    let max = xs.iter().copied().fold(f64::MIN, f64::max);
    let min = xs.iter().copied().fold(f64::MAX, f64::min);
    if xs.is_empty() {
        0.0
    } else {
        max - min
    }
}

/// Median of `xs` (0 for none).
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Largest of `xs` (0 for none).
pub fn max(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(0.0, f64::max)
}

/// A standard normal draw (Box–Muller; one of the pair is discarded to keep the RNG stream
/// simple to reason about).
pub fn normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A Poisson draw by inversion (fine for the small means used here).
pub fn poisson<R: Rng + ?Sized>(rng: &mut R, mean: f64) -> u32 {
    let limit = (-mean).exp();
    let mut product: f64 = rng.gen();
    let mut count = 0;
    while product > limit && count < 10_000 {
        product *= rng.gen::<f64>();
        count += 1;
    }
    count
}

/// The weighted `q`-quantile of `samples` (value, weight), exactly: the smallest value whose
/// cumulative weight (its own included, values in ascending order) reaches `q` of the total.
/// No buckets and no range, so a backlog delay of any size is reported as it is (the earlier
/// log histogram clamped everything above 120 s into its top bucket). Sorts `samples` in place;
/// 0 for no samples or no positive weight; weights that are not positive and finite are ignored.
pub fn weighted_quantile(samples: &mut [(f64, f64)], q: f64) -> f64 {
    let usable = |w: f64| w.is_finite() && w > 0.0;
    let total: f64 = samples.iter().map(|s| s.1).filter(|w| usable(*w)).sum();
    if total <= 0.0 {
        return 0.0;
    }
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let goal = q.clamp(0.0, 1.0) * total;
    let mut acc = 0.0;
    let mut last = 0.0;
    for &(value, weight) in samples.iter() {
        if !usable(weight) {
            continue;
        }
        acc += weight;
        last = value;
        if acc >= goal {
            return value;
        }
    }
    // Rounding left the running sum a hair under the goal: the largest weighted value.
    last
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    #[test]
    fn moments() {
        assert_eq!(mean(&[1.0, 3.0]), 2.0);
        assert_eq!(std_dev(&[1.0, 3.0]), 1.0);
        assert_eq!(range(&[4.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0]), 3.0);
    }

    #[test]
    fn weighted_quantile_is_exact_and_unclamped() {
        // 98 % of the weight at 10 ms, 2 % at 500 s: the p99 is the 500 s delay itself, far
        // above the old histogram's 120 s top.
        let mut s = vec![(500_000.0, 2.0), (10.0, 98.0)];
        assert_eq!(weighted_quantile(&mut s, 0.99), 500_000.0);
        assert_eq!(weighted_quantile(&mut s, 0.98), 10.0);
        assert_eq!(weighted_quantile(&mut s, 0.5), 10.0);
        // Weight decides, not the count of samples.
        let mut s = vec![(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (4.0, 97.0)];
        assert_eq!(weighted_quantile(&mut s, 0.03), 3.0);
        assert_eq!(weighted_quantile(&mut s, 0.031), 4.0);
        // Zero, negative and non-finite weights do not count; nothing usable gives 0.
        let mut s = vec![(7.0, 0.0), (8.0, -1.0), (9.0, f64::NAN), (3.0, 1.0)];
        assert_eq!(weighted_quantile(&mut s, 0.99), 3.0);
        assert_eq!(weighted_quantile(&mut [], 0.99), 0.0);
        assert_eq!(weighted_quantile(&mut [(5.0, 0.0)], 0.5), 0.0);
    }

    #[test]
    fn normal_and_poisson_are_sane() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let xs: Vec<f64> = (0..20_000).map(|_| normal(&mut rng)).collect();
        assert!(mean(&xs).abs() < 0.05);
        assert!((std_dev(&xs) - 1.0).abs() < 0.05);
        let ps: Vec<f64> = (0..20_000)
            .map(|_| f64::from(poisson(&mut rng, 4.0)))
            .collect();
        assert!((mean(&ps) - 4.0).abs() < 0.1);
    }
}
