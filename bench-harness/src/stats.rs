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
    fn formats() {
        assert_eq!(thousands(17_519_100.0), "17,519,100");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(-1234.0), "-1,234");
        assert_eq!(percent_change(130.0, 100.0), "+30.0%");
        assert_eq!(percent_change(1.0, 0.0), "n/a");
    }
}
