//! Small statistics helpers for the placement simulator: moments, order statistics, a normal
//! sampler and a log-spaced weighted histogram for latency percentiles.

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

/// Weighted histogram over log-spaced buckets from `lo` to `hi` (values outside are clamped).
#[derive(Debug, Clone)]
pub struct LogHistogram {
    lo_ln: f64,
    step_ln: f64,
    weights: Vec<f64>,
}

impl LogHistogram {
    /// `buckets` log-spaced buckets over [lo, hi].
    pub fn new(lo: f64, hi: f64, buckets: usize) -> Self {
        Self {
            lo_ln: lo.ln(),
            step_ln: (hi.ln() - lo.ln()) / buckets as f64,
            weights: vec![0.0; buckets],
        }
    }

    /// Adds `value` with `weight`.
    #[cfg(test)]
    pub fn add(&mut self, value: f64, weight: f64) {
        let bucket = self.bucket(value);
        self.add_to_bucket(bucket, weight);
    }

    /// The bucket `value` falls in (precompute it when one value is added many times).
    pub fn bucket(&self, value: f64) -> usize {
        let i = ((value.max(1e-12).ln() - self.lo_ln) / self.step_ln).floor();
        (i.max(0.0) as usize).min(self.weights.len() - 1)
    }

    /// Adds `weight` to bucket `bucket` (from [`LogHistogram::bucket`]).
    pub fn add_to_bucket(&mut self, bucket: usize, weight: f64) {
        if let Some(w) = self.weights.get_mut(bucket) {
            *w += weight;
        }
    }

    /// The value below which `q` of the weight lies (bucket upper edge).
    pub fn quantile(&self, q: f64) -> f64 {
        let total: f64 = self.weights.iter().sum();
        if total <= 0.0 {
            return 0.0;
        }
        let mut acc = 0.0;
        for (i, w) in self.weights.iter().enumerate() {
            acc += w;
            if acc >= q * total {
                return (self.lo_ln + (i + 1) as f64 * self.step_ln).exp();
            }
        }
        (self.lo_ln + self.weights.len() as f64 * self.step_ln).exp()
    }

    /// Empties the histogram.
    pub fn clear(&mut self) {
        self.weights.iter_mut().for_each(|w| *w = 0.0);
    }
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
    fn histogram_quantile() {
        let mut h = LogHistogram::new(1.0, 1000.0, 300);
        h.add(10.0, 98.0);
        h.add(500.0, 2.0);
        let p50 = h.quantile(0.5);
        assert!((10.0..10.3).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((500.0..515.0).contains(&p99), "{p99}");
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
