//! Robust linear regression with non-negative coefficients: Huber's
//! weights by iteratively reweighted least squares, a term whose
//! coefficient comes out negative (or that the data cannot tell from the
//! others) left out and the rest fitted again.
//!
//! Six unknowns at most: the normal equations are solved by Gaussian
//! elimination here rather than with a linear-algebra crate, which would
//! bring far more than these forty lines.

/// Huber's constant, in units of the residuals' robust scale: 95 %
/// efficiency on normal errors.
const HUBER_K: f64 = 1.345;
const ITERATIONS: usize = 30;

/// The fitted coefficients (0 for a term left out), which terms were
/// left out because the data could not tell them from the others, and
/// which because they came out below 0 (the data shows no cost of theirs).
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    pub coef: Vec<f64>,
    pub singular: Vec<usize>,
    pub negative: Vec<usize>,
}

/// Fit `y ≈ x · coef` over the rows, coefficients ≥ 0; `terms` says
/// which columns may be used.
pub fn fit(x: &[Vec<f64>], y: &[f64], terms: &[bool]) -> Fit {
    let k = terms.len();
    let mut on: Vec<bool> = terms.to_vec();
    let mut singular = Vec::new();
    let mut negative = Vec::new();
    loop {
        let cols: Vec<usize> = (0..k).filter(|&j| on[j]).collect();
        let (coef, bad) = huber(x, y, &cols);
        if let Some(j) = bad {
            on[cols[j]] = false;
            singular.push(cols[j]);
            continue;
        }
        // The most negative coefficient leaves, and the rest are fitted
        // again: a time cannot shrink with work.
        let worst = coef
            .iter()
            .enumerate()
            .filter(|(_, c)| **c < 0.0)
            .min_by(|a, b| a.1.total_cmp(b.1));
        if let Some((j, _)) = worst {
            on[cols[j]] = false;
            negative.push(cols[j]);
            continue;
        }
        let mut full = vec![0.0; k];
        for (j, c) in cols.iter().zip(coef) {
            full[*j] = c;
        }
        singular.sort_unstable();
        negative.sort_unstable();
        return Fit {
            coef: full,
            singular,
            negative,
        };
    }
}

/// The standard error of each coefficient of a fit (0 for a term left
/// out): how far the data lets it move. Huber's weights and the
/// residuals' robust scale as in the fit; the covariance is
/// σ² (XᵀWX)⁻¹ over the terms kept. `None` when they cannot be told apart.
pub fn std_errors(x: &[Vec<f64>], y: &[f64], coef: &[f64], terms: &[bool]) -> Option<Vec<f64>> {
    let cols: Vec<usize> = (0..coef.len())
        .filter(|&j| terms[j] && coef[j] != 0.0)
        .collect();
    let n = cols.len();
    let resid: Vec<f64> = x
        .iter()
        .zip(y)
        .map(|(row, y)| y - row.iter().zip(coef).map(|(a, c)| a * c).sum::<f64>())
        .collect();
    let mut abs: Vec<f64> = resid.iter().map(|r| r.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let scale = abs.get(abs.len() / 2).copied().unwrap_or(0.0) / 0.6745;
    let cut = HUBER_K * scale;
    let w: Vec<f64> = resid
        .iter()
        .map(|r| {
            if r.abs() <= cut || cut <= 0.0 {
                1.0
            } else {
                cut / r.abs()
            }
        })
        .collect();
    let dof = (y.len() as f64 - n as f64).max(1.0);
    let sigma2 = resid.iter().zip(&w).map(|(r, w)| w * r * r).sum::<f64>() / dof;
    // Columns scaled to unit size, as in the fit, then (XᵀWX)⁻¹ by
    // Gauss-Jordan beside the identity.
    let mut size = vec![0.0f64; n];
    for row in x {
        for (s, j) in size.iter_mut().zip(&cols) {
            *s = s.max(row[*j].abs());
        }
    }
    let size: Vec<f64> = size.iter().map(|s| s.max(f64::MIN_POSITIVE)).collect();
    let mut a = vec![vec![0.0; 2 * n]; n];
    for (row, w) in x.iter().zip(&w) {
        for p in 0..n {
            for q in 0..n {
                a[p][q] += w * row[cols[p]] / size[p] * row[cols[q]] / size[q];
            }
        }
    }
    for (p, r) in a.iter_mut().enumerate() {
        r[n + p] = 1.0;
    }
    for p in 0..n {
        let pivot = (p..n).max_by(|&i, &j| a[i][p].abs().total_cmp(&a[j][p].abs()))?;
        if a[pivot][p].abs() < 1e-12 {
            return None;
        }
        a.swap(p, pivot);
        let pivot_row = a[p].clone();
        for (i, row) in a.iter_mut().enumerate() {
            if i != p {
                let f = row[p] / pivot_row[p];
                for (v, u) in row.iter_mut().zip(&pivot_row) {
                    *v -= f * u;
                }
            }
        }
    }
    let mut out = vec![0.0; coef.len()];
    for (p, j) in cols.iter().enumerate() {
        let inv = a[p][n + p] / a[p][p];
        out[*j] = (sigma2 * inv).max(0.0).sqrt() / size[p];
    }
    Some(out)
}

/// Huber IRLS over the columns `cols`; the coefficients, or the place in
/// `cols` of a column the others already explain.
fn huber(x: &[Vec<f64>], y: &[f64], cols: &[usize]) -> (Vec<f64>, Option<usize>) {
    let mut w = vec![1.0; y.len()];
    let mut coef = vec![0.0; cols.len()];
    for _ in 0..ITERATIONS {
        match weighted(x, y, &w, cols) {
            Ok(c) => coef = c,
            Err(j) => return (coef, Some(j)),
        }
        let resid: Vec<f64> = x
            .iter()
            .zip(y)
            .map(|(row, y)| {
                y - cols
                    .iter()
                    .zip(&coef)
                    .map(|(j, c)| row[*j] * c)
                    .sum::<f64>()
            })
            .collect();
        // The residuals' scale: their median absolute value / 0.6745.
        let mut abs: Vec<f64> = resid.iter().map(|r| r.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let scale = abs.get(abs.len() / 2).copied().unwrap_or(0.0) / 0.6745;
        if scale <= f64::EPSILON {
            break;
        }
        let cut = HUBER_K * scale;
        for (w, r) in w.iter_mut().zip(&resid) {
            *w = if r.abs() <= cut { 1.0 } else { cut / r.abs() };
        }
    }
    (coef, None)
}

/// Weighted least squares by the normal equations; `Err(j)` when column
/// `cols[j]` is a combination of those before it.
fn weighted(x: &[Vec<f64>], y: &[f64], w: &[f64], cols: &[usize]) -> Result<Vec<f64>, usize> {
    let n = cols.len();
    // Columns scaled to unit size, so that the pivot test means the same
    // for a per-token term and a per-step one.
    let mut scale = vec![0.0f64; n];
    for row in x {
        for (s, j) in scale.iter_mut().zip(cols) {
            *s = s.max(row[*j].abs());
        }
    }
    let mut a = vec![vec![0.0; n + 1]; n];
    for ((row, y), w) in x.iter().zip(y).zip(w) {
        for p in 0..n {
            let xp = row[cols[p]] / scale[p].max(f64::MIN_POSITIVE);
            for q in 0..n {
                a[p][q] += w * xp * row[cols[q]] / scale[q].max(f64::MIN_POSITIVE);
            }
            a[p][n] += w * xp * y;
        }
    }
    let total: f64 = w.iter().sum::<f64>().max(1.0);
    for p in 0..n {
        let pivot = (p..n)
            .max_by(|&i, &j| a[i][p].abs().total_cmp(&a[j][p].abs()))
            .expect("a row");
        if a[pivot][p].abs() < 1e-9 * total {
            return Err(p);
        }
        a.swap(p, pivot);
        let pivot_row = a[p].clone();
        for (i, row) in a.iter_mut().enumerate() {
            if i != p {
                let f = row[p] / pivot_row[p];
                for (x, y) in row.iter_mut().zip(&pivot_row).skip(p) {
                    *x -= f * y;
                }
            }
        }
    }
    Ok((0..n)
        .map(|p| a[p][n] / a[p][p] / scale[p].max(f64::MIN_POSITIVE))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_data_gives_its_coefficients_back() {
        // y = 2 + 0.5 a + 3 b.
        let x: Vec<Vec<f64>> = (0..20)
            .map(|i| vec![1.0, f64::from(i), f64::from(i % 3)])
            .collect();
        let y: Vec<f64> = x.iter().map(|r| 2.0 + 0.5 * r[1] + 3.0 * r[2]).collect();
        let f = fit(&x, &y, &[true, true, true]);
        for (c, want) in f.coef.iter().zip([2.0, 0.5, 3.0]) {
            assert!((c - want).abs() < 1e-9, "{:?}", f.coef);
        }
        assert!(f.singular.is_empty());
    }

    #[test]
    fn the_standard_errors_are_least_squares_ones_on_normal_data() {
        // y = 1 + 2 a + e over a = 0..9 ten times, e = +1 in the even tens
        // and −1 in the odd ones (at right angles to 1 and a, so the fit
        // is exact): the residuals are all 1 in size (none beyond Huber's
        // cut), σ² = 100 / 98; Σ (a − 4.5)² = 10 × 82.5 = 825, so se(slope) =
        // √(σ² / 825) and se(intercept) = √(σ² (1/100 + 4.5² / 825)).
        let x: Vec<Vec<f64>> = (0..100).map(|i| vec![1.0, f64::from(i % 10)]).collect();
        let y: Vec<f64> = (0..100)
            .map(|i| 1.0 + 2.0 * x[i][1] + if (i / 10) % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let f = fit(&x, &y, &[true, true]);
        let se = std_errors(&x, &y, &f.coef, &[true, true]).unwrap();
        let s2: f64 = 100.0 / 98.0;
        assert!((se[1] - (s2 / 825.0).sqrt()).abs() < 1e-6, "{se:?} {f:?}");
        assert!(
            (se[0] - (s2 * (0.01 + 20.25 / 825.0)).sqrt()).abs() < 1e-6,
            "{se:?}"
        );
    }

    #[test]
    fn outliers_hardly_move_the_fit() {
        let x: Vec<Vec<f64>> = (0..100).map(|i| vec![1.0, f64::from(i)]).collect();
        let mut y: Vec<f64> = x.iter().map(|r| 10.0 + r[1]).collect();
        // Three stalls of a second: least squares would move by ~30.
        for i in [5, 50, 95] {
            y[i] += 1000.0;
        }
        let f = fit(&x, &y, &[true, true]);
        assert!((f.coef[0] - 10.0).abs() < 0.5, "{:?}", f.coef);
        assert!((f.coef[1] - 1.0).abs() < 0.01, "{:?}", f.coef);
    }

    #[test]
    fn a_column_the_others_explain_and_a_negative_term_are_left_out() {
        // Column 2 is twice column 1; column 3 only lowers y.
        let x: Vec<Vec<f64>> = (0..30)
            .map(|i| {
                let a = f64::from(i % 7);
                vec![1.0, a, 2.0 * a, f64::from(i % 4)]
            })
            .collect();
        let y: Vec<f64> = x.iter().map(|r| 5.0 + r[1] - 0.1 * r[3]).collect();
        let f = fit(&x, &y, &[true, true, true, true]);
        assert_eq!(f.singular, vec![2]);
        assert_eq!(f.negative, vec![3]);
        assert_eq!(f.coef[2], 0.0);
        assert_eq!(f.coef[3], 0.0);
    }
}
