//! Summaries over repetitions: median with min and max.

/// Median, minimum and maximum of a set of values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median (mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of values.
    pub count: usize,
}

impl Summary {
    /// Summarises `values`, ignoring NaNs; `None` when nothing is left.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: v[0],
            max: v[n - 1],
            count: n,
        })
    }
}

/// The nearest-rank percentile (`p` in 0..=100) of `values`: the smallest value with at least
/// `p`% of the values at or below it. `None` for no values.
pub fn nearest_rank(values: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p.clamp(0.0, 100.0) / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// Formats an integer-like figure with thousands separators: `12,345,678`.
pub fn thousands(value: f64) -> String {
    let rounded = value.round();
    let digits = format!("{:.0}", rounded.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if rounded < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Formats a relative change `a / b - 1` as a signed percentage: `+31.2%`.
pub fn percent_change(a: f64, b: f64) -> String {
    if b == 0.0 || a.is_nan() || b.is_nan() {
        return "n/a".to_string();
    }
    format!("{:+.1}%", (a / b - 1.0) * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(Summary::of(&[5.0, 1.0, 3.0]).unwrap().median, 3.0);
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        assert!(Summary::of(&[f64::NAN]).is_none());
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v = [15.0, 20.0, 35.0, 40.0, 50.0];
        assert_eq!(nearest_rank(&v, 5.0), Some(15.0));
        assert_eq!(nearest_rank(&v, 30.0), Some(20.0));
        assert_eq!(nearest_rank(&v, 40.0), Some(20.0));
        assert_eq!(nearest_rank(&v, 50.0), Some(35.0));
        assert_eq!(nearest_rank(&v, 100.0), Some(50.0));
        assert_eq!(nearest_rank(&[], 50.0), None);
        let s = Summary::of(&[3.0, 9.0, 1.0, 7.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.count), (5.0, 1.0, 9.0, 4));
    }

    #[test]
    fn formats() {
        assert_eq!(thousands(17_519_100.0), "17,519,100");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(-1234.0), "-1,234");
        assert_eq!(percent_change(130.0, 100.0), "+30.0%");
        assert_eq!(percent_change(1.0, 0.0), "n/a");
    }
}
